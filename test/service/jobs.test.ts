import type { ServiceBroker } from "moleculer";
import { Client } from "pg";
import { parseJobInterface } from "../../lib/documents/job-interface";
import { cancelJobTransaction } from "../../lib/queue/cancel";
import { claimBatch } from "../../lib/scheduling/claim";
import { applyPlacements } from "../../lib/scheduling/place";
import { finishExecutions } from "../../lib/executions/finish";
import { clientSql } from "../../lib/db/run";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import {
	request,
	startServices,
	type Reply,
	type TestApi,
	expectJsonError
} from "../helpers/broker";

/**
 * The jobs service over real HTTP and PostgreSQL: list and its filters, updates, details (inputs
 * and outputs merged with their values), and cancel (PATCH), with a protocol peer standing in for
 * the node agent.
 */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const JOB_FIELDS = [
	"id",
	"job_type",
	"job_type_rev",
	"event",
	"error",
	"status",
	"priority",
	"num_exes",
	"timeout",
	"max_tries",
	"cpus_required",
	"mem_required",
	"disk_in_required",
	"disk_out_required",
	"created",
	"queued",
	"started",
	"ended",
	"last_status_change",
	"last_modified"
];
const DETAIL_FIELDS = [
	...JOB_FIELDS,
	"data",
	"results",
	"recipes",
	"job_exes",
	"inputs",
	"outputs",
	"input_files",
	"products"
];
const EXE_BASE_FIELDS = [
	"id",
	"status",
	"command_arguments",
	"timeout",
	"pre_started",
	"pre_completed",
	"pre_exit_code",
	"job_started",
	"job_completed",
	"job_exit_code",
	"post_started",
	"post_completed",
	"post_exit_code",
	"created",
	"queued",
	"started",
	"ended",
	"last_modified",
	"job",
	"node",
	"error"
];
const JOB_TYPE_BASE = [
	"id",
	"name",
	"version",
	"title",
	"description",
	"category",
	"author_name",
	"author_url",
	"is_system",
	"is_long_running",
	"is_active",
	"is_operational",
	"is_paused",
	"icon_code"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let broker: ServiceBroker;
const agent = { cancels: [] as unknown[], fail: false };

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

function expectPlainError(reply: Reply, status: number, text?: RegExp) {
	expect(reply.status).toBe(status);
	expect(reply.headers.get("content-type")).toMatch(/^text\/plain/);
	if (text) expect(reply.text).toMatch(text);
}

const IFACE = {
	command: "make_kml",
	command_arguments: "${input_file} ${job_output_dir}",
	input_data: [
		{ name: "input_file", type: "file", media_types: ["image/png"] },
		{ name: "level", type: "property", required: false },
		{ name: "extras", type: "files", required: false }
	],
	output_data: [
		{ name: "output_file", type: "file" },
		{ name: "logs", type: "files", required: false }
	]
};

async function addJobType(name: string, extra: Record<string, unknown> = {}): Promise<number> {
	const normalized = JSON.stringify(parseJobInterface(IFACE));
	const cols: Record<string, unknown> = { name, version: "1.0", interface: normalized, ...extra };
	const keys = Object.keys(cols);
	const [row] = await query<{ id: number }>(
		`INSERT INTO job_type (${keys.join(", ")}) VALUES (${keys.map((_, i) => `$${i + 1}`).join(", ")})
		 RETURNING id`,
		keys.map(k => cols[k])
	);
	await query(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, $2)`,
		[row.id, normalized]
	);
	return row.id;
}

const ids = { raw: 0, products: 0, kml: 0, csv: 0, png: 0, png2: 0, node: 0 };

async function createJob(jobTypeId: number, extraInputs: unknown[] = []): Promise<any> {
	const reply = await request("POST", `${api}/queue/new-job/`, {
		job_type_id: jobTypeId,
		job_data: {
			input_data: [{ name: "input_file", file_id: ids.png }, ...extraInputs],
			output_data: [
				{ name: "output_file", workspace_id: ids.products },
				{ name: "logs", workspace_id: ids.products }
			]
		}
	});
	if (reply.status !== 201) throw new Error(`new job failed: ${reply.status} ${reply.text}`);
	return reply.body;
}

/** Claims the job's queued execution as the scheduler would: RUNNING on the test's node. */
async function runJob(jobId: number, agentId: string = broker.nodeID) {
	await query(`DELETE FROM queue WHERE job_id = $1`, [jobId]);
	const [exe] = await query<{ id: number }>(
		`UPDATE job_exe SET status = 'RUNNING', started = now(), node_id = $2, agent_id = $3,
			cpus_scheduled = 1, mem_scheduled = 64, disk_in_scheduled = 1, disk_out_scheduled = 2,
			disk_total_scheduled = 3, last_modified = now()
		 WHERE job_id = $1 AND status = 'QUEUED' RETURNING id`,
		[jobId, ids.node, agentId]
	);
	await query(
		`UPDATE job SET status = 'RUNNING', started = now(), last_status_change = now(),
			last_modified = now() WHERE id = $1`,
		[jobId]
	);
	return exe.id;
}

async function endJob(jobId: number, status: "FAILED" | "COMPLETED", errorName?: string) {
	await query(`DELETE FROM queue WHERE job_id = $1`, [jobId]);
	await query(
		`UPDATE job_exe SET status = $2::text, ended = now(), last_modified = now(),
			error_id = (SELECT id FROM error WHERE name = $3::text)
		 WHERE job_id = $1 AND status IN ('QUEUED', 'RUNNING')`,
		[jobId, status, errorName ?? null]
	);
	await query(
		`UPDATE job SET status = $2::text, ended = now(), last_status_change = now(),
			last_modified = now(), error_id = (SELECT id FROM error WHERE name = $3::text)
		 WHERE id = $1`,
		[jobId, status, errorName ?? null]
	);
}

async function list(q: string): Promise<any> {
	const reply = await request("GET", `${api}/jobs/?${q}`);
	if (reply.status !== 200) throw new Error(`list failed: ${reply.status} ${reply.text}`);
	return reply.body;
}

function patch(id: number | string, body: unknown) {
	return request("PATCH", `${api}/jobs/${id}/`, body);
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	const config = '{"version": "1.0", "broker": {"type": "host", "host_path": "/tmp"}}';
	const wsRows = await query<{ id: number; name: string }>(
		`INSERT INTO workspace (name, json_config, base_url) VALUES
			('raw', $1, 'https://host/raw/'), ('products', $1, NULL) RETURNING id, name`,
		[config]
	);
	ids.raw = wsRows[0].id;
	ids.products = wsRows[1].id;
	ids.kml = await addJobType("kml", { category: "footprints", priority: 20 });
	ids.csv = await addJobType("csv", { category: "tables", priority: 80 });
	const fileRows = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, data_type, meta_data, countries)
		 VALUES ('SOURCE', $1, 'x.png', 'a/x.png', 'image/png', 2048, md5('x'), '{tag}',
				'{"k": 1}', '{USA}'),
			('SOURCE', $1, 'y.png', 'a/y.png', 'image/png', 4096, md5('y'), '{}', '{}', '{}')
		 RETURNING id`,
		[ids.raw]
	);
	ids.png = fileRows[0].id;
	ids.png2 = fileRows[1].id;
	const [node] = await query<{ id: number }>(
		`INSERT INTO node (hostname, port, slave_id) VALUES ('n1.example', 5051, 'slave-1') RETURNING id`
	);
	ids.node = node.id;

	app = await startServices(tdb.url, ["api", "queue", "jobs"]);
	api = app.api;
	broker = app.broker;
	broker.createService({
		name: "node-agent",
		actions: {
			cancel(ctx: any) {
				agent.cancels.push(ctx.params);
				if (agent.fail) throw new Error("agent is gone");
				return { found: true };
			}
		}
	});
	await broker.waitForServices(["node-agent"]);
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("GET /jobs/", () => {
	let queued: any;
	let running: any;
	let failed: any;
	let other: any;
	let old: any;

	beforeAll(async () => {
		queued = await createJob(ids.kml);
		running = await createJob(ids.kml);
		failed = await createJob(ids.csv);
		other = await createJob(ids.csv);
		old = await createJob(ids.csv);
		await runJob(running.id);
		await endJob(failed.id, "FAILED", "unknown");
		await query(
			`UPDATE job SET last_modified = '2020-01-02T00:00:00Z', last_status_change = '2020-01-02T00:00:00Z'
			 WHERE id = $1`,
			[old.id]
		);
	});

	it("lists job records in Scale's shape, by last_modified", async () => {
		const body = await list("job_id=" + queued.id);
		expect(body).toMatchObject({ count: 1, next: null, previous: null });
		const [job] = body.results;
		expect(Object.keys(job)).toEqual(JOB_FIELDS);
		expect(Object.keys(job.job_type)).toEqual(JOB_TYPE_BASE);
		expect(job.job_type).toMatchObject({ id: ids.kml, name: "kml", category: "footprints" });
		expect(job.job_type_rev).toEqual({
			id: queued.job_type_rev.id,
			job_type: { id: ids.kml },
			revision_num: 1
		});
		expect(job.event).toEqual({
			id: queued.event.id,
			type: "USER",
			rule: null,
			occurred: queued.event.occurred
		});
		expect(job).toMatchObject({ status: "QUEUED", priority: 20, error: null, num_exes: 1 });
		expect(job.created).toMatch(ISO_MS_Z);
		const all = await list("page_size=1000");
		const modified = all.results.map((j: any) => j.last_modified);
		expect(modified).toEqual([...modified].sort());
		expect(all.results[0].id).toBe(old.id);
	});

	it("shows the error of a failed job as a summary", async () => {
		const body = await list(`job_id=${failed.id}`);
		expect(body.results[0].status).toBe("FAILED");
		expect(Object.keys(body.results[0].error)).toEqual([
			"id",
			"name",
			"title",
			"description",
			"category",
			"is_builtin"
		]);
		expect(body.results[0].error).toMatchObject({ name: "unknown", category: "SYSTEM" });
	});

	it("filters by status, job id, job type id, name and category (repeatable)", async () => {
		const idsOf = (b: any) =>
			b.results.map((j: any) => j.id).sort((a: number, c: number) => a - c);
		expect(idsOf(await list("status=RUNNING"))).toEqual([running.id]);
		expect(idsOf(await list("status=RUNNING&status=FAILED"))).toEqual([running.id, failed.id]);
		expect(idsOf(await list(`job_id=${queued.id}&job_id=${other.id}`))).toEqual([
			queued.id,
			other.id
		]);
		expect(idsOf(await list(`job_type_id=${ids.kml}`))).toEqual([queued.id, running.id]);
		expect(idsOf(await list("job_type_name=csv&status=QUEUED"))).toEqual([other.id, old.id]);
		expect(idsOf(await list("job_type_name=csv&job_type_name=kml&status=RUNNING"))).toEqual([
			running.id
		]);
		expect(idsOf(await list("job_type_category=footprints"))).toEqual([queued.id, running.id]);
		expect(idsOf(await list("error_category=SYSTEM"))).toEqual([failed.id]);
		expect((await list("job_type_name=nothing")).count).toBe(0);
	});

	it("filters by started and ended on last_modified", async () => {
		const body = await list("started=2020-01-01T00:00:00Z&ended=2020-01-03T00:00:00Z");
		expect(body.results.map((j: any) => j.id)).toEqual([old.id]);
		const recent = await list(`started=PT1H&job_type_id=${ids.csv}`);
		expect(recent.results.map((j: any) => j.id)).not.toContain(old.id);
		expect(recent.results.map((j: any) => j.id)).toContain(other.id);
	});

	it("orders by job fields and job type fields", async () => {
		const byId = await list("order=-id&page_size=3");
		const desc = byId.results.map((j: any) => j.id);
		expect(desc).toEqual([...desc].sort((a: number, b: number) => b - a));
		const byType = await list("order=job_type__name&order=-priority&order=id&page_size=1000");
		const names = byType.results.map((j: any) => j.job_type.name);
		expect(names).toEqual([...names].sort());
		expect(byType.next).toBeNull();
	});

	it("orders by the field paths Scale's web UI sends (error.category) and by duration", async () => {
		const ids = (b: any) => b.results.map((j: any) => j.id);
		expect(ids(await list("order=error.category&page_size=1000"))).toEqual(
			ids(await list("order=error__category&page_size=1000"))
		);
		expect(ids(await list("order=-job_type.name&page_size=1000"))).toEqual(
			ids(await list("order=-job_type__name&page_size=1000"))
		);
		await query(
			`UPDATE job SET started = now() - interval '3 hours', ended = now() WHERE id = $1`,
			[failed.id]
		);
		await query(
			`UPDATE job SET started = now() - interval '2 hours', ended = NULL WHERE id = $1`,
			[running.id]
		);
		const longest = ids(await list("order=-duration&status=FAILED&status=RUNNING"));
		expect(longest).toEqual([failed.id, running.id]);
		const shortest = ids(await list("order=duration&status=FAILED&status=RUNNING"));
		expect(shortest).toEqual([running.id, failed.id]);
		expectJsonError(await request("GET", `${api}/jobs/?order=error.nope`), 400, /^order: /);
	});

	it("orders by every column Scale 3.0's jobs page sorts, as the browser sent them", async () => {
		// jobsController's sortable fields (scripts/scale-ui-check.js clicks each header)
		const fields = [
			"job_type",
			"created",
			"last_modified",
			"status",
			"error.category",
			"error.title",
			"id"
		];
		const window = "ended=2099-01-01T23:59:59.999Z&started=2000-01-01T00:00:00.000Z";
		for (const field of fields) {
			for (const order of [field, `-${field}`]) {
				const reply = await request(
					"GET",
					`${api}/jobs/?${window}&order=${order}&page=1&page_size=25`
				);
				expect([order, reply.status]).toEqual([order, 200]);
			}
		}
		const titles = (await list("order=error.title&page_size=1000")).results.map(
			(j: any) => j.error?.title ?? null
		);
		const named = titles.filter((t: string | null) => t !== null);
		expect(named.length).toBeGreaterThan(0);
		// by title, then the jobs without an error (PostgreSQL sorts nulls last ascending)
		expect(titles).toEqual([...[...named].sort(), ...titles.filter((t: any) => t === null)]);
	});

	it("pages with next and previous links", async () => {
		const first = await list("page_size=2&order=id");
		expect(first.results).toHaveLength(2);
		expect(first.next).toMatch(/page=2/);
		const second = await request("GET", first.next);
		expect(second.body.previous).toMatch(/page=1/);
		expect(second.body.results[0].id).toBeGreaterThan(first.results[1].id);
	});

	it("refuses bad filters with a 400 naming them", async () => {
		expectJsonError(await request("GET", `${api}/jobs/?status=BOGUS`), 400, /^status: /);
		expectJsonError(await request("GET", `${api}/jobs/?job_id=abc`), 400, /^job_id: /);
		expectJsonError(
			await request("GET", `${api}/jobs/?job_type_id=1.5`),
			400,
			/^job_type_id: /
		);
		expectJsonError(await request("GET", `${api}/jobs/?order=nope`), 400, /^order: /);
		expectJsonError(await request("GET", `${api}/jobs/?started=tomorrow`), 400, /^started: /);
	});
});

describe("GET /jobs/updates/", () => {
	it("lists jobs whose status changed in the range, each with its input files", async () => {
		const job = await createJob(ids.kml, [{ name: "extras", file_ids: [ids.png2] }]);
		await query(`UPDATE job SET last_status_change = '2021-05-05T12:00:00Z' WHERE id = $1`, [
			job.id
		]);
		const reply = await request(
			"GET",
			`${api}/jobs/updates/?started=2021-05-05T00:00:00Z&ended=2021-05-06T00:00:00Z`
		);
		expect(reply.status).toBe(200);
		expect(reply.body.count).toBe(1);
		const [entry] = reply.body.results;
		expect(Object.keys(entry)).toEqual([...JOB_FIELDS, "input_files"]);
		expect(entry.last_status_change).toBe("2021-05-05T12:00:00.000Z");
		expect(entry.input_files.map((f: any) => f.id)).toEqual([ids.png, ids.png2]);
		expect(entry.input_files[0]).toMatchObject({
			file_name: "x.png",
			url: "https://host/raw/a/x.png",
			data_type: ["tag"],
			meta_data: { k: 1 },
			countries: ["USA"]
		});
		const none = await request(
			"GET",
			`${api}/jobs/updates/?started=2021-05-05T00:00:00Z&ended=2021-05-06T00:00:00Z&status=FAILED`
		);
		expect(none.body.count).toBe(0);
		const byType = await request(
			"GET",
			`${api}/jobs/updates/?job_type_name=kml&started=2021-05-05T00:00:00Z&ended=2021-05-06T00:00:00Z`
		);
		expect(byType.body.count).toBe(1);
	});
});

describe("GET /jobs/{id}/", () => {
	it("answers the details: documents, executions, recipes, inputs and outputs with values", async () => {
		const job = await createJob(ids.kml, [
			{ name: "level", value: "7" },
			{ name: "extras", file_id: ids.png2 }
		]);
		const exeId = await runJob(job.id);
		const [product] = await query<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				file_size, uuid, job_type_id, job_id, job_exe_id, is_published, published)
			 VALUES ('PRODUCT', $1, 'out.kml', 'p/out.kml', 'application/kml', 99, md5('out'),
				$2, $3, $4, true, now())
			 RETURNING id`,
			[ids.products, ids.kml, job.id, exeId]
		);
		await endJob(job.id, "COMPLETED");
		await query(`UPDATE job SET results = $2 WHERE id = $1`, [
			job.id,
			JSON.stringify({
				version: "1.0",
				output_data: [{ name: "output_file", file_id: product.id }]
			})
		]);
		const [rt] = await query<{ id: number }>(
			`INSERT INTO recipe_type (name, version, definition) VALUES ('r', '1', '{}') RETURNING id`
		);
		const [rtr] = await query<{ id: number }>(
			`INSERT INTO recipe_type_rev (recipe_type_id, revision_num, definition) VALUES ($1, 1, '{}')
			 RETURNING id`,
			[rt.id]
		);
		const [recipe] = await query<{ id: number }>(
			`INSERT INTO recipe (recipe_type_id, recipe_type_rev_id, event_id, data)
			 VALUES ($1, $2, $3, '{}') RETURNING id`,
			[rt.id, rtr.id, job.event.id]
		);
		await query(`INSERT INTO recipe_job (recipe_id, job_name, job_id) VALUES ($1, 'a', $2)`, [
			recipe.id,
			job.id
		]);

		const reply = await request("GET", `${api}/jobs/${job.id}/`);
		expect(reply.status).toBe(200);
		const d = reply.body;
		expect(Object.keys(d)).toEqual(DETAIL_FIELDS);
		expect(d.status).toBe("COMPLETED");
		expect(d.job_type).toMatchObject({
			id: ids.kml,
			name: "kml",
			priority: 20,
			trigger_rule: null
		});
		expect(d.job_type.revision_num).toBe(1);
		expect(Object.keys(d.job_type_rev)).toEqual([
			"id",
			"job_type",
			"revision_num",
			"interface",
			"created"
		]);
		expect(Object.keys(d.event)).toEqual(["id", "type", "rule", "occurred", "description"]);
		expect(d.data.input_data).toHaveLength(3);
		expect(d.results.output_data[0].file_id).toBe(product.id);
		expect(d.recipes).toHaveLength(1);
		expect(d.recipes[0]).toMatchObject({
			id: recipe.id,
			recipe_type: { id: rt.id, name: "r", version: "1" },
			recipe_type_rev: { id: rtr.id, recipe_type: { id: rt.id }, revision_num: 1 },
			event: { id: job.event.id, type: "USER", rule: null },
			completed: null
		});
		expect(d.job_exes).toHaveLength(1);
		expect(Object.keys(d.job_exes[0])).toEqual(EXE_BASE_FIELDS);
		expect(d.job_exes[0]).toMatchObject({
			id: exeId,
			status: "COMPLETED",
			node: { id: ids.node },
			job: { id: job.id }
		});
		expect(d.inputs.map((i: any) => [i.name, i.type])).toEqual([
			["input_file", "file"],
			["level", "property"],
			["extras", "files"]
		]);
		expect(d.inputs[0].value).toMatchObject({
			id: ids.png,
			file_name: "x.png",
			is_parsed: false
		});
		expect(d.inputs[1].value).toBe("7");
		expect(d.inputs[2].value.map((f: any) => f.id)).toEqual([ids.png2]);
		expect(d.outputs).toHaveLength(2);
		expect(d.outputs[0].name).toBe("output_file");
		expect(d.outputs[0].value).toMatchObject({
			id: product.id,
			file_name: "out.kml",
			// no base URL: the API's download route, under the root the request used
			url: `${api}/files/${product.id}/download/`,
			is_operational: true,
			is_published: true,
			unpublished: null,
			job_type: { id: ids.kml },
			job: { id: job.id },
			job_exe: { id: exeId },
			workspace: { id: ids.products, name: "products" }
		});
		expect(d.outputs[0].value.published).toMatch(ISO_MS_Z);
		expect(d.outputs[1]).toEqual({ name: "logs", type: "files", value: null });
		// Scale 3.0's deprecated members: the input files by id, and the job's products
		expect(d.input_files.map((f: any) => f.id)).toEqual([ids.png, ids.png2]);
		expect(d.input_files[0]).toEqual(d.inputs[0].value);
		expect(d.products).toEqual([d.outputs[0].value]);
	});

	it("shows executions newest first and the whole error", async () => {
		const job = await createJob(ids.csv);
		await endJob(job.id, "FAILED", "unknown");
		const requeued = await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: [job.id] });
		expect(requeued.status).toBe(200);
		await endJob(job.id, "FAILED", "unknown");
		const d = (await request("GET", `${api}/jobs/${job.id}/`)).body;
		expect(d.job_exes).toHaveLength(2);
		expect(d.job_exes[0].id).toBeGreaterThan(d.job_exes[1].id);
		expect(d.error).toMatchObject({ name: "unknown", category: "SYSTEM" });
		expect(d.error.created).toMatch(ISO_MS_Z);
	});

	it("answers 404 for an unknown job", async () => {
		expectJsonError(await request("GET", `${api}/jobs/987654/`), 404);
		expectJsonError(await request("GET", `${api}/jobs/abc/`), 404);
	});
});

describe("PATCH /jobs/{id}/", () => {
	beforeEach(() => {
		agent.cancels.length = 0;
		agent.fail = false;
	});

	it("cancels a QUEUED job: 200 with the job, its queue row gone, its execution CANCELED", async () => {
		const job = await createJob(ids.kml);
		const reply = await patch(job.id, { status: "CANCELED" });
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body)).toEqual(DETAIL_FIELDS);
		expect(reply.body.status).toBe("CANCELED");
		expect(reply.body.ended).toMatch(ISO_MS_Z);
		// {} as Scale answered (its web UI reads results.output_data), not null
		expect(reply.body.results).toEqual({});
		expect((await request("GET", `${api}/jobs/${job.id}/`)).body.results).toEqual({});
		expect(reply.body.job_exes[0]).toMatchObject({ status: "CANCELED" });
		expect(reply.body.job_exes[0].ended).toMatch(ISO_MS_Z);
		const queue = await query(`SELECT id FROM queue WHERE job_id = $1`, [job.id]);
		expect(queue).toEqual([]);
		expect(agent.cancels).toEqual([]);
	});

	it("cancels a RUNNING job and has its agent kill the process", async () => {
		const job = await createJob(ids.kml);
		const exeId = await runJob(job.id);
		const reply = await patch(job.id, { status: "CANCELED" });
		expect(reply.status).toBe(200);
		expect(reply.body.status).toBe("CANCELED");
		expect(agent.cancels).toEqual([{ jobExeId: exeId }]);
		const [exe] = await query(
			`SELECT status, ended IS NOT NULL AS ended FROM job_exe WHERE id = $1`,
			[exeId]
		);
		expect(exe).toEqual({ status: "CANCELED", ended: true });
	});

	it("still cancels when the agent cannot be reached", async () => {
		agent.fail = true;
		const job = await createJob(ids.kml);
		await runJob(job.id);
		const reply = await patch(job.id, { status: "CANCELED" });
		expect(reply.status).toBe(200);
		expect(reply.body.status).toBe("CANCELED");
		const job2 = await createJob(ids.kml);
		await runJob(job2.id, "no-such-node");
		const reply2 = await patch(job2.id, { status: "CANCELED" });
		expect(reply2.status).toBe(200);
	});

	it("cancels a FAILED job (as Scale does), clearing its error, and PENDING or BLOCKED jobs", async () => {
		const job = await createJob(ids.kml);
		await endJob(job.id, "FAILED", "unknown");
		const reply = await patch(job.id, { status: "CANCELED" });
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({ status: "CANCELED", error: null });
		for (const status of ["PENDING", "BLOCKED"]) {
			const j = await createJob(ids.kml);
			await query(`DELETE FROM job_exe WHERE job_id = $1`, [j.id]);
			await query(`UPDATE job SET status = $2, num_exes = 0 WHERE id = $1`, [j.id, status]);
			const r = await patch(j.id, { status: "CANCELED" });
			expect(r.status).toBe(200);
			expect(r.body).toMatchObject({ status: "CANCELED", job_exes: [] });
		}
	});

	it("refuses a COMPLETED or CANCELED job: 400 text/plain, nothing changed", async () => {
		const job = await createJob(ids.kml);
		await endJob(job.id, "COMPLETED");
		expectPlainError(
			await patch(job.id, { status: "CANCELED" }),
			400,
			/cannot be canceled when in status COMPLETED/
		);
		const [row] = await query(`SELECT status FROM job WHERE id = $1`, [job.id]);
		expect(row.status).toBe("COMPLETED");
		const job2 = await createJob(ids.kml);
		expect((await patch(job2.id, { status: "CANCELED" })).status).toBe(200);
		expectPlainError(await patch(job2.id, { status: "CANCELED" }), 400, /status CANCELED/);
	});

	it("refuses other fields and values: 400 text/plain", async () => {
		const job = await createJob(ids.kml);
		expectPlainError(await patch(job.id, {}), 400, /No fields/);
		expectPlainError(
			await patch(job.id, { status: "CANCELED", priority: 1, name: "x" }),
			400,
			/Unexpected fields: priority, name/
		);
		expectPlainError(
			await patch(job.id, { status: "QUEUED" }),
			400,
			/Allowed values: CANCELED/
		);
		expectPlainError(await patch(job.id, { status: 3 }), 400, /Allowed values: CANCELED/);
		expectPlainError(await patch(job.id, { status: null }), 400, /Allowed values: CANCELED/);
		const [row] = await query(`SELECT status FROM job WHERE id = $1`, [job.id]);
		expect(row.status).toBe("QUEUED");
	});

	it("answers 404 text/plain for an unknown job", async () => {
		expectPlainError(await patch(987654, { status: "CANCELED" }), 404, /Job 987654 not found/);
	});
});

describe("canceling while the scheduler requeues the job", () => {
	let client: Client;

	beforeEach(async () => {
		agent.cancels.length = 0;
		agent.fail = false;
		client = new Client({ connectionString: tdb.url });
		await client.connect();
	});

	afterEach(async () => {
		await client.query("ROLLBACK").catch(() => undefined);
		await client.end();
	});

	/** Waits until some statement of this database waits for a row lock. */
	async function someoneWaitsForALock() {
		for (let i = 0; i < 500; i++) {
			const [row] = await query<{ n: number }>(
				`SELECT count(*)::int AS n FROM pg_stat_activity
				 WHERE datname = current_database() AND wait_event_type = 'Lock'`
			);
			if (row.n > 0) return;
			await new Promise(r => setTimeout(r, 10));
		}
		throw new Error("nobody waits for a lock");
	}

	async function state(jobId: number) {
		return {
			job: (await query(`SELECT status FROM job WHERE id = $1`, [jobId]))[0].status,
			exes: (
				await query(
					`SELECT x.status, e.name AS error FROM job_exe x
					 LEFT JOIN error e ON e.id = x.error_id WHERE x.job_id = $1 ORDER BY x.id`,
					[jobId]
				)
			).map(x => [x.status, x.error]),
			queue: await query(`SELECT id FROM queue WHERE job_id = $1`, [jobId])
		};
	}

	it("cancels the execution the requeue made when the requeue commits first", async () => {
		const job = await createJob(ids.kml);
		const exeId = await runJob(job.id);
		// The scheduler's transaction requeues the job after a SYSTEM failure, not yet committed.
		await client.query("BEGIN");
		const finish = await finishExecutions(clientSql(client), {
			failures: [{ jobExeId: exeId, errorName: "task-launch" }]
		});
		expect(finish.requeuedJobs).toEqual([job.id]);
		// The cancel has looked at the queue (nothing yet) and waits for the failed execution.
		const reply = patch(job.id, { status: "CANCELED" });
		await someoneWaitsForALock();
		await client.query("COMMIT");
		const answer = await reply;
		expect(answer.status).toBe(200);
		expect(answer.body.status).toBe("CANCELED");
		expect(answer.body.job_exes.map((x: any) => x.status)).toEqual(["CANCELED", "FAILED"]);
		expect(await state(job.id)).toEqual({
			job: "CANCELED",
			exes: [
				["FAILED", "task-launch"],
				["CANCELED", null]
			],
			queue: []
		});
		// it was only queued: no agent to tell
		expect(agent.cancels).toEqual([]);
	});

	it("waits for a placement in flight, then cancels what it started (no deadlock)", async () => {
		const job = await createJob(ids.kml);
		const rows = await claimBatch(clientSql(client), null, [], 1000);
		const row = rows.find(r => r.jobId === job.id)!;
		const node = { id: ids.node, agentId: broker.nodeID, free: { cpus: 1, mem: 1, disk: 1 } };
		// the placement has taken the queue row, the execution and the job, not yet committed
		await client.query("BEGIN");
		const [placed] = await applyPlacements(clientSql(client), [{ row, node }]);
		const reply = patch(job.id, { status: "CANCELED" });
		await someoneWaitsForALock();
		await client.query("COMMIT");
		const answer = await reply;
		expect(answer.status).toBe(200);
		expect(await state(job.id)).toEqual({
			job: "CANCELED",
			exes: [["CANCELED", null]],
			queue: []
		});
		expect(agent.cancels).toEqual([{ jobExeId: placed.id }]);
	});

	it("places nothing for a job a cancel took while the pass matched it", async () => {
		const job = await createJob(ids.kml);
		// the pass read the queue row (no lock: passes run one at a time) ...
		const rows = await claimBatch(clientSql(client), null, [], 1000);
		const row = rows.find(r => r.jobId === job.id)!;
		// ... and a cancel committed before the placement
		expect((await patch(job.id, { status: "CANCELED" })).status).toBe(200);
		const node = { id: ids.node, agentId: broker.nodeID, free: { cpus: 1, mem: 1, disk: 1 } };
		expect(await applyPlacements(clientSql(client), [{ row, node }])).toEqual([]);
		expect(await state(job.id)).toEqual({
			job: "CANCELED",
			exes: [["CANCELED", null]],
			queue: []
		});
		expect(agent.cancels).toEqual([]);
	});

	it("waits for a cancel in flight on the queue row before taking the execution (no deadlock)", async () => {
		const job = await createJob(ids.kml);
		const rows = await claimBatch(clientSql(client), null, [], 1000);
		const row = rows.find(r => r.jobId === job.id)!;
		const [{ id: exeId }] = await query<{ id: number }>(
			`SELECT id FROM job_exe WHERE job_id = $1`,
			[job.id]
		);
		// a cancel's first step (lib/queue/cancel.ts): its queue row, not yet committed
		await client.query("BEGIN");
		await client.query(`DELETE FROM queue WHERE job_id = $1`, [job.id]);
		const placer = new Client({ connectionString: tdb.url });
		await placer.connect();
		try {
			const node = {
				id: ids.node,
				agentId: broker.nodeID,
				free: { cpus: 1, mem: 1, disk: 1 }
			};
			const placing = applyPlacements(clientSql(placer), [{ row, node }]);
			await someoneWaitsForALock();
			// the placement holds no lock on the execution the cancel takes next
			await expect(
				query(`SELECT id FROM job_exe WHERE id = $1 FOR UPDATE NOWAIT`, [exeId])
			).resolves.toHaveLength(1);
			await client.query(
				`UPDATE job_exe SET status = 'CANCELED', ended = now() WHERE id = $1`,
				[exeId]
			);
			await client.query(`UPDATE job SET status = 'CANCELED', ended = now() WHERE id = $1`, [
				job.id
			]);
			await client.query("COMMIT");
			expect(await placing).toEqual([]);
		} finally {
			await placer.end();
		}
		expect(await state(job.id)).toEqual({
			job: "CANCELED",
			exes: [["CANCELED", null]],
			queue: []
		});
	});

	it("places nothing on a node paused since the pass read its offers: the job stays queued", async () => {
		const job = await createJob(ids.kml);
		await client.query("BEGIN");
		const rows = await claimBatch(clientSql(client), null, [], 1000);
		const row = rows.find(r => r.jobId === job.id)!;
		// a report pauses the node (too many failures) after the pass read it as free
		await query(`UPDATE node SET is_paused = true WHERE id = $1`, [ids.node]);
		const node = { id: ids.node, agentId: broker.nodeID, free: { cpus: 1, mem: 1, disk: 1 } };
		try {
			expect(await applyPlacements(clientSql(client), [{ row, node }])).toEqual([]);
			await client.query("COMMIT");
		} finally {
			await query(`UPDATE node SET is_paused = false WHERE id = $1`, [ids.node]);
		}
		const after = await state(job.id);
		expect(after).toMatchObject({ job: "QUEUED", exes: [["QUEUED", null]] });
		expect(after.queue).toHaveLength(1);
		await patch(job.id, { status: "CANCELED" });
	});

	it("leaves a job canceled first alone: the failure that follows requeues nothing", async () => {
		const job = await createJob(ids.kml);
		const exeId = await runJob(job.id);
		let release!: () => void;
		const gate = new Promise<void>(r => (release = r));
		let entered!: () => void;
		const canceled = new Promise<void>(r => (entered = r));
		// The cancel's transaction has done its work and holds its locks until released.
		const canceling = cancelJobTransaction(tdb.db, job.id, () => {
			entered();
			return gate;
		});
		await canceled;
		await client.query("BEGIN");
		const failing = finishExecutions(clientSql(client), {
			failures: [{ jobExeId: exeId, errorName: "task-launch" }]
		});
		await someoneWaitsForALock();
		release();
		expect((await canceling).result.canceledExe).toMatchObject({
			id: exeId,
			previous: "RUNNING"
		});
		const finish = await failing;
		await client.query("COMMIT");
		expect(finish.ended.size).toBe(0);
		expect(finish.requeuedJobs).toEqual([]);
		expect(await state(job.id)).toEqual({
			job: "CANCELED",
			exes: [["CANCELED", null]],
			queue: []
		});
	});
});
