import { serverSettings, sharedBuffersMiB } from "../../lib/db/embedded";

const GiB = 1024 * 1024 * 1024;

describe("sharedBuffersMiB (the embedded PostgreSQL's page cache)", () => {
	it("is a quarter of the machine's memory", () => {
		expect(sharedBuffersMiB(2 * GiB)).toBe(512);
	});

	it("stays between PostgreSQL's default 128 MiB and 1 GiB", () => {
		expect(sharedBuffersMiB(256 * 1024 * 1024)).toBe(128);
		expect(sharedBuffersMiB(24 * GiB)).toBe(1024);
	});
});

describe("serverSettings (the embedded PostgreSQL's)", () => {
	it("listens on loopback, sizes the page cache, analyzes growing tables and checks for lost clients within a second", () => {
		expect(serverSettings(2 * GiB)).toEqual([
			"listen_addresses=127.0.0.1",
			"max_connections=200",
			"shared_buffers=512MB",
			"fsync=on",
			"autovacuum_naptime=1",
			"client_connection_check_interval=1000"
		]);
	});
});
