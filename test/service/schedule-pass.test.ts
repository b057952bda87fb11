import { Client } from "pg";
import { schedulePass, type PassOptions } from "../../lib/scheduling/claim";
import { clientSql, type Sql } from "../../lib/scheduling/sql";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * A scheduling pass on a pipelined connection, as the leader runs it: the first batch is read
 * with the context, assuming the previous pass's excluded job types, and read again when the
 * context excludes others.
 */

let tdb: TestDatabase;
let client: Client;
let sql: Sql;
let eventId: number;
let typeSeq = 0;

const q = async <T = any>(text: string, bind: unknown[] = []) =>
	(await tdb.db.query(text, { bind }))[0] as T[];

async function jobType(paused = false): Promise<{ id: number; revId: number }> {
	const iface = { version: "1.0", command: "/bin/true", input_data: [], output_data: [] };
	const [t] = await q<{ id: number }>(
		`INSERT INTO job_type (name, version, interface, is_paused) VALUES ($1, '1.0', $2, $3)
		 RETURNING id`,
		[`pass-type-${++typeSeq}`, JSON.stringify(iface), paused]
	);
	const [r] = await q<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, $2)
		 RETURNING id`,
		[t.id, JSON.stringify(iface)]
	);
	return { id: t.id, revId: r.id };
}

/** A queued job as the queue service makes one: job, execution and queue row. */
async function queueJob(type: { id: number; revId: number }, priority: number): Promise<number> {
	const [job] = await q<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
			timeout, max_tries, cpus_required, mem_required, disk_in_required, disk_out_required,
			data, queued, last_status_change)
		 VALUES ($1, $2, $3, 'QUEUED', $4, 1, 60, 3, 1, 64, 0, 0,
			'{"version": "1.0", "input_data": [], "output_data": []}', now(), now())
		 RETURNING id`,
		[type.id, type.revId, eventId, priority]
	);
	const [exe] = await q<{ id: number }>(
		`INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
		 VALUES ($1, $2, 'QUEUED', 60, now()) RETURNING id`,
		[job.id, type.id]
	);
	await q(
		`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required, mem_required,
			disk_in_required, disk_out_required, disk_total_required, queued)
		 VALUES ($1, $2, $3, $4, 1, 64, 0, 0, 0, now())`,
		[exe.id, job.id, type.id, priority]
	);
	return job.id;
}

const options = (likelyExcluded: number[]): PassOptions => ({
	agents: ["agent-1"],
	leaseMs: 60000,
	batchSize: 4,
	maxScanRows: 100,
	likelyExcluded
});

beforeAll(async () => {
	tdb = await createTestDatabase();
	client = new Client({ connectionString: tdb.url, pipeline: true });
	await client.connect();
	sql = clientSql(client);
	const [event] = await q<{ id: number }>(
		`INSERT INTO trigger_event (type, description, processed) VALUES ('USER', '{}', now())
		 RETURNING id`
	);
	eventId = event.id;
	await q(
		`INSERT INTO node (hostname, slave_id, agent_id, cpus_total, mem_total, disk_total,
			last_heartbeat)
		 VALUES ('host-1', 'slave-1', 'agent-1', 100, 100000, 100000, now())`
	);
});

afterAll(async () => {
	await client?.end();
	await tdb?.drop();
});

describe("a scheduling pass", () => {
	it("reads its first batch again when the context excludes job types the guess did not", async () => {
		const paused = await jobType(true);
		const other = await jobType();
		// a head of the paused type's work, a batch long
		for (let i = 0; i < 4; i++) await queueJob(paused, 1);
		const wanted = [await queueJob(other, 100), await queueJob(other, 100)];
		const pass = await schedulePass(sql, options([]));
		expect(pass.placed.map(p => p.job_id).sort()).toEqual(wanted.sort());
		expect(pass.excluded).toEqual([paused.id]);
		// read around the paused type: the guessed batch (its four rows) was not used
		expect(pass.scanned).toBe(2);
		expect(pass.stop).toBe("queue-end");

		// guessed right, the batch read with the context is the one used
		const next = [await queueJob(other, 100)];
		const again = await schedulePass(sql, options(pass.excluded));
		expect(again.placed.map(p => p.job_id)).toEqual(next);
		expect(again.scanned).toBe(1);
	});

	it("places nothing while the scheduler is paused, and its connection goes on serving", async () => {
		const type = await jobType();
		const jobId = await queueJob(type, 100);
		await q(`UPDATE scheduler SET is_paused = true WHERE id = 1`);
		const paused = await schedulePass(sql, options([]));
		expect(paused).toMatchObject({ placed: [], stop: "paused" });
		await q(`UPDATE scheduler SET is_paused = false WHERE id = 1`);
		const resumed = await schedulePass(sql, options(paused.excluded));
		expect(resumed.placed.map(p => p.job_id)).toContain(jobId);
	});
});
