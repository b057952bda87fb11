import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startE2e, until, type E2e, JOB_SERVICES } from "../helpers/e2e";

/**
 * Why a QUEUED job waits, asked through the REST API of a control plane with a real scheduler and
 * node agent (2 cpus): no head-of-line blocking (500 high-priority jobs larger than any node do
 * not keep small low-priority ones from running), and each reason a live cluster can show.
 */

const SERVICES = JOB_SERVICES;

let tdb: TestDatabase;
let e2e: E2e;
let root: string;
let nodeId: number;

async function jobType(name: string, command: string, args: string, extra: object = {}) {
	const body = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name,
			version: "1",
			cpus_required: 0.1,
			mem_required: 16,
			interface: { command, command_arguments: args },
			...extra
		},
		201
	);
	return body.id as number;
}

/** A new job of the type (its priority the job type's: new-job takes none). */
async function queue(jobTypeId: number): Promise<number> {
	const body = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{ job_type_id: jobTypeId, job_data: { input_data: [], output_data: [] } },
		201
	);
	return body.id as number;
}

/** The job's why_waiting once its code is `code`. */
function waitsFor(jobId: number, code: string) {
	return until(
		`job ${jobId} waiting for ${code}`,
		async () => (await e2e.ok("GET", `/jobs/${jobId}/`)).why_waiting,
		why => why?.code === code
	);
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "why-waiting-"));
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "why");
	const nodes = await until(
		"the agent's node",
		async () => (await e2e.ok("GET", "/nodes/")).results,
		(r: any[]) => r.length === 1
	);
	nodeId = nodes[0].id;
}, 30000);

afterAll(async () => {
	await e2e?.stop();
	await tdb?.drop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

it("runs small low-priority jobs at once behind 500 high-priority jobs larger than any node, which say why they wait", async () => {
	// priority 1 is the highest: every huge job is ahead of every small one
	const huge = await jobType("huge", "/bin/true", "", { cpus_required: 64, priority: 1 });
	const small = await jobType("small", "/bin/true", "", { priority: 500 });
	const large: number[] = [];
	for (let i = 0; i < 500; i += 50)
		large.push(...(await Promise.all(Array.from({ length: 50 }, () => queue(huge)))));
	const smalls = await Promise.all(Array.from({ length: 5 }, () => queue(small)));
	for (const id of smalls)
		await until(
			`small job ${id} COMPLETED`,
			async () => (await e2e.ok("GET", `/jobs/${id}/`)).status,
			s => s === "COMPLETED"
		);
	expect((await e2e.ok("GET", `/jobs/${large[0]}/`)).priority).toBe(1);
	expect((await e2e.ok("GET", `/jobs/${smalls[0]}/`)).priority).toBe(500);
	const why = await waitsFor(large[499], "RESOURCES");
	expect(why.reason).toMatch(/more than any online node offers/);
	expect(why.reason).toMatch(/offers 2 cpus/);
	const status = await e2e.ok("GET", "/queue/status/");
	const entry = status.queue_status.find((q: any) => q.job_type_name === "huge");
	expect(entry.count).toBe(500);
	expect(entry.why_waiting.code).toBe("RESOURCES");
	await e2e.ok("PATCH", `/job-types/${huge}/`, { is_paused: true });
}, 120000);

it("says a job type is paused", async () => {
	const t = await jobType("held", "/bin/true", "");
	await e2e.ok("PATCH", `/job-types/${t}/`, { is_paused: true });
	const id = await queue(t);
	expect((await waitsFor(id, "JOB_TYPE_PAUSED")).reason).toMatch(/job type held:1 is paused/);
});

it("says its job type has max_scheduled jobs running", async () => {
	const t = await jobType("one-at-a-time", "/bin/sleep", "30", { max_scheduled: 1 });
	const first = await queue(t);
	await until(
		"the first RUNNING",
		async () => (await e2e.ok("GET", `/jobs/${first}/`)).status,
		s => s === "RUNNING"
	);
	const second = await queue(t);
	expect((await waitsFor(second, "MAX_SCHEDULED")).reason).toMatch(/max_scheduled 1/);
	await e2e.ok("PATCH", `/jobs/${second}/`, { status: "CANCELED" });
	await e2e.ok("PATCH", `/jobs/${first}/`, { status: "CANCELED" });
});

it("says every node is paused, with the whole reason", async () => {
	const t = await jobType("while-paused", "/bin/true", "");
	await e2e.ok("PATCH", `/nodes/${nodeId}/`, { is_paused: true, pause_reason: "disk full" }, 201);
	const id = await queue(t);
	const why = await waitsFor(id, "ALL_NODES_PAUSED");
	expect(why.reason).toMatch(/paused: disk full/);
	await e2e.ok("PATCH", `/nodes/${nodeId}/`, { is_paused: false }, 201);
	await until(
		`job ${id} COMPLETED once the node is back`,
		async () => (await e2e.ok("GET", `/jobs/${id}/`)).status,
		s => s === "COMPLETED"
	);
});

it("says the scheduler is paused", async () => {
	const t = await jobType("while-scheduler-paused", "/bin/true", "");
	await e2e.ok("PATCH", "/scheduler/", { is_paused: true });
	const id = await queue(t);
	expect((await waitsFor(id, "SCHEDULER_PAUSED")).reason).toBe("the scheduler is paused");
	await e2e.ok("PATCH", "/scheduler/", { is_paused: false });
	const done = await until(
		`job ${id} COMPLETED`,
		async () => await e2e.ok("GET", `/jobs/${id}/`),
		j => j.status === "COMPLETED"
	);
	expect(done.why_waiting).toBeUndefined();
});
