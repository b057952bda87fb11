import type { ServiceBroker } from "moleculer";
import { parseJobInterface } from "../../lib/documents/job-interface";
import { queueNewJobs } from "../../lib/jobs/new-job";
import type { NewJobRequest } from "../../lib/jobs/types";
import { queueExistingJobs } from "../../lib/queue/requeue";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import {
	request,
	startServices,
	type Reply,
	type TestApi,
	expectJsonError
} from "../helpers/broker";
import { transaction } from "../../lib/db/run";

/**
 * The queue service over real HTTP and PostgreSQL: new jobs, requeue, queue status, the load
 * history and its clock, and the `queue.changed` wake-up.
 */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const MIB = 1024 * 1024;

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let broker: ServiceBroker;
const changes: { count: number }[] = [];

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

const IFACE = {
	version: "1.0",
	command: "make_kml",
	command_arguments: "${input_file} ${job_output_dir}",
	input_data: [
		{ name: "input_file", type: "file", media_types: ["image/png"] },
		{ name: "extras", type: "files", required: false },
		{ name: "level", type: "property", required: false }
	],
	output_data: [{ name: "output_file", type: "file", media_type: "application/kml" }]
};

/** A job type (and its revisions) written directly, its interface normalised as the API does. */
async function addJobType(
	name: string,
	extra: Record<string, unknown> = {},
	iface: unknown = IFACE,
	revisions: number[] = [1]
): Promise<{ id: number; revIds: number[] }> {
	const normalized = parseJobInterface(iface);
	const cols: Record<string, unknown> = {
		name,
		version: "1.0",
		interface: JSON.stringify(normalized),
		revision_num: revisions[revisions.length - 1],
		...extra
	};
	const keys = Object.keys(cols);
	const [row] = await query<{ id: number }>(
		`INSERT INTO job_type (${keys.join(", ")}) VALUES (${keys.map((_, i) => `$${i + 1}`).join(", ")})
		 RETURNING id`,
		keys.map(k => cols[k])
	);
	const revIds: number[] = [];
	for (const num of revisions) {
		const [rev] = await query<{ id: number }>(
			`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, $2, $3)
			 RETURNING id`,
			[row.id, num, JSON.stringify(normalized)]
		);
		revIds.push(rev.id);
	}
	return { id: row.id, revIds };
}

async function addFile(
	name: string,
	mediaType: string,
	size: number,
	extra: { deleted?: boolean; workspaceId?: number } = {}
): Promise<number> {
	const [row] = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, is_deleted)
		 VALUES ('SOURCE', $1, $2::text, 'in/' || $2::text, $3, $4, md5($2::text), $5) RETURNING id`,
		[extra.workspaceId ?? ws.raw, name, mediaType, size, extra.deleted ?? false]
	);
	return row.id;
}

const ws = { raw: 0, products: 0, archived: 0 };
const jt = { kml: 0, paused: 0, archived: 0, gaps: 0, gapsLatestRev: 0, other: 0 };
const files = { png10: 0, png5: 0, txt: 0, deleted: 0 };

function jobData(extra: Record<string, unknown> = {}) {
	return {
		version: "1.0",
		input_data: [{ name: "input_file", file_id: files.png10 }],
		output_data: [{ name: "output_file", workspace_id: ws.products }],
		...extra
	};
}

async function newJob(body: Record<string, unknown>): Promise<Reply> {
	return request("POST", `${api}/queue/new-job/`, body);
}

async function counts() {
	const [row] = await query<Record<string, number>>(
		`SELECT (SELECT count(*)::int FROM job) AS jobs, (SELECT count(*)::int FROM job_exe) AS exes,
			(SELECT count(*)::int FROM queue) AS queue,
			(SELECT count(*)::int FROM trigger_event) AS events`
	);
	return row;
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

beforeAll(async () => {
	tdb = await createTestDatabase();
	const config = '{"version": "1.0", "broker": {"type": "host", "host_path": "/tmp"}}';
	const wsRows = await query<{ id: number; name: string }>(
		`INSERT INTO workspace (name, json_config, is_active, archived, base_url) VALUES
			('raw', $1, true, NULL, 'http://files.example/raw'),
			('products', $1, true, NULL, NULL),
			('old', $1, false, now(), NULL)
		 RETURNING id, name`,
		[config]
	);
	ws.raw = wsRows.find(w => w.name === "raw")!.id;
	ws.products = wsRows.find(w => w.name === "products")!.id;
	ws.archived = wsRows.find(w => w.name === "old")!.id;

	jt.kml = (
		await addJobType("kml", {
			category: "footprints",
			priority: 50,
			timeout: 600,
			max_tries: 2,
			cpus_required: 1.5,
			mem_required: 256,
			disk_out_const_required: 64,
			disk_out_mult_required: 2
		})
	).id;
	jt.paused = (await addJobType("paused-type", { is_paused: true, paused: new Date() })).id;
	jt.archived = (await addJobType("old-type", { is_active: false, archived: new Date() })).id;
	const gaps = await addJobType("gaps", { priority: 7 }, IFACE, [1, 2, 5]);
	jt.gaps = gaps.id;
	jt.gapsLatestRev = gaps.revIds[2];
	jt.other = (
		await addJobType(
			"other",
			{ category: "misc", priority: 300 },
			{ command: "run", command_arguments: "" }
		)
	).id;

	files.png10 = await addFile("a.png", "image/png", 10 * MIB);
	files.png5 = await addFile("b.png", "image/png", 5.5 * MIB);
	files.txt = await addFile("c.txt", "text/plain", 100);
	files.deleted = await addFile("d.png", "image/png", 100, { deleted: true });

	app = await startServices(tdb.url, ["api", "queue", "jobs"]);
	api = app.api;
	broker = app.broker;
	broker.createService({
		name: "queue-listener",
		events: {
			"queue.changed"(ctx: any) {
				changes.push(ctx.params);
			}
		}
	});
	await broker.waitForServices(["queue-listener"]);
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("POST /queue/new-job/", () => {
	it("creates a QUEUED job with a QUEUED execution: 201, Location, details", async () => {
		const before = changes.length;
		const reply = await newJob({
			job_type_id: jt.kml,
			job_data: jobData({
				input_data: [
					{ name: "input_file", file_id: files.png10 },
					{ name: "extras", file_ids: [files.png5, files.png10] },
					{ name: "level", value: "3" }
				]
			})
		});
		expect(reply.status).toBe(201);
		const job = reply.body;
		expect(reply.headers.get("location")).toBe(`${api}/jobs/${job.id}/`);
		expect(job.status).toBe("QUEUED");
		expect(job.num_exes).toBe(1);
		expect(job.priority).toBe(50);
		expect(job.timeout).toBe(600);
		expect(job.max_tries).toBe(2);
		expect(job.cpus_required).toBe(1.5);
		expect(job.mem_required).toBe(256);
		// distinct inputs: 10 MiB + 5.5 MiB = 15.5 MiB, rounded up to 16; out = 64 + 2 × 16
		expect(job.disk_in_required).toBe(16);
		expect(job.disk_out_required).toBe(96);
		expect(job.queued).toMatch(ISO_MS_Z);
		expect(job.last_status_change).toMatch(ISO_MS_Z);
		expect(job.started).toBeNull();
		expect(job.ended).toBeNull();
		expect(job.error).toBeNull();
		expect(job.job_type).toMatchObject({ id: jt.kml, name: "kml", version: "1.0" });
		expect(job.job_type_rev).toMatchObject({ job_type: { id: jt.kml }, revision_num: 1 });
		expect(job.job_type_rev.interface.command).toBe("make_kml");
		expect(job.event).toMatchObject({
			type: "USER",
			rule: null,
			description: { user: "Anonymous" }
		});
		expect(job.data.input_data).toHaveLength(3);
		expect(job.results).toEqual({});
		expect(job.recipes).toEqual([]);
		expect(job.job_exes).toHaveLength(1);
		expect(job.job_exes[0]).toMatchObject({
			status: "QUEUED",
			timeout: 600,
			job: { id: job.id },
			node: null,
			error: null,
			started: null,
			ended: null
		});
		expect(job.job_exes[0].queued).toMatch(ISO_MS_Z);
		const inputs = Object.fromEntries(job.inputs.map((i: any) => [i.name, i]));
		expect(inputs.input_file.type).toBe("file");
		expect(inputs.input_file.value).toMatchObject({
			id: files.png10,
			file_name: "a.png",
			media_type: "image/png",
			file_size: 10 * MIB,
			workspace: { id: ws.raw, name: "raw" },
			url: "http://files.example/raw/in/a.png",
			is_parsed: false
		});
		expect(inputs.extras.value.map((f: any) => f.id)).toEqual([files.png5, files.png10]);
		expect(inputs.level).toEqual({ name: "level", type: "property", value: "3" });
		expect(job.outputs).toEqual([{ name: "output_file", type: "file", value: null }]);

		const [queue] = await query(`SELECT * FROM queue WHERE job_id = $1`, [job.id]);
		expect(queue).toMatchObject({
			job_exe_id: job.job_exes[0].id,
			job_type_id: jt.kml,
			priority: 50,
			cpus_required: 1.5,
			mem_required: 256,
			disk_in_required: 16,
			disk_out_required: 96,
			disk_total_required: 112
		});
		const [event] = await query(
			`SELECT e.type, e.processed IS NOT NULL AS processed, e.rule_id FROM trigger_event e
			 JOIN job j ON j.event_id = e.id WHERE j.id = $1`,
			[job.id]
		);
		expect(event).toEqual({ type: "USER", processed: true, rule_id: null });
		for (let i = 0; i < 50 && changes.length === before; i++) await sleep(10);
		expect(changes.slice(before)).toEqual([{ count: 1 }]);
	});

	it("tells the scheduler of jobs queued in one turn of the event loop in one event", async () => {
		const before = changes.length;
		const queue = broker.getLocalService("queue") as any;
		queue.queueChanged(1);
		queue.queueChanged(4);
		queue.queueChanged(2);
		for (let i = 0; i < 50 && changes.length === before; i++) await sleep(10);
		await sleep(50);
		expect(changes.slice(before)).toEqual([{ count: 7 }]);
		queue.queueChanged(1);
		for (let i = 0; i < 50 && changes.length === before + 1; i++) await sleep(10);
		expect(changes.slice(before)).toEqual([{ count: 7 }, { count: 1 }]);
	});

	it("answers details that GET /jobs/{id}/ repeats", async () => {
		const created = await newJob({ job_type_id: jt.kml, job_data: jobData() });
		const got = await request("GET", `${api}/jobs/${created.body.id}/`);
		expect(got.status).toBe(200);
		// built from what the write returned, not read back: the same document all the same
		expect(created.body).toEqual(got.body);
		expect(created.body.inputs.length).toBeGreaterThan(0);
	});

	it("takes the latest revision even when revision numbers have gaps", async () => {
		const reply = await newJob({ job_type_id: jt.gaps, job_data: jobData() });
		expect(reply.status).toBe(201);
		expect(reply.body.job_type_rev).toMatchObject({ id: jt.gapsLatestRev, revision_num: 5 });
		expect(reply.body.priority).toBe(7);
	});

	it("queues a job of a paused job type (it is just not scheduled)", async () => {
		const reply = await newJob({ job_type_id: jt.paused, job_data: jobData() });
		expect(reply.status).toBe(201);
		expect(reply.body.status).toBe("QUEUED");
		expect(reply.body.job_type.is_paused).toBe(true);
	});

	it("takes job_data absent as empty, for a type with nothing to fill", async () => {
		const reply = await newJob({ job_type_id: jt.other });
		expect(reply.status).toBe(201);
		expect(reply.body.data).toEqual({ version: "1.0", input_data: [], output_data: [] });
		expect(reply.body.disk_in_required).toBe(0);
		expect(reply.body.disk_out_required).toBe(64);
	});

	const bad: [string, () => Record<string, unknown>, RegExp][] = [
		[
			"an unknown job type",
			() => ({ job_type_id: 999999, job_data: jobData() }),
			/^job_type_id: no job type with id 999999/
		],
		[
			"an archived job type",
			() => ({ job_type_id: jt.archived, job_data: jobData() }),
			/^job_type_id: .*archived/
		],
		[
			// a string of digits is one (Scale's parse_int): test/service/bodies.test.ts
			"a job type id that is not an integer",
			() => ({ job_type_id: "1.5", job_data: jobData() }),
			/^job_type_id: /
		],
		["no job type id", () => ({ job_data: jobData() }), /^job_type_id: is required/],
		["job_data not an object", () => ({ job_type_id: jt.kml, job_data: [] }), /^job_data: /],
		[
			"a missing required input",
			() => ({ job_type_id: jt.kml, job_data: jobData({ input_data: [] }) }),
			/^job_data.input_data: the required input "input_file" is not given/
		],
		[
			"an unknown input",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({
					input_data: [
						{ name: "input_file", file_id: files.png10 },
						{ name: "nope", value: "x" }
					]
				})
			}),
			/^job_data.input_data\[1\].name: "nope" is not an input/
		],
		[
			"a file that does not exist",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({ input_data: [{ name: "input_file", file_id: 987654 }] })
			}),
			/^job_data.input_data\[0\].file_id: no file with id 987654/
		],
		[
			"a file of another media type",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({ input_data: [{ name: "input_file", file_id: files.txt }] })
			}),
			/^job_data.input_data\[0\].file_id: file \d+ has media type "text\/plain"/
		],
		[
			"a deleted file",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({ input_data: [{ name: "input_file", file_id: files.deleted }] })
			}),
			/^job_data.input_data\[0\].file_id: file \d+ is deleted/
		],
		[
			"a missing file among file_ids",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({
					input_data: [
						{ name: "input_file", file_id: files.png10 },
						{ name: "extras", file_ids: [files.png5, 424242] }
					]
				})
			}),
			/^job_data.input_data\[1\].file_ids\[1\]: no file with id 424242/
		],
		[
			"a workspace that does not exist",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({ output_data: [{ name: "output_file", workspace_id: 5555 }] })
			}),
			/^job_data.output_data\[0\].workspace_id: no workspace with id 5555/
		],
		[
			"an inactive workspace",
			() => ({
				job_type_id: jt.kml,
				job_data: jobData({
					output_data: [{ name: "output_file", workspace_id: ws.archived }]
				})
			}),
			/^job_data.output_data\[0\].workspace_id: workspace "old" .* is not active/
		],
		[
			"an output without a workspace",
			() => ({ job_type_id: jt.kml, job_data: jobData({ output_data: [] }) }),
			/^job_data.output_data: the output "output_file" has no entry/
		]
	];
	it.each(bad)(
		"refuses %s with a 400 naming the field, writing nothing",
		async (_, body, detail) => {
			const before = await counts();
			const reply = await newJob(body());
			expectJsonError(reply, 400, detail);
			expect(await counts()).toEqual(before);
		}
	);
});

/** A job made FAILED (or another end state) as the scheduler would leave it. */
async function endJob(jobId: number, status: "FAILED" | "CANCELED" | "COMPLETED") {
	await query(`DELETE FROM queue WHERE job_id = $1`, [jobId]);
	await query(
		`UPDATE job_exe SET status = $2, ended = now(), last_modified = now()
		 WHERE job_id = $1 AND status IN ('QUEUED', 'RUNNING')`,
		[jobId, status]
	);
	await query(
		`UPDATE job SET status = $2::text, ended = now(), last_status_change = now(), last_modified = now(),
			error_id = CASE WHEN $2::text = 'FAILED' THEN (SELECT id FROM error WHERE category = 'SYSTEM' LIMIT 1) END
		 WHERE id = $1`,
		[jobId, status]
	);
}

async function createJob(jobTypeId: number, data: unknown = jobData()): Promise<number> {
	const reply = await newJob({ job_type_id: jobTypeId, job_data: data });
	if (reply.status !== 201) throw new Error(`new job failed: ${reply.status} ${reply.text}`);
	return reply.body.id;
}

describe("new jobs after their job type changes (the cached job type is checked as it is written)", () => {
	it("takes a job type's edits, a new revision, and its archive into account at once", async () => {
		const type = await addJobType("cached", { priority: 40 });
		const first = await newJob({ job_type_id: type.id, job_data: jobData() });
		expect(first.status).toBe(201);
		expect(first.body.priority).toBe(40);
		// an edit as the job type model makes it: a new revision_num (and here a new revision)
		const [rev] = await query<{ id: number }>(
			`INSERT INTO job_type_rev (job_type_id, revision_num, interface)
			 SELECT $1, 2, interface FROM job_type_rev WHERE id = $2 RETURNING id`,
			[type.id, type.revIds[0]]
		);
		await query(
			"UPDATE job_type SET priority = 15, timeout = 33, revision_num = 2 WHERE id = $1",
			[type.id]
		);
		const second = await newJob({ job_type_id: type.id, job_data: jobData() });
		expect(second.status).toBe(201);
		expect(second.body).toMatchObject({ priority: 15, timeout: 33 });
		expect(second.body.job_type_rev.id).toBe(rev.id);
		// written again from the job type read afresh, its details read back: the same document
		expect(second.body).toEqual((await request("GET", `${api}/jobs/${second.body.id}/`)).body);
		expect(second.body.job_type).toMatchObject({ id: type.id, priority: 15, timeout: 33 });
		const [queued] = await query<{ priority: number }>(
			"SELECT priority FROM queue WHERE job_id = $1",
			[second.body.id]
		);
		expect(queued.priority).toBe(15);

		await query(
			"UPDATE job_type SET is_active = false, archived = now(), revision_num = 3 WHERE id = $1",
			[type.id]
		);
		const before = await counts();
		expectJsonError(
			await newJob({ job_type_id: type.id, job_data: jobData() }),
			400,
			/^job_type_id: job type "cached" version "1.0" is archived/
		);
		expect(await counts()).toEqual(before);
	});
});

describe("new jobs posted at the same time (written together, answered each on its own)", () => {
	it("queues the valid ones and refuses each invalid one with its own 400", async () => {
		const type = await addJobType("together", { priority: 30 });
		const archived = await addJobType("together-archived", {
			is_active: false,
			archived: new Date()
		});
		const before = await counts();
		const bodies = [
			...Array.from({ length: 8 }, () => ({ job_type_id: type.id, job_data: jobData() })),
			{ job_type_id: 999999, job_data: jobData() },
			{ job_type_id: archived.id, job_data: jobData() },
			{ job_type_id: type.id, job_data: jobData({ input_data: [] }) },
			{
				job_type_id: type.id,
				job_data: jobData({ input_data: [{ name: "input_file", file_id: 999999 }] })
			}
		];
		const replies = await Promise.all(bodies.map(body => newJob(body)));
		expect(replies.slice(0, 8).map(r => r.status)).toEqual(Array(8).fill(201));
		for (const reply of replies.slice(0, 8))
			expect(reply.body).toEqual(
				(await request("GET", `${api}/jobs/${reply.body.id}/`)).body
			);
		for (const reply of replies.slice(0, 8)) {
			expect(reply.body).toMatchObject({ status: "QUEUED", priority: 30 });
			expect(reply.body.job_type.id).toBe(type.id);
		}
		expect(new Set(replies.slice(0, 8).map(r => r.body.id)).size).toBe(8);
		// written together: jobs of one statement share its transaction time
		const times = replies.slice(0, 8).map(r => r.body.queued);
		expect(new Set(times).size).toBeLessThan(8);
		expectJsonError(replies[8], 400, /^job_type_id: no job type with id 999999/);
		expectJsonError(replies[9], 400, /^job_type_id: .* is archived/);
		expectJsonError(replies[10], 400, /^job_data/);
		expectJsonError(
			replies[11],
			400,
			/^job_data\.input_data\[0\]\.file_id: no file with id 999999/
		);
		const after = await counts();
		expect(after.jobs - before.jobs).toBe(8);
		expect(after.exes - before.exes).toBe(8);
		expect(after.queue - before.queue).toBe(8);
	});
});

describe("POST /queue/requeue-jobs/", () => {
	it("requeues FAILED and CANCELED jobs: new execution, queue row, failure allowance raised", async () => {
		const failed = await createJob(jt.kml);
		const canceled = await createJob(jt.kml);
		const completed = await createJob(jt.kml);
		await endJob(failed, "FAILED");
		await endJob(canceled, "CANCELED");
		await endJob(completed, "COMPLETED");
		const before = changes.length;
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [failed, canceled, completed],
			priority: 5
		});
		expect(reply.status).toBe(200);
		expect(reply.body.count).toBe(3);
		expect(reply.body.next).toBeNull();
		const byId = Object.fromEntries(reply.body.results.map((j: any) => [j.id, j]));
		expect(byId[failed]).toMatchObject({
			status: "QUEUED",
			num_exes: 2,
			priority: 5,
			error: null,
			ended: null
		});
		// Scale: max_tries = num_exes + the job type's max_tries (2)
		expect(byId[failed].max_tries).toBe(3);
		expect(byId[canceled]).toMatchObject({ status: "QUEUED", num_exes: 2, priority: 5 });
		expect(byId[completed]).toMatchObject({
			status: "COMPLETED",
			num_exes: 1,
			priority: 50,
			max_tries: 2
		});
		const exes = await query<{ status: string }>(
			`SELECT status FROM job_exe WHERE job_id = $1 ORDER BY id`,
			[failed]
		);
		expect(exes.map(e => e.status)).toEqual(["FAILED", "QUEUED"]);
		const queue = await query(
			`SELECT q.priority, q.job_exe_id = x.id AS live FROM queue q
			 JOIN job_exe x ON x.job_id = q.job_id AND x.status = 'QUEUED'
			 WHERE q.job_id = ANY($1::int[])`,
			[[failed, canceled, completed]]
		);
		expect(queue).toEqual([
			{ priority: 5, live: true },
			{ priority: 5, live: true }
		]);
		for (let i = 0; i < 50 && changes.length === before; i++) await sleep(10);
		expect(changes.slice(before)).toEqual([{ count: 2 }]);
	});

	it("filters by status, job type name and category; keeps priority when none is given", async () => {
		const a = await createJob(jt.other, {});
		const b = await createJob(jt.other, {});
		await endJob(a, "FAILED");
		await endJob(b, "CANCELED");
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, {
			status: "CANCELED",
			job_type_names: ["other"],
			job_type_categories: ["misc"]
		});
		expect(reply.status).toBe(200);
		expect(reply.body.results.map((j: any) => j.id)).toEqual([b]);
		expect(reply.body.results[0]).toMatchObject({ status: "QUEUED", priority: 300 });
		const [row] = await query(`SELECT status FROM job WHERE id = $1`, [a]);
		expect(row.status).toBe("FAILED");
	});

	it("refuses an unknown filter, or a body that is not JSON, and requeues nothing", async () => {
		const a = await createJob(jt.other, {});
		await endJob(a, "FAILED");
		const typo = await request("POST", `${api}/queue/requeue-jobs/`, { job_id: [a] });
		expect(typo.status).toBe(400);
		expect(typo.body.detail).toMatch(/job_id/);
		const text = await request(
			"POST",
			`${api}/queue/requeue-jobs/`,
			JSON.stringify({ job_ids: [a] }),
			{ "Content-Type": "text/plain" }
		);
		expectJsonError(text, 415, /Content-Type must be application\/json/);
		const [row] = await query(`SELECT status FROM job WHERE id = $1`, [a]);
		expect(row.status).toBe("FAILED");
	});

	it("requeues as Scale 3.0's web UI posts it, its own URL in the body", async () => {
		// jobDetailController's Requeue button through loadService.requeueJobs, as Chromium sent it
		const a = await createJob(jt.other, {});
		await endJob(a, "FAILED");
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [a],
			url: "/api/queue/requeue-jobs/"
		});
		expect(reply.status).toBe(200);
		expect(reply.body.results.map((j: any) => [j.id, j.status])).toEqual([[a, "QUEUED"]]);
	});

	it("filters by error category and time range", async () => {
		const a = await createJob(jt.other, {});
		await endJob(a, "FAILED");
		const none = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [a],
			error_categories: ["DATA"]
		});
		expectJsonError(none, 404, /No jobs match/);
		const old = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [a],
			ended: "P1D"
		});
		expectJsonError(old, 404);
		const ok = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [a],
			error_categories: ["SYSTEM"],
			started: "PT1H"
		});
		expect(ok.status).toBe(200);
		expect(ok.body.results[0].status).toBe("QUEUED");
	});

	it("makes a job that was never queued BLOCKED", async () => {
		const a = await createJob(jt.other, {});
		await query(`DELETE FROM queue WHERE job_id = $1`, [a]);
		await query(`DELETE FROM job_exe WHERE job_id = $1`, [a]);
		await query(`UPDATE job SET status = 'CANCELED', num_exes = 0 WHERE id = $1`, [a]);
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: [a] });
		expect(reply.status).toBe(200);
		expect(reply.body.results[0]).toMatchObject({ id: a, status: "BLOCKED", num_exes: 0 });
	});

	it("leaves QUEUED and RUNNING jobs alone", async () => {
		const a = await createJob(jt.other, {});
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: [a] });
		expect(reply.status).toBe(200);
		expect(reply.body.results[0]).toMatchObject({ status: "QUEUED", num_exes: 1 });
		const [n] = await query(`SELECT count(*)::int AS n FROM job_exe WHERE job_id = $1`, [a]);
		expect(n.n).toBe(1);
	});

	it("answers 404 when nothing matches and 400 for bad filters", async () => {
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: [987654] }),
			404
		);
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { status: "COMPLETED" }),
			400,
			/^status: must be one of FAILED, CANCELED/
		);
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: ["x"] }),
			400,
			/^job_ids\[0\]: /
		);
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { priority: 0 }),
			400,
			/^priority: /
		);
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { started: "yesterday" }),
			400,
			/^started: /
		);
	});
});

describe("GET /queue/status/", () => {
	it("groups the queue by job type, unpaused first, then by priority", async () => {
		const reply = await request("GET", `${api}/queue/status/`);
		expect(reply.status).toBe(200);
		// the spec's queue_status beside Scale 3.0's list envelope, in one body
		expect(Object.keys(reply.body)).toEqual([
			"count",
			"next",
			"previous",
			"results",
			"queue_status"
		]);
		const entries = reply.body.queue_status;
		expect(reply.body.count).toBe(entries.length);
		expect(reply.body.results).toHaveLength(entries.length);
		reply.body.results.forEach((r: any, i: number) => {
			expect(Object.keys(r)).toEqual([
				"job_type",
				"count",
				"longest_queued",
				"highest_priority"
			]);
			expect(r).toMatchObject({
				job_type: {
					name: entries[i].job_type_name,
					version: entries[i].job_type_version,
					is_paused: entries[i].is_job_type_paused
				},
				count: entries[i].count,
				longest_queued: entries[i].longest_queued,
				highest_priority: entries[i].highest_priority
			});
			expect(Number.isInteger(r.job_type.id)).toBe(true);
		});
		const expected = await query<{ name: string; n: number; prio: number }>(
			`SELECT jt.name, count(*)::int AS n, min(q.priority) AS prio FROM queue q
			 JOIN job_type jt ON jt.id = q.job_type_id GROUP BY jt.name`
		);
		expect(entries).toHaveLength(expected.length);
		for (const e of entries) {
			expect(Object.keys(e)).toEqual([
				"count",
				"longest_queued",
				"job_type_name",
				"job_type_version",
				"highest_priority",
				"is_job_type_paused"
			]);
			const row = expected.find(x => x.name === e.job_type_name)!;
			expect(e.count).toBe(row.n);
			expect(e.highest_priority).toBe(row.prio);
			expect(e.longest_queued).toMatch(ISO_MS_Z);
			expect(e.job_type_version).toBe("1.0");
		}
		const last = entries[entries.length - 1];
		expect(last).toMatchObject({ job_type_name: "paused-type", is_job_type_paused: true });
		const unpaused = entries.filter((e: any) => !e.is_job_type_paused);
		const priorities = unpaused.map((e: any) => e.highest_priority);
		expect(priorities).toEqual([...priorities].sort((a, b) => a - b));
	});
});

describe("GET /load/", () => {
	const base = Date.now() - 2 * 24 * 3600 * 1000;
	const at = (minutes: number) => new Date(base + minutes * 60000).toISOString();

	beforeAll(async () => {
		await query(
			`INSERT INTO job_load (measured, job_type_id, pending_count, queued_count, running_count, total_count)
			 VALUES ($1, $3, 1, 2, 3, 6), ($1, $4, 10, 20, 30, 60), ($2, $3, 0, 5, 0, 5),
				($5, NULL, 0, 0, 0, 0), ($6, $3, 9, 9, 9, 27)`,
			[
				at(0),
				at(1),
				jt.kml,
				jt.other,
				at(2),
				new Date(Date.now() - 40 * 24 * 3600 * 1000).toISOString()
			]
		);
	});

	it("sums the counts per measurement time, oldest first, over the past week by default", async () => {
		const reply = await request("GET", `${api}/load/`);
		expect(reply.status).toBe(200);
		const mine = reply.body.results.filter((r: any) => r.time >= at(0) && r.time <= at(2));
		expect(mine).toEqual([
			{ time: at(0), pending_count: 11, queued_count: 22, running_count: 33 },
			{ time: at(1), pending_count: 0, queued_count: 5, running_count: 0 },
			{ time: at(2), pending_count: 0, queued_count: 0, running_count: 0 }
		]);
		// the row of 40 days ago is outside the default range
		expect(reply.body.count).toBe(reply.body.results.length);
		expect(reply.body.results.every((r: any) => r.pending_count !== 9)).toBe(true);
	});

	it("filters by job type id, name, category and priority (repeatable)", async () => {
		const range = `started=${encodeURIComponent(at(0))}&ended=${encodeURIComponent(at(2))}`;
		const byId = await request("GET", `${api}/load/?${range}&job_type_id=${jt.other}`);
		expect(byId.body.results).toEqual([
			{ time: at(0), pending_count: 10, queued_count: 20, running_count: 30 }
		]);
		const byName = await request(
			"GET",
			`${api}/load/?${range}&job_type_name=kml&job_type_name=other`
		);
		expect(byName.body.results.map((r: any) => r.pending_count)).toEqual([11, 0]);
		const byCategory = await request(
			"GET",
			`${api}/load/?${range}&job_type_category=footprints`
		);
		expect(byCategory.body.results.map((r: any) => r.queued_count)).toEqual([2, 5]);
		const byPriority = await request("GET", `${api}/load/?${range}&job_type_priority=300`);
		expect(byPriority.body.count).toBe(1);
	});

	it("pages and orders", async () => {
		const range = `started=${encodeURIComponent(at(0))}&ended=${encodeURIComponent(at(2))}`;
		const page = await request("GET", `${api}/load/?${range}&page_size=2&order=-time`);
		expect(page.body.count).toBe(3);
		expect(page.body.results.map((r: any) => r.time)).toEqual([at(2), at(1)]);
		expect(page.body.next).toContain("page=2");
		const second = await request("GET", page.body.next);
		expect(second.body.results.map((r: any) => r.time)).toEqual([at(0)]);
	});

	it("answers a range up to 31 days, 400 beyond, and 400 for bad times", async () => {
		const ok = await request("GET", `${api}/load/?started=P31D`);
		expect(ok.status).toBe(200);
		expect(ok.body.results.some((r: any) => r.pending_count === 9)).toBe(false);
		expectJsonError(
			await request("GET", `${api}/load/?started=P32D`),
			400,
			/^started: .*31 days/
		);
		const from = new Date(Date.now() - 50 * 24 * 3600 * 1000).toISOString();
		const to = new Date(Date.now() - 10 * 24 * 3600 * 1000).toISOString();
		expectJsonError(
			await request("GET", `${api}/load/?started=${from}&ended=${to}`),
			400,
			/31 days/
		);
		const within = new Date(Date.now() - 40.5 * 24 * 3600 * 1000).toISOString();
		const oldRange = await request("GET", `${api}/load/?started=${within}&ended=${to}`);
		expect(oldRange.status).toBe(200);
		expect(oldRange.body.results.map((r: any) => r.pending_count)).toEqual([9]);
		expectJsonError(await request("GET", `${api}/load/?started=yesterday`), 400, /^started: /);
		expectJsonError(
			await request("GET", `${api}/load/?started=${to}&ended=${from}`),
			400,
			/must be before ended/
		);
		expectJsonError(await request("GET", `${api}/load/?job_type_id=x`), 400, /^job_type_id: /);
	});

	it("records the load once per minute however many replicas tick", async () => {
		for (let attempt = 0; attempt < 3; attempt++) {
			const [{ minute }] = await query<{ minute: Date }>(
				"SELECT date_trunc('minute', now()) AS minute"
			);
			const results = await Promise.all(
				[1, 2, 3, 4, 5].map(
					() => broker.call("queue.recordLoad") as Promise<{ rows: number }>
				)
			);
			const [{ after }] = await query<{ after: Date }>(
				"SELECT date_trunc('minute', now()) AS after"
			);
			if (after.getTime() !== minute.getTime()) continue; // crossed a minute: try again
			expect(results.filter(r => r.rows > 0)).toHaveLength(1);
			const rows = await query<{
				job_type_id: number | null;
				pending: number;
				queued: number;
				running: number;
			}>(
				`SELECT job_type_id, pending_count AS pending, queued_count AS queued,
					running_count AS running FROM job_load WHERE measured = $1 ORDER BY job_type_id`,
				[minute]
			);
			const expected = await query<{ job_type_id: number; queued: number }>(
				`SELECT job_type_id, count(*)::int AS queued FROM job WHERE status = 'QUEUED'
				 GROUP BY job_type_id ORDER BY job_type_id`
			);
			expect(rows.map(r => ({ job_type_id: r.job_type_id, queued: r.queued }))).toEqual(
				expected
			);
			return;
		}
		throw new Error("could not stay within one minute");
	});
});

describe("queueNewJobs (the library call triggers and recipes reuse)", () => {
	it("creates thousands of jobs in one transaction, set-based, ids in request order", async () => {
		const [rule] = await query<{ id: number }>(
			`INSERT INTO trigger_rule (type, name, configuration) VALUES ('PARSE', 'r', '{}') RETURNING id`
		);
		const [event] = await query<{ id: number }>(
			`INSERT INTO trigger_event (type, rule_id, description, processed)
			 VALUES ('PARSE', $1, '{"file_name": "a.png"}', now()) RETURNING id`,
			[rule.id]
		);
		const n = 2500;
		const requests: NewJobRequest[] = Array.from({ length: n }, (_, i) => ({
			jobTypeId: i % 2 === 0 ? jt.kml : jt.other,
			jobData: i % 2 === 0 ? jobData() : {},
			eventId: i % 5 === 0 ? undefined : event.id
		}));
		const before = await counts();
		const started = Date.now();
		const queued = await transaction(tdb.db, t => queueNewJobs(tdb.db, t, requests));
		const ms = Date.now() - started;
		expect(queued).toHaveLength(n);
		const jobIds = queued.map(q => q.jobId);
		expect(jobIds).toEqual([...jobIds].sort((a, b) => a - b));
		expect(new Set(queued.map(q => q.jobExeId)).size).toBe(n);
		expect(await counts()).toEqual({
			jobs: before.jobs + n,
			exes: before.exes + n,
			queue: before.queue + n,
			events: before.events + n / 5
		});
		const rows = await query<{
			id: number;
			job_type_id: number;
			event_id: number;
			exe: number;
			q: number;
		}>(
			`SELECT j.id, j.job_type_id, j.event_id, x.id AS exe, q.job_exe_id AS q
			 FROM job j JOIN job_exe x ON x.job_id = j.id JOIN queue q ON q.job_id = j.id
			 WHERE j.id = ANY($1::int[]) ORDER BY j.id`,
			[jobIds]
		);
		rows.forEach((row, i) => {
			expect(row.job_type_id).toBe(requests[i].jobTypeId);
			expect(row.exe).toBe(queued[i].jobExeId);
			expect(row.q).toBe(queued[i].jobExeId);
			expect(row.event_id).toBe(requests[i].eventId ?? queued[i].eventId);
		});
		// a benchmark figure, never a timed assertion
		console.log(`queueNewJobs: ${n} jobs in ${ms} ms`);
	});

	it("writes nothing when one request of a batch is invalid", async () => {
		const before = await counts();
		const bad = transaction(tdb.db, t =>
			queueNewJobs(tdb.db, t, [
				{ jobTypeId: jt.other, jobData: {} },
				{ jobTypeId: jt.kml, jobData: {}, dataField: "jobs[1].data" }
			])
		);
		await expect(bad).rejects.toThrow(/^jobs\[1\]\.data\.input_data: the required input/);
		expect(await counts()).toEqual(before);
	});

	it("queues existing PENDING jobs (a recipe's next step) with queueExistingJobs", async () => {
		const id = await createJob(jt.other, {});
		await query(`DELETE FROM queue WHERE job_id = $1`, [id]);
		await query(`DELETE FROM job_exe WHERE job_id = $1`, [id]);
		await query(
			`UPDATE job SET status = 'PENDING', num_exes = 0, queued = NULL WHERE id = $1`,
			[id]
		);
		const done = await transaction(tdb.db, t =>
			queueExistingJobs(tdb.db, t, [id, id], { fromStatuses: ["PENDING", "BLOCKED"] })
		);
		expect(done).toHaveLength(1);
		const [job] = await query(`SELECT status, num_exes, max_tries FROM job WHERE id = $1`, [
			id
		]);
		expect(job).toEqual({ status: "QUEUED", num_exes: 1, max_tries: 3 });
		const again = await transaction(tdb.db, t =>
			queueExistingJobs(tdb.db, t, [id], { fromStatuses: ["PENDING"] })
		);
		expect(again).toEqual([]);
	});
});
