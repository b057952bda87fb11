import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import { startProcess, waitUntil, type ServiceProcess } from "../helpers/process";

/**
 * Two OS processes over a real nats-server: the gateway alone in one (no database access), the
 * errors service in the other. A request to the gateway must reach the other process and back.
 */
describe("gateway and errors service in separate processes over NATS", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let gateway: ServiceProcess;
	let errors: ServiceProcess;
	let api: string;

	beforeAll(async () => {
		nats = await startNats();
		db = await createTestDatabase();
		const port = await freePort();
		api = `http://127.0.0.1:${port}/api`;
		gateway = startProcess({
			SERVICES: "api",
			TRANSPORTER: nats.url,
			NODE_ID: "cluster-gateway",
			PORT: String(port)
		});
		errors = startProcess({
			SERVICES: "errors",
			TRANSPORTER: nats.url,
			NODE_ID: "cluster-errors",
			DATABASE_URL: db.url
		});
		await waitUntil(
			async () => (await request("GET", `${api}/errors/`)).status === 200,
			30000,
			"the gateway to reach the errors service"
		).catch(err => {
			throw new Error(
				`${err.message}\ngateway:\n${gateway.output()}\nerrors:\n${errors.output()}`
			);
		});
	});

	afterAll(async () => {
		await gateway?.stop();
		await errors?.stop();
		await db?.drop();
		await nats?.stop();
	});

	it("serves the built-in errors from the other process", async () => {
		const res = await request("GET", `${api}/errors/?name=timeout`);
		expect(res.status).toBe(200);
		expect(res.body.count).toBe(1);
		expect(res.body.results[0]).toMatchObject({
			name: "timeout",
			category: "SYSTEM",
			is_builtin: true
		});
	});

	it("creates an error through the gateway, stored by the other process", async () => {
		const created = await request("POST", `${api}/errors/`, {
			name: "cluster-made",
			title: "Cluster Made",
			category: "DATA"
		});
		expect(created.status).toBe(201);
		expect(created.headers.get("location")).toBe(`${api}/errors/${created.body.id}/`);
		const [row] = (await db.db.query("SELECT name, category FROM error WHERE id = $1", {
			bind: [created.body.id]
		})) as [Array<{ name: string; category: string }>, unknown];
		expect(row[0]).toEqual({ name: "cluster-made", category: "DATA" });
	});

	it("carries validation errors back across the transporter as 400s", async () => {
		const res = await request("POST", `${api}/errors/`, { name: "x", category: "SYSTEM" });
		expect(res.status).toBe(400);
		expect(res.body.detail).toMatch(/^category: /);
	});

	it("answers 503 once the errors process has stopped", async () => {
		expect(await errors.stop("SIGTERM")).toBe(0);
		await waitUntil(
			async () => (await request("GET", `${api}/errors/`)).status === 503,
			30000,
			"the gateway to notice the errors service left"
		);
		const res = await request("GET", `${api}/errors/1/`);
		expect(res.status).toBe(503);
		expect(res.body.detail).toMatch(/not available/);
	});
});
