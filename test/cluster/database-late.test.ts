import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { freePort } from "../helpers/ports";
import { startProcess, waitUntil, type ServiceProcess } from "../helpers/process";
import { Relay } from "../helpers/relay";

/**
 * A control plane started before its PostgreSQL: it waits, saying so every few seconds (host and
 * port, never the password), and starts once the database answers; stopped while it waits, it
 * exits at once. The process reaches the test's database through a relay that opens only
 * seconds after the process started (nothing listens on its port until then).
 */
describe("a control plane started before PostgreSQL", () => {
	let tdb: TestDatabase;
	let relay: Relay;
	let url: URL;
	let proc: ServiceProcess | null = null;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		const target = new URL(tdb.url);
		relay = new Relay(await freePort(), { host: target.hostname, port: Number(target.port) });
		url = new URL(tdb.url);
		url.port = String(relay.port);
	});

	afterAll(async () => {
		await proc?.stop("SIGKILL");
		await relay?.cut();
		await tdb?.drop();
	});

	const start = (port: number) =>
		startProcess({
			SERVICES: "api,errors,status",
			DATABASE_URL: url.toString(),
			PORT: String(port),
			NODE_ID: `late-db-${process.pid}`
		});

	it("waits for it, says so, and serves once it answers", async () => {
		const port = await freePort();
		proc = start(port);
		const waiting = `waiting for PostgreSQL at 127.0.0.1:${relay.port}: `;
		await waitUntil(async () => proc!.output().includes(waiting), 30000, "the first notice");
		await new Promise(r => setTimeout(r, 6000));
		// still there, still saying so (every 5 s), and never the password
		expect(proc.proc.exitCode).toBeNull();
		const output = proc.output();
		expect(output.split(waiting).length - 1).toBeGreaterThanOrEqual(2);
		expect(output).toMatch(/ECONNREFUSED/);
		expect(output).not.toContain(decodeURIComponent(url.password));

		await relay.open();
		const opened = Date.now();
		const api = `http://127.0.0.1:${port}/api`;
		await waitUntil(
			async () => (await request("GET", `${api}/errors/?page_size=1`)).status === 200,
			30000,
			"the API to serve"
		);
		process.stdout.write(`served ${Date.now() - opened} ms after PostgreSQL answered\n`);
		expect(proc.output()).toMatch(
			/PostgreSQL at 127\.0\.0\.1:\d+ answers \(after \d+ s\): starting/
		);

		const stopping = Date.now();
		expect(await proc.stop("SIGTERM")).toBe(0);
		expect(Date.now() - stopping).toBeLessThan(5000);
		expect(proc.output()).not.toMatch(/GracefulStopTimeoutError/);
		proc = null;
	}, 90000);

	it("exits at once on SIGTERM while it waits", async () => {
		await relay.cut();
		proc = start(await freePort());
		await waitUntil(
			async () => proc!.output().includes("waiting for PostgreSQL"),
			30000,
			"the notice"
		);
		const stopping = Date.now();
		expect(await proc.stop("SIGTERM")).toBe(0);
		expect(Date.now() - stopping).toBeLessThan(3000);
		proc = null;
	}, 60000);
});
