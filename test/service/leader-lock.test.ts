import { spawn, type ChildProcess } from "child_process";
import path from "path";
import { LeaderLock } from "../../lib/db/leader";
import { PROJECT_ROOT } from "../../lib/paths";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { freePort } from "../helpers/ports";
import { Relay } from "../helpers/relay";

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
			const { LeaderLock } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "lib", "db", "leader.js"))});
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

/**
 * PostgreSQL out of reach and back (a relay the test cuts, both sides, and opens again: the
 * server sees the lock's connection go and frees the lock): the replica that led leads again
 * within a fraction of a second of its return, not at its next try for a lock another holds.
 */
describe("the leader lock through a PostgreSQL outage", () => {
	let tdb: TestDatabase;
	let relay: Relay;
	let lock: LeaderLock | null = null;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		const target = new URL(tdb.url);
		relay = new Relay(await freePort(), { host: target.hostname, port: Number(target.port) });
		await relay.open();
	});

	afterAll(async () => {
		await lock?.stop();
		await relay?.cut();
		await tdb?.drop();
	});

	it("is lost when the connection goes and taken again within a second of its return", async () => {
		const url = new URL(tdb.url);
		url.port = String(relay.port);
		const events: string[] = [];
		lock = new LeaderLock({
			url: url.toString(),
			name: "through-outage",
			// a lock another holds is tried for every 60 s: what is measured is the reconnect
			retryMs: 60000,
			onAcquired: () => events.push("acquired"),
			onLost: reason => events.push(`lost: ${reason}`)
		});
		await lock.start();
		expect(events).toEqual(["acquired"]);

		await relay.cut();
		const cut = Date.now();
		while (lock.isLeader && Date.now() - cut < 5000) await new Promise(r => setTimeout(r, 20));
		expect(lock.isLeader).toBe(false);
		expect(events[1]).toMatch(/^lost: /);
		await new Promise(r => setTimeout(r, 3000));

		await relay.open();
		const back = Date.now();
		while (!lock.isLeader && Date.now() - back < 10000)
			await new Promise(r => setTimeout(r, 20));
		expect(lock.isLeader).toBe(true);
		const after = Date.now() - back;
		process.stdout.write(`leader lock taken again ${after} ms after PostgreSQL was back\n`);
		expect(after).toBeLessThan(1500);
		expect(events.filter(e => e === "acquired")).toHaveLength(2);
	}, 30000);
});
