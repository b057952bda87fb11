import { sharedBuffersMiB } from "../../lib/db/embedded";

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
