import { spawn, type ChildProcess } from "child_process";
import path from "path";
import { LeaderLock } from "../../lib/scheduling/leader";
import { PROJECT_ROOT } from "../../lib/paths";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * The scheduler's leadership is a lock held by the leader's connection, which also runs the
 * leader's work: a leader killed while PostgreSQL runs one of its statements gives the lock up
 * within seconds, not when the statement ends.
 */
describe("a scheduler leader killed in the middle of a statement", () => {
	let tdb: TestDatabase;
	let leader: ChildProcess | null = null;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		// the embedded server checks for lost clients itself (lib/db/embedded.ts); this database's
		// sessions do not, so what is tested is the leader's own setting, as on any server
		const name = new URL(tdb.url).pathname.slice(1);
		await tdb.db.query(`ALTER DATABASE ${name} SET client_connection_check_interval = 0`);
	});

	afterAll(async () => {
		leader?.kill("SIGKILL");
		await tdb?.drop();
	});

	it("leaves the lock to another replica within seconds", async () => {
		// a replica's process: leads, then runs a long statement on the leader's connection
		const script = `
			const { LeaderLock } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "lib", "scheduling", "leader.js"))});
			const lock = new LeaderLock({
				url: ${JSON.stringify(tdb.url)}, name: "doomed", retryMs: 60000,
				onAcquired: client => {
					console.log("leading");
					client.query("SELECT pg_sleep(60)").catch(() => undefined);
				},
				onLost: () => undefined
			});
			lock.start();
			setInterval(() => {}, 1000);`;
		leader = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
		await new Promise<void>((resolve, reject) => {
			leader!.stdout!.on(
				"data",
				(b: Buffer) => b.toString().includes("leading") && resolve()
			);
			leader!.once("exit", code => reject(new Error(`the leader exited (${code})`)));
		});
		let acquired = 0;
		const other = new LeaderLock({
			url: tdb.url,
			name: "survivor",
			retryMs: 100,
			onAcquired: () => (acquired = Date.now()),
			onLost: () => undefined
		});
		try {
			await other.start();
			expect(other.isLeader).toBe(false);
			const killed = Date.now();
			leader.kill("SIGKILL");
			while (!other.isLeader && Date.now() - killed < 20000)
				await new Promise(r => setTimeout(r, 50));
			expect(other.isLeader).toBe(true);
			// PostgreSQL checks the connection each second; without the check, 60 s
			expect(acquired - killed).toBeLessThan(5000);
		} finally {
			await other.stop();
		}
	}, 60000);
});
