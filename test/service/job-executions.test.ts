import type { ServiceBroker } from "moleculer";
import { parseJobInterface } from "../../lib/documents/job-interface";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/**
 * The job executions service over real HTTP and PostgreSQL: list and its filters (node_id
 * included), details, and logs (live from a protocol peer standing in for the agent while the
 * execution runs, from job_exe_log once it ended).
 */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const EXE_SCALARS = [
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
	"last_modified"
];
const LIST_FIELDS = [...EXE_SCALARS, "job", "node", "error"];
const DETAIL_FIELDS = [
	...LIST_FIELDS,
	"environment",
	"cpus_scheduled",
	"mem_scheduled",
	"disk_in_scheduled",
	"disk_out_scheduled",
	"disk_total_scheduled",
	"results",
	"current_stdout_url",
	"current_stderr_url",
	"results_manifest"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let broker: ServiceBroker;
const agent = {
	calls: [] as unknown[],
	fail: false,
	logs: { stdout: "live out\n", stderr: "live err\n", is_finished: false }
};

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function addJobType(name: string, category: string): Promise<number> {
	const iface = JSON.stringify(parseJobInterface({ command: "run", command_arguments: "" }));
	const [row] = await query<{ id: number }>(
		`INSERT INTO job_type (name, version, category, interface) VALUES ($1, '1.0', $2, $3)
		 RETURNING id`,
		[name, category, iface]
	);
	await query(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, $2)`,
		[row.id, iface]
	);
	return row.id;
}

const ids = { alpha: 0, beta: 0, n1: 0, n2: 0 };
const exes = { queued: 0, running1: 0, running2: 0, completed: 0, failed: 0 };
const jobs = { queued: 0, completed: 0 };

async function createJob(jobTypeId: number): Promise<{ jobId: number; exeId: number }> {
	const reply = await request("POST", `${api}/queue/new-job/`, { job_type_id: jobTypeId });
	if (reply.status !== 201) throw new Error(`new job failed: ${reply.status} ${reply.text}`);
	return { jobId: reply.body.id, exeId: reply.body.job_exes[0].id };
}

async function run(exeId: number, nodeId: number, agentId: string) {
	await query(`DELETE FROM queue WHERE job_exe_id = $1`, [exeId]);
	await query(
		`UPDATE job_exe SET status = 'RUNNING', started = now(), node_id = $2, agent_id = $3,
			command_arguments = '-v /out', environment = '{"version": "1.0"}',
			cpus_scheduled = 1.5, mem_scheduled = 128, disk_in_scheduled = 2,
			disk_out_scheduled = 3, disk_total_scheduled = 5, pre_started = now(),
			pre_completed = now(), pre_exit_code = 0, job_started = now(), last_modified = now()
		 WHERE id = $1`,
		[exeId, nodeId, agentId]
	);
	await query(
		`UPDATE job SET status = 'RUNNING', started = now(), last_status_change = now()
		 WHERE id = (SELECT job_id FROM job_exe WHERE id = $1)`,
		[exeId]
	);
}

async function end(exeId: number, status: "COMPLETED" | "FAILED", stdout: string, stderr: string) {
	await query(
		`UPDATE job_exe SET status = $2::text, ended = now(), job_completed = now(),
			job_exit_code = CASE WHEN $2::text = 'FAILED' THEN 3 ELSE 0 END,
			error_id = CASE WHEN $2::text = 'FAILED'
				THEN (SELECT id FROM error WHERE name = 'algorithm-unknown') END,
			results = CASE WHEN $2::text = 'COMPLETED'
				THEN '{"version": "1.0", "output_data": []}'::jsonb END,
			results_manifest = CASE WHEN $2::text = 'COMPLETED'
				THEN '{"version": "1.1", "output_data": [], "parse_results": []}'::jsonb END,
			last_modified = now()
		 WHERE id = $1`,
		[exeId, status]
	);
	await query(
		`UPDATE job SET status = $2::text, ended = now(), last_status_change = now(),
			error_id = (SELECT error_id FROM job_exe WHERE id = $1)
		 WHERE id = (SELECT job_id FROM job_exe WHERE id = $1)`,
		[exeId, status]
	);
	await query(`INSERT INTO job_exe_log (job_exe_id, stdout, stderr) VALUES ($1, $2, $3)`, [
		exeId,
		stdout,
		stderr
	]);
}

async function list(q: string): Promise<any> {
	const reply = await request("GET", `${api}/job-executions/?${q}`);
	if (reply.status !== 200) throw new Error(`list failed: ${reply.status} ${reply.text}`);
	return reply.body;
}

const idsOf = (body: any) =>
	body.results.map((e: any) => e.id).sort((a: number, b: number) => a - b);

beforeAll(async () => {
	tdb = await createTestDatabase();
	ids.alpha = await addJobType("alpha", "cat-a");
	ids.beta = await addJobType("beta", "cat-b");
	const nodes = await query<{ id: number }>(
		`INSERT INTO node (hostname, port, slave_id, agent_id) VALUES
			('b-host', 5051, 'slave-b', NULL), ('a-host', 5052, 'slave-a', NULL)
		 RETURNING id`
	);
	ids.n1 = nodes[0].id;
	ids.n2 = nodes[1].id;

	app = await startServices(tdb.url, ["api", "queue", "job-executions"]);
	api = app.api;
	broker = app.broker;
	broker.createService({
		name: "node-agent",
		actions: {
			logs(ctx: any) {
				agent.calls.push(ctx.params);
				if (agent.fail) throw new Error("agent is gone");
				return agent.logs;
			}
		}
	});
	await broker.waitForServices(["node-agent"]);

	const q = await createJob(ids.alpha);
	jobs.queued = q.jobId;
	exes.queued = q.exeId;
	exes.running1 = (await createJob(ids.alpha)).exeId;
	exes.running2 = (await createJob(ids.beta)).exeId;
	const c = await createJob(ids.beta);
	jobs.completed = c.jobId;
	exes.completed = c.exeId;
	exes.failed = (await createJob(ids.alpha)).exeId;
	await run(exes.running1, ids.n1, broker.nodeID);
	await run(exes.running2, ids.n2, broker.nodeID);
	await run(exes.completed, ids.n1, broker.nodeID);
	await run(exes.failed, ids.n2, broker.nodeID);
	await end(exes.completed, "COMPLETED", "all done\n", "");
	await end(exes.failed, "FAILED", "", "boom\n");
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("GET /job-executions/", () => {
	it("lists execution records with their job, node and error summaries", async () => {
		const body = await list("page_size=100");
		expect(body.count).toBe(5);
		const failed = body.results.find((e: any) => e.id === exes.failed);
		expect(Object.keys(failed)).toEqual(LIST_FIELDS);
		expect(failed).toMatchObject({
			status: "FAILED",
			command_arguments: "-v /out",
			job_exit_code: 3,
			pre_exit_code: 0,
			node: { id: ids.n2, hostname: "a-host", port: 5052, slave_id: "slave-a" },
			error: { name: "algorithm-unknown", category: "ALGORITHM" }
		});
		expect(Object.keys(failed.job)).toEqual([
			"id",
			"job_type",
			"job_type_rev",
			"event",
			"error",
			"status",
			"priority",
			"num_exes"
		]);
		expect(failed.job).toMatchObject({
			status: "FAILED",
			job_type: { id: ids.alpha, name: "alpha", category: "cat-a" },
			num_exes: 1
		});
		expect(Object.keys(failed.job.error)).toEqual(["id"]);
		expect(failed.ended).toMatch(ISO_MS_Z);
		const queued = body.results.find((e: any) => e.id === exes.queued);
		expect(queued).toMatchObject({ status: "QUEUED", node: null, error: null, started: null });
		const modified = body.results.map((e: any) => e.last_modified);
		expect(modified).toEqual([...modified].sort());
	});

	it("filters by status, job type id, name, category and node id (repeatable)", async () => {
		expect(idsOf(await list("status=RUNNING"))).toEqual([exes.running1, exes.running2]);
		expect(idsOf(await list("status=COMPLETED&status=FAILED"))).toEqual([
			exes.completed,
			exes.failed
		]);
		expect(idsOf(await list(`job_type_id=${ids.beta}`))).toEqual([
			exes.running2,
			exes.completed
		]);
		expect(idsOf(await list("job_type_name=alpha&status=RUNNING"))).toEqual([exes.running1]);
		expect(idsOf(await list("job_type_category=cat-b"))).toEqual([
			exes.running2,
			exes.completed
		]);
		expect(idsOf(await list(`node_id=${ids.n1}`))).toEqual([exes.running1, exes.completed]);
		expect(idsOf(await list(`node_id=${ids.n1}&node_id=${ids.n2}`))).toEqual([
			exes.running1,
			exes.running2,
			exes.completed,
			exes.failed
		]);
		expect(idsOf(await list(`job_id=${jobs.queued}`))).toEqual([exes.queued]);
		expect((await list("started=2000-01-01T00:00:00Z&ended=2000-01-02T00:00:00Z")).count).toBe(
			0
		);
		expect((await list("started=PT1H")).count).toBe(5);
	});

	it("orders by nested fields", async () => {
		const byHost = await list(
			"status=RUNNING&status=COMPLETED&status=FAILED&order=node__hostname&order=id"
		);
		expect(byHost.results.map((e: any) => e.node.hostname)).toEqual([
			"a-host",
			"a-host",
			"b-host",
			"b-host"
		]);
		const byType = await list("order=-job_type__name&order=id");
		expect(byType.results[0].job.job_type.name).toBe("beta");
		// Scale's web UI sends its grid's field paths, and sorts by duration
		const dotted = await list("order=-job_type.name&order=id");
		expect(dotted.results.map((x: any) => x.id)).toEqual(byType.results.map((x: any) => x.id));
		const byDuration = await list("order=-duration&page_size=1000");
		const spans = byDuration.results
			.filter((x: any) => x.started !== null && x.ended !== null)
			.map((x: any) => Date.parse(x.ended) - Date.parse(x.started));
		expect(spans).toEqual([...spans].sort((a, b) => b - a));
	});

	it("refuses bad filters with a 400 naming them", async () => {
		expectJsonError(
			await request("GET", `${api}/job-executions/?status=PENDING`),
			400,
			/^status: /
		);
		expectJsonError(
			await request("GET", `${api}/job-executions/?node_id=x`),
			400,
			/^node_id: /
		);
		expectJsonError(
			await request("GET", `${api}/job-executions/?order=bogus`),
			400,
			/^order: /
		);
	});
});

describe("GET /job-executions/{id}/", () => {
	it("answers the details of an ended execution", async () => {
		const reply = await request("GET", `${api}/job-executions/${exes.completed}/`);
		expect(reply.status).toBe(200);
		const d = reply.body;
		expect(Object.keys(d)).toEqual(DETAIL_FIELDS);
		expect(d).toMatchObject({
			id: exes.completed,
			status: "COMPLETED",
			environment: { version: "1.0" },
			cpus_scheduled: 1.5,
			mem_scheduled: 128,
			disk_in_scheduled: 2,
			disk_out_scheduled: 3,
			disk_total_scheduled: 5,
			results: { version: "1.0", output_data: [] },
			results_manifest: { version: "1.1", output_data: [], parse_results: [] },
			current_stdout_url: null,
			current_stderr_url: null,
			error: null
		});
		expect(Object.keys(d.node)).toEqual([
			"id",
			"hostname",
			"port",
			"slave_id",
			"agent_id",
			"last_heartbeat",
			"pause_reason",
			"is_paused",
			"is_paused_errors",
			"is_active",
			"is_draining",
			"draining_since",
			"drain_by",
			"archived",
			"created",
			"last_offer",
			"last_modified"
		]);
		expect(d.node).toMatchObject({ id: ids.n1, hostname: "b-host", is_active: true });
		expect(d.job).toMatchObject({
			id: jobs.completed,
			status: "COMPLETED",
			job_type: { name: "beta" },
			job_type_rev: { revision_num: 1 },
			event: { type: "USER" }
		});
		expect(d.job.timeout).toBe(1800);
	});

	it("gives a running execution URLs of its current logs, and a failed one its whole error", async () => {
		const running = (await request("GET", `${api}/job-executions/${exes.running1}/`)).body;
		expect(running.current_stdout_url).toBe(
			`${api}/job-executions/${exes.running1}/logs/?stream=stdout`
		);
		expect(running.current_stderr_url).toBe(
			`${api}/job-executions/${exes.running1}/logs/?stream=stderr`
		);
		const failed = (await request("GET", `${api}/job-executions/${exes.failed}/`)).body;
		expect(failed.error).toMatchObject({ name: "algorithm-unknown", category: "ALGORITHM" });
		expect(failed.error.created).toMatch(ISO_MS_Z);
		// {} as Scale answered for an execution without results, not null
		expect(failed).toMatchObject({ results: {}, results_manifest: {} });
		const queued = (await request("GET", `${api}/job-executions/${exes.queued}/`)).body;
		expect(queued).toMatchObject({ node: null, cpus_scheduled: null, environment: null });
	});

	it("answers 404 for an unknown execution", async () => {
		expectJsonError(await request("GET", `${api}/job-executions/987654/`), 404);
	});
});

describe("GET /job-executions/{id}/logs/", () => {
	beforeEach(() => {
		agent.calls.length = 0;
		agent.fail = false;
	});

	it("reads an ended execution's logs from storage", async () => {
		const reply = await request("GET", `${api}/job-executions/${exes.failed}/logs/`);
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body)).toEqual([
			...LIST_FIELDS,
			"is_finished",
			"stdout",
			"stderr"
		]);
		expect(reply.body).toMatchObject({
			id: exes.failed,
			status: "FAILED",
			is_finished: true,
			stdout: "",
			stderr: "boom\n"
		});
		expect(agent.calls).toEqual([]);
		const done = await request("GET", `${api}/job-executions/${exes.completed}/logs/`);
		expect(done.body).toMatchObject({ stdout: "all done\n", is_finished: true });
	});

	it("reads a running execution's logs live from its agent", async () => {
		const reply = await request("GET", `${api}/job-executions/${exes.running1}/logs/`);
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			status: "RUNNING",
			is_finished: false,
			stdout: "live out\n",
			stderr: "live err\n"
		});
		expect(agent.calls).toEqual([{ jobExeId: exes.running1 }]);
	});

	it("falls back to the stored logs when the agent does not answer", async () => {
		agent.fail = true;
		await query(
			`INSERT INTO job_exe_log (job_exe_id, stdout, stderr) VALUES ($1, 'partial', '')`,
			[exes.running2]
		);
		const reply = await request("GET", `${api}/job-executions/${exes.running2}/logs/`);
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			status: "RUNNING",
			is_finished: false,
			stdout: "partial"
		});
	});

	it("reads a just-canceled execution's logs from its agent until its report stores them", async () => {
		const { exeId } = await createJob(ids.alpha);
		await run(exeId, ids.n1, broker.nodeID);
		await query(`UPDATE job_exe SET status = 'CANCELED', ended = now() WHERE id = $1`, [exeId]);
		const held = await request("GET", `${api}/job-executions/${exeId}/logs/`);
		expect(held.body).toMatchObject({ status: "CANCELED", stdout: "live out\n" });
		expect(agent.calls).toEqual([{ jobExeId: exeId }]);
		await query(
			`INSERT INTO job_exe_log (job_exe_id, stdout, stderr) VALUES ($1, 'final out', '')`,
			[exeId]
		);
		const stored = await request("GET", `${api}/job-executions/${exeId}/logs/`);
		expect(stored.body).toMatchObject({ stdout: "final out", is_finished: true });
		expect(agent.calls).toHaveLength(1);
	});

	it("answers one stream as text/plain (what the current log URLs point at)", async () => {
		const live = await request(
			"GET",
			`${api}/job-executions/${exes.running1}/logs/?stream=stderr`
		);
		expect(live.status).toBe(200);
		expect(live.headers.get("content-type")).toMatch(/^text\/plain/);
		expect(live.text).toBe("live err\n");
		const stored = await request(
			"GET",
			`${api}/job-executions/${exes.completed}/logs/?stream=stdout`
		);
		expect(stored.text).toBe("all done\n");
		expectJsonError(
			await request("GET", `${api}/job-executions/${exes.completed}/logs/?stream=both`),
			400,
			/^stream: /
		);
	});

	it("answers empty logs for a queued execution, and 404 for an unknown one", async () => {
		const reply = await request("GET", `${api}/job-executions/${exes.queued}/logs/`);
		expect(reply.body).toMatchObject({
			status: "QUEUED",
			is_finished: false,
			stdout: "",
			stderr: ""
		});
		expectJsonError(await request("GET", `${api}/job-executions/987654/logs/`), 404);
	});
});
