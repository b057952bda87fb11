import { spawn, type ChildProcess } from "child_process";
import path from "path";
import { Client } from "pg";
import { PROJECT_ROOT } from "../../lib/paths";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * The embedded PostgreSQL checks each second that a client whose statement it runs is still
 * there (lib/db/embedded.ts serverSettings): a process killed while its statement waits for a
 * row lock leaves no backend behind to take that lock, and the locks it held, later.
 */
describe("a client killed while its statement waits for a row lock", () => {
	let tdb: TestDatabase;
	let holder: Client;
	let child: ChildProcess | null = null;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		holder = new Client({ connectionString: tdb.url });
		await holder.connect();
		await holder.query("CREATE TABLE lock_probe (id int PRIMARY KEY)");
		await holder.query("INSERT INTO lock_probe VALUES (1)");
	});

	afterAll(async () => {
		child?.kill("SIGKILL");
		await holder?.end();
		await tdb?.drop();
	});

	// read apart from the holder: a transaction sees pg_stat_activity as at its first look
	const backends = async () =>
		(
			await tdb.db.query(
				`SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'doomed'`
			)
		)[0] as { wait_event_type: string | null }[];

	it("leaves no backend waiting once it is gone", async () => {
		await holder.query("BEGIN");
		await holder.query("SELECT id FROM lock_probe WHERE id = 1 FOR UPDATE");
		const script = `
			const { Client } = require(${JSON.stringify(path.join(PROJECT_ROOT, "node_modules", "pg"))});
			const c = new Client({ connectionString: ${JSON.stringify(tdb.url)}, application_name: "doomed" });
			c.connect().then(() => c.query("SELECT id FROM lock_probe WHERE id = 1 FOR UPDATE"));
			setInterval(() => {}, 1000);`;
		child = spawn(process.execPath, ["-e", script], { stdio: "inherit" });
		const until = async (done: () => Promise<boolean>, ms: number) => {
			const end = Date.now() + ms;
			while (!(await done()) && Date.now() < end) await new Promise(r => setTimeout(r, 50));
			return done();
		};
		expect(
			await until(async () => (await backends())[0]?.wait_event_type === "Lock", 10000)
		).toBe(true);
		const killed = Date.now();
		child.kill("SIGKILL");
		// the lock is still held: without the check the backend would wait for it
		expect(await until(async () => (await backends()).length === 0, 10000)).toBe(true);
		expect(Date.now() - killed).toBeLessThan(5000);
		await holder.query("ROLLBACK");
	}, 30000);
});
