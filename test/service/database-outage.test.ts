import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type Reply, type TestApi } from "../helpers/broker";
import { freePort } from "../helpers/ports";
import { Relay } from "../helpers/relay";

/**
 * PostgreSQL out of reach: the API answers 503 with Retry-After (not 500) and serves again by
 * itself once the database is back. The service reaches the test's database through a relay that
 * the test cuts (every connection through it dropped, new ones refused) and opens again.
 */

function expectUnavailable(reply: Reply) {
	expect(reply.status).toBe(503);
	expect(reply.headers.get("retry-after")).toBe("5");
	expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
	expect(reply.body).toEqual({ detail: "The database is not available; try again shortly" });
}

describe("a PostgreSQL outage", () => {
	let tdb: TestDatabase;
	let relay: Relay;
	let app: TestApi;
	let made = 0;

	const create = () =>
		request("POST", `${app.api}/errors/`, { name: `outage-${++made}`, category: "DATA" });

	beforeAll(async () => {
		tdb = await createTestDatabase();
		const url = new URL(tdb.url);
		relay = new Relay(await freePort(), { host: url.hostname, port: Number(url.port) });
		await relay.open();
		url.port = String(relay.port);
		app = await startServices(url.toString(), ["api", "errors", "status"]);
	});

	afterAll(async () => {
		await app?.stop();
		await relay?.cut();
		await tdb?.drop();
	});

	it("is answered 503 with Retry-After while it lasts, then served again", async () => {
		expect((await create()).status).toBe(201);

		await relay.cut();
		// a write, a read of one record and a list: each needs the database
		expectUnavailable(await create());
		expectUnavailable(await request("GET", `${app.api}/errors/99999/`));
		expectUnavailable(await request("GET", `${app.api}/errors/?name=outage-1`));
		// routes that need no database are still served
		expect((await request("GET", `${app.api}/version/`)).status).toBe(200);

		await relay.open();
		const created = await create();
		expect(created.status).toBe(201);
		const [rows] = await tdb.db.query("SELECT name FROM error WHERE id = $1", {
			bind: [created.body.id]
		});
		expect(rows).toEqual([{ name: `outage-${made}` }]);
	});

	it("replaces connections the server terminated (57P01) without failing a request", async () => {
		expect((await request("GET", `${app.api}/errors/?page_size=1`)).status).toBe(200);
		const [terminated] = await tdb.db.query(
			`SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
			 WHERE datname = current_database() AND pid <> pg_backend_pid()`
		);
		expect(terminated.length).toBeGreaterThan(0);
		// Each terminated connection is dropped from the pool as pg reports it; a request that
		// came first would be told 503, never 500, and the next ones are served.
		const statuses: number[] = [];
		for (let i = 0; i < 20; i++) {
			const reply = await create();
			statuses.push(reply.status);
			if (reply.status !== 201) expectUnavailable(reply);
		}
		expect(statuses.slice(-10)).toEqual(Array(10).fill(201));
	});
});
