import os from "os";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { LeaderLock } from "../../lib/db/leader";

const QUIET = { retryMs: 60000, onAcquired: () => undefined, onLost: () => undefined };

let tdb: TestDatabase;
let app: TestApi;

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "status"]);
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

async function status() {
	const reply = await request("GET", `${app.api}/status/`);
	expect(reply.status).toBe(200);
	expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
	return reply.body;
}

const ZERO = { cpus: 0, mem: 0, disk: 0 };

describe("GET /status/", () => {
	it("reports an idle cluster on a fresh database", async () => {
		const body = await status();
		expect(Object.keys(body).sort()).toEqual([
			"master",
			"queue_depth",
			"resources",
			"scheduler",
			"warnings"
		]);
		expect(body.warnings).toEqual([]);
		expect(Object.keys(body.master).sort()).toEqual(["hostname", "is_online", "port"]);
		expect(body.master.hostname).toBe(os.hostname());
		expect(Number.isInteger(body.master.port)).toBe(true);
		expect(body.master.port).toBeGreaterThan(0);
		expect(body.master.port).toBe(Number(new URL(app.api).port));
		expect(body.master.is_online).toBe(true);
		expect(body.scheduler).toEqual({ hostname: null, is_online: false, is_paused: false });
		expect(body.queue_depth).toBe(0);
		expect(body.resources).toEqual({ total: ZERO, scheduled: ZERO, used: ZERO });
	});

	it("answers the same under /api/v3", async () => {
		const reply = await request("GET", `${app.api}/v3/status/`);
		expect(reply.status).toBe(200);
		expect(reply.body.scheduler.is_paused).toBe(false);
		expect(reply.body.queue_depth).toBe(0);
	});

	it("reports the scheduler's pause from the database", async () => {
		await tdb.db.query("UPDATE scheduler SET is_paused = true");
		expect((await status()).scheduler).toEqual({
			hostname: null,
			is_online: false,
			is_paused: true
		});
		await tdb.db.query("UPDATE scheduler SET is_paused = false");
		expect((await status()).scheduler.is_paused).toBe(false);
	});

	it("names the scheduler replica that leads (holds the lock in this database) as online", async () => {
		const other = await createTestDatabase();
		const elsewhere = new LeaderLock({ url: other.url, name: "replica-elsewhere", ...QUIET });
		const leader = new LeaderLock({ url: tdb.url, name: "replica-b", ...QUIET });
		const follower = new LeaderLock({ url: tdb.url, name: "replica-c", ...QUIET });
		try {
			// a leader of another database's cluster is not this one's
			await elsewhere.start();
			expect(elsewhere.isLeader).toBe(true);
			expect((await status()).scheduler.is_online).toBe(false);
			await leader.start();
			await follower.start();
			expect(follower.isLeader).toBe(false);
			expect((await status()).scheduler).toEqual({
				hostname: "replica-b",
				is_online: true,
				is_paused: false
			});
		} finally {
			await leader.stop();
			await follower.stop();
			await elsewhere.stop();
			await other.drop();
		}
		const body = await status();
		expect(body.scheduler).toEqual({ hostname: null, is_online: false, is_paused: false });
	});

	it("sums the resources of active nodes and of running executions, and counts the queue", async () => {
		const one = async (sql: string): Promise<number> => {
			const [rows] = await tdb.db.query(`${sql} RETURNING id`);
			return (rows as { id: number }[])[0].id;
		};
		const node = await one(
			`INSERT INTO node (hostname, slave_id, cpus_total, mem_total, disk_total)
			 VALUES ('host1', 'agent-1', 4, 1024.5, 2048)`
		);
		await one(
			`INSERT INTO node (hostname, slave_id, cpus_total, mem_total, disk_total)
			 VALUES ('host2', 'agent-2', 8, 2048, 4096)`
		);
		await one(
			`INSERT INTO node (hostname, slave_id, cpus_total, mem_total, disk_total, is_active)
			 VALUES ('gone', 'agent-3', 100, 100, 100, false)`
		);
		const jobType = await one(
			`INSERT INTO job_type (name, version, interface) VALUES ('jt', '1.0', '{}')`
		);
		const rev = await one(
			`INSERT INTO job_type_rev (job_type_id, revision_num, interface)
			 VALUES (${jobType}, 1, '{}')`
		);
		const event = await one(`INSERT INTO trigger_event (type) VALUES ('TEST')`);
		const newJob = () =>
			one(
				`INSERT INTO job (job_type_id, job_type_rev_id, event_id, priority, timeout, max_tries, data)
				 VALUES (${jobType}, ${rev}, ${event}, 100, 60, 3, '{}')`
			);
		const exe = (job: number, status: string, cpus: number) =>
			one(
				`INSERT INTO job_exe (job_id, job_type_id, status, timeout, node_id, cpus_scheduled,
				   mem_scheduled, disk_total_scheduled)
				 VALUES (${job}, ${jobType}, '${status}', 60, ${node}, ${cpus}, 128, 256)`
			);
		await exe(await newJob(), "RUNNING", 0.1);
		await exe(await newJob(), "RUNNING", 0.2);
		await exe(await newJob(), "COMPLETED", 99);
		for (let i = 0; i < 3; i++) {
			const job = await newJob();
			const queued = await exe(job, "QUEUED", 0);
			await one(
				`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				   mem_required, disk_in_required, disk_out_required, disk_total_required)
				 VALUES (${queued}, ${job}, ${jobType}, 100, 1, 64, 0, 64, 64)`
			);
		}

		const body = await status();
		expect(body.queue_depth).toBe(3);
		expect(body.resources).toEqual({
			total: { cpus: 12, mem: 3072.5, disk: 6144 },
			// rounded to one decimal as Scale 3.0 did: summed as floats, 0.30000000000000004
			scheduled: { cpus: 0.3, mem: 256, disk: 512 },
			used: ZERO
		});
	});
});

describe("GET /status/ with agents sharing a host", () => {
	it("says so, with what they offer in all; an agent out of its lease does not count", async () => {
		const [rows] = await tdb.db.query(
			`INSERT INTO node (hostname, slave_id, agent_id, cpus_total, mem_total, disk_total,
				last_heartbeat)
			 VALUES ('shared-host', 'sh-1', 'agent-1', 2, 1000, 1000, now()),
				('shared-host', 'sh-2', 'agent-2', 2, 1000, 1000, now()),
				('shared-host', 'sh-3', 'agent-3', 2, 1000, 1000, now() - interval '1 hour'),
				('alone', 'al-1', 'agent-4', 2, 1000, 1000, now())
			 RETURNING id`
		);
		const ids = (rows as { id: number }[]).map(r => r.id);
		try {
			const body = await status();
			expect(body.warnings).toEqual([
				`host shared-host runs 2 agents (nodes ${ids[0]}, ${ids[1]}) offering 4 cpus in all: unless each was given its share (AGENT_CPUS, AGENT_MEM_MIB, AGENT_DISK_MIB), the machine's resources are counted 2 times`
			]);
		} finally {
			await tdb.db.query(`DELETE FROM node WHERE id IN (${ids.join(",")})`);
		}
	});
});

describe("GET /version/", () => {
	it("answers the version beside the status", async () => {
		const reply = await request("GET", `${app.api}/version/`);
		expect(reply.status).toBe(200);
		expect(reply.body).toEqual({ version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
	});
});
