import { Client } from "pg";
import { loadPassContext, schedulePass, type PassOptions } from "../../lib/scheduling/claim";
import { imagesHash, normalizeImages } from "../../lib/documents/images";
import { ImageSets, TypeKinds } from "../../lib/scheduling/matching";
import { clientSql, type Sql } from "../../lib/db/run";
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

async function jobType(
	paused = false,
	dockerImage: string | null = null
): Promise<{ id: number; revId: number }> {
	const iface = { version: "1.0", command: "/bin/true", input_data: [], output_data: [] };
	const [t] = await q<{ id: number }>(
		`INSERT INTO job_type (name, version, interface, is_paused, uses_docker, docker_image)
		 VALUES ($1, '1.0', $2, $3, $4, $5)
		 RETURNING id`,
		[`pass-type-${++typeSeq}`, JSON.stringify(iface), paused, dockerImage !== null, dockerImage]
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

describe("a scheduling pass with launch windows", () => {
	beforeEach(async () => {
		await q(`DELETE FROM queue`);
	});

	it("places no more than the agent's window and leaves the rest queued, read no further", async () => {
		const type = await jobType();
		const queued: number[] = [];
		for (let i = 0; i < 6; i++) queued.push(await queueJob(type, 100));
		const pass = await schedulePass(sql, { ...options([]), room: () => 2 });
		expect(pass.placed.map(p => p.job_id)).toEqual(queued.slice(0, 2));
		// only what the window takes was read
		expect(pass.scanned).toBe(2);
		const [{ n }] = await q<{ n: number }>(`SELECT count(*)::int AS n FROM queue`);
		expect(n).toBe(4);
	});

	it("reads nothing while every window is closed, and then places what ranks first", async () => {
		const type = await jobType();
		const early: number[] = [];
		for (let i = 0; i < 3; i++) early.push(await queueJob(type, 100));
		const closed = await schedulePass(sql, { ...options([]), room: () => 0 });
		expect(closed).toMatchObject({ placed: [], scanned: 0, stop: "full" });
		// work queued later but ranked earlier (a higher priority: a lower number) goes first
		const urgent = await queueJob(type, 1);
		const open = await schedulePass(sql, { ...options([]), room: () => 1 });
		expect(open.placed.map(p => p.job_id)).toEqual([urgent]);
		const rest = await schedulePass(sql, { ...options([]), room: () => 10 });
		expect(rest.placed.map(p => p.job_id)).toEqual(early);
		// each carries its rank (priority, queued in µs, queue row id): the agent launches in it
		const ranks = [...open.placed, ...rest.placed].map(p => p.rank!);
		expect(ranks.map(r => r[0])).toEqual([1, 100, 100, 100]);
		for (let i = 2; i < ranks.length; i++) expect(ranks[i][1]).toBeGreaterThan(ranks[i - 1][1]);
		expect(ranks.every(r => Number.isInteger(r[2]) && r[1] > 1.7e15)).toBe(true);
	});
});

describe("a scheduling pass with container job types", () => {
	/** The pass's context statement's answer, as the database sent it. */
	function recording(): { sql: Sql; contexts: any[] } {
		const contexts: any[] = [];
		return {
			contexts,
			sql: {
				async query(text: string, values?: unknown[]) {
					const rows = await sql.query(text, values);
					if (text.includes("AS paused")) contexts.push(rows[0]);
					return rows as any;
				}
			}
		};
	}

	afterEach(async () => {
		await q(`DELETE FROM queue`);
		await q(
			`UPDATE node SET docker_engine = false, docker_pull = false, docker_images = '{}',
				docker_images_hash = ''`
		);
	});

	it("reads no container need while only process jobs are queued, nor an engine where none is", async () => {
		const type = await jobType();
		// a container job type with nothing queued is not read either
		await jobType(false, "scale-x:1");
		await queueJob(type, 100);
		const { sql: rec, contexts } = recording();
		const ctx = await loadPassContext(rec, { agents: ["agent-1"], leaseMs: 60000 });
		expect(contexts[0].types).toEqual([expect.objectContaining({ paused: true })]);
		expect(contexts[0].nodes[0].docker).toBeNull();
		expect(ctx.limits.docker).toBeUndefined();
		expect(ctx.nodes[0].docker).toBeUndefined();
		expect(ctx.unrunnable).toEqual([]);
	});

	it("excludes a container job type no node can run, reads around it, and says why", async () => {
		const missing = await jobType(false, "scale-x:1");
		const process = await jobType();
		// a head of it longer than a batch
		for (let i = 0; i < 6; i++) await queueJob(missing, 1);
		const wanted = await queueJob(process, 100);
		const pass = await schedulePass(sql, options([]));
		expect(pass.placed.map(p => p.job_id)).toEqual([wanted]);
		expect(pass.excluded).toContain(missing.id);
		expect(pass.scanned).toBe(1);
		expect(pass.unrunnable).toEqual([
			{
				jobTypeId: missing.id,
				image: "scale-x:1",
				privileged: false,
				reason: "no node has a Docker engine (of 1 node taking work)"
			}
		]);
	});

	it("leaves a container job queued after the pass read its context to the next pass", async () => {
		const container = await jobType(false, "scale-x:1");
		const process = await jobType();
		const first = await queueJob(process, 100);
		let late: number | null = null;
		let contextRead: Promise<unknown> | null = null;
		// the container job is queued after the pass's context was read, before its read of the
		// queue (which is sent beside the context: held until the context is in)
		const racing: Sql = {
			async query(text: string, values?: unknown[]) {
				if (text.includes("AS paused"))
					return (contextRead = sql.query(text, values)) as any;
				if (late === null && contextRead !== null && text.includes("FROM queue")) {
					await contextRead;
					late = await queueJob(container, 1);
				}
				return sql.query(text, values) as any;
			}
		};
		const pass = await schedulePass(racing, options([]));
		// not placed on the node, which has no engine: it waits for a pass that read its needs
		expect(pass.placed.map(p => p.job_id)).toEqual([first]);
		const [{ n }] = await q<{ n: number }>(
			`SELECT count(*)::int AS n FROM queue WHERE job_id = $1`,
			[late]
		);
		expect(n).toBe(1);
		const next = await schedulePass(sql, options([]));
		expect(next.placed).toEqual([]);
		expect(next.unrunnable.map(u => u.jobTypeId)).toEqual([container.id]);
	});

	it("reads which job types run containers again only when a job type changed", async () => {
		const process = await jobType();
		const kinds = new TypeKinds();
		const { sql: rec, contexts } = recording();
		const opts = { ...options([]), kinds };
		const first = await queueJob(process, 100);
		expect((await schedulePass(rec, opts)).placed.map(p => p.job_id)).toEqual([first]);
		expect(kinds.usesDocker(process.id)).toBe(false);
		// unchanged: not read again
		await schedulePass(rec, opts);
		expect(contexts[1].type_kinds).toBeNull();
		// a container type created after the kinds were read, its job queued: read at the next pass
		const container = await jobType(false, "scale-x:1");
		await queueJob(container, 1);
		const third = await schedulePass(rec, opts);
		const [containers, processes] = contexts[2].type_kinds as [number[], number[]];
		expect([containers.includes(container.id), processes.includes(process.id)]).toEqual([
			true,
			true
		]);
		expect(kinds.usesDocker(container.id)).toBe(true);
		expect(third.placed).toEqual([]);
		expect(third.unrunnable.map(u => u.jobTypeId)).toEqual([container.id]);
	});

	it("reads a node's images only when their hash is new to it", async () => {
		const images = normalizeImages(["scale-x:1", "alpine:3"]);
		await q(
			`UPDATE node SET docker_engine = true, docker_images = $1, docker_images_hash = $2`,
			[images, imagesHash(images)]
		);
		const type = await jobType(false, "scale-x:1");
		const sets = new ImageSets();
		const { sql: rec, contexts } = recording();
		const opts = { ...options([]), images: sets };
		const first = [await queueJob(type, 100)];
		const one = await schedulePass(rec, opts);
		expect(one.placed.map(p => p.job_id)).toEqual(first);
		expect(contexts[0].nodes[0].docker).toEqual([false, false, imagesHash(images), images]);
		const second = [await queueJob(type, 100)];
		const two = await schedulePass(rec, opts);
		expect(two.placed.map(p => p.job_id)).toEqual(second);
		// known: not sent again
		expect(contexts[1].nodes[0].docker).toEqual([false, false, imagesHash(images), null]);
		expect(two.unrunnable).toEqual([]);
	});
});
