import fs from "fs";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { loadServiceSchemas } from "../../lib/launch/services";
import { request, type Reply } from "../helpers/broker";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { JOB_SERVICES } from "../helpers/e2e";
import { job as script, makeJobsExecutable, processesIn } from "../fixtures/agent";

/**
 * Running jobs end to end, as a user would with curl: the real scheduler and a real node agent
 * (which spawns real processes) in one in-process broker with the whole control plane, against
 * real PostgreSQL, driven only through the REST API. Products are checked in the workspace
 * directory on disk, processes in /proc.
 */

const SERVICES = JOB_SERVICES;

/** Fast settings, so that the suite runs in seconds (the defaults are made for production). */
const SETTINGS: Record<string, Record<string, unknown>> = {
	scheduler: { tickMs: 100, leaderRetryMs: 200, leadGraceMs: 0, flushMs: 1 },
	"node-agent": { heartbeatMs: 250, registerRetryMs: 200, finishRetryMs: 200, killGraceMs: 500 }
};

const ENDED = ["COMPLETED", "FAILED", "CANCELED"];

let tdb: TestDatabase;
let broker: ServiceBroker;
let api: string;
/** everything on disk this file makes: the workspace, the agent's work directory, flag files */
let root: string;
let wsDir: string;
let workspaceId: number;
let nodeId: number;

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

function call(method: string, url: string, body?: unknown): Promise<Reply> {
	return request(method, `${api}${url}`, body);
}

/** A request that must answer `status`: its body, or an error naming what it got. */
async function ok(method: string, url: string, body?: unknown, status = 200): Promise<any> {
	const res = await call(method, url, body);
	if (res.status !== status)
		throw new Error(`${method} ${url}: expected ${status}, got ${res.status}: ${res.text}`);
	return res.body;
}

/** Polls `probe` until `done` accepts its value; fails with the last value after the deadline. */
async function until<T>(
	what: string,
	probe: () => Promise<T>,
	done: (value: T) => boolean,
	timeoutMs = 15000
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await probe();
		if (done(value)) return value;
		if (Date.now() > deadline)
			throw new Error(
				`timed out waiting for ${what}; last value: ${JSON.stringify(value)?.slice(0, 3000)}`
			);
		await sleep(50);
	}
}

/** Polls `probe` for `ms` and fails as soon as `check` refuses a value. */
async function holds<T>(
	what: string,
	probe: () => Promise<T>,
	check: (value: T) => boolean,
	ms: number
): Promise<void> {
	const deadline = Date.now() + ms;
	while (Date.now() < deadline) {
		const value = await probe();
		if (!check(value))
			throw new Error(`expected ${what}, got: ${JSON.stringify(value)?.slice(0, 3000)}`);
		await sleep(50);
	}
}

interface TypeOptions {
	name: string;
	command: string;
	args: string;
	inputs?: Record<string, unknown>[];
	outputs?: Record<string, unknown>[];
	timeout?: number;
	maxTries?: number;
	maxScheduled?: number;
	longRunning?: boolean;
	errorMapping?: Record<string, string>;
}

async function createJobType(o: TypeOptions): Promise<any> {
	const body: Record<string, unknown> = {
		name: o.name,
		version: "1.0",
		title: o.name,
		cpus_required: 0.25,
		mem_required: 16,
		disk_out_const_required: 0,
		timeout: o.timeout ?? 60,
		max_tries: o.maxTries ?? 3,
		is_long_running: o.longRunning ?? false,
		interface: {
			version: "1.0",
			command: o.command,
			command_arguments: o.args,
			input_data: o.inputs ?? [],
			output_data: o.outputs ?? []
		}
	};
	if (o.maxScheduled !== undefined) body.max_scheduled = o.maxScheduled;
	if (o.errorMapping) body.error_mapping = { version: "1.0", exit_codes: o.errorMapping };
	return ok("POST", "/job-types/", body, 201);
}

/** POST /queue/new-job/ with property values and outputs stored in the test's workspace. */
async function newJob(
	typeId: number,
	values: Record<string, string> = {},
	outputs: string[] = []
): Promise<any> {
	const job = await ok(
		"POST",
		"/queue/new-job/",
		{
			job_type_id: typeId,
			job_data: {
				version: "1.0",
				input_data: Object.entries(values).map(([name, value]) => ({ name, value })),
				output_data: outputs.map(name => ({ name, workspace_id: workspaceId }))
			}
		},
		201
	);
	expect(job.status).toBe("QUEUED");
	return job;
}

const getJob = (id: number) => ok("GET", `/jobs/${id}/`);

function waitForStatus(id: number, statuses: string[], timeoutMs = 15000): Promise<any> {
	return until(
		`job ${id} to be ${statuses.join(" or ")}`,
		() => getJob(id),
		job => statuses.includes(job.status),
		timeoutMs
	);
}

const waitEnded = (id: number, timeoutMs?: number) => waitForStatus(id, ENDED, timeoutMs);

/** The job's executions, oldest first, as the executions list shows them. */
async function exesOf(jobId: number): Promise<any[]> {
	return (await ok("GET", `/job-executions/?job_id=${jobId}&order=id`)).results;
}

/** Where the products of a job are: `<workspace>/<job type>/<version>/<job id>/`. */
function productDir(typeName: string, jobId: number): string {
	return path.join(wsDir, typeName, "1.0", String(jobId));
}

function readProduct(typeName: string, jobId: number, fileName: string): string {
	return fs.readFileSync(path.join(productDir(typeName, jobId), fileName), "utf8");
}

/**
 * The task directory of a running execution, once sleep.sh has printed its pid (read from the
 * live logs): its processes are found by their working directory (processesIn).
 */
async function taskDirOnceStarted(exeId: number): Promise<string> {
	const logs = await until(
		`execution ${exeId} to print its pid`,
		() => ok("GET", `/job-executions/${exeId}/logs/`),
		l => /^pid \d+$/m.test(l.stdout ?? "")
	);
	expect(logs.is_finished).toBe(false);
	return path.join(root, "agent", "tasks", String(exeId));
}

/** Waits for the job's only execution to run and answers it. */
async function runningExe(jobId: number): Promise<any> {
	await waitForStatus(jobId, ["RUNNING"]);
	const exes = await until(
		`job ${jobId}'s execution to run`,
		() => exesOf(jobId),
		list => list.length > 0 && list.at(-1).status === "RUNNING"
	);
	return exes.at(-1);
}

beforeAll(async () => {
	makeJobsExecutable();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-e2e-"));
	fs.chmodSync(root, 0o755);
	wsDir = path.join(root, "workspace");
	fs.mkdirSync(wsDir);
	tdb = await createTestDatabase();
	const config = loadConfig({
		LOG_LEVEL: "error",
		SERVICES: SERVICES.join(","),
		AGENT_WORK_DIR: path.join(root, "agent"),
		AGENT_CPUS: "2",
		AGENT_MEM_MIB: "2048",
		AGENT_DISK_MIB: "1024"
	});
	broker = new ServiceBroker({
		...brokerOptions(config, tdb.url),
		nodeID: `e2e-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
	});
	for (const schema of loadServiceSchemas({ ...config, port: 0 }))
		broker.createService({
			...schema,
			settings: { ...schema.settings, ...(SETTINGS[schema.name as string] ?? {}) }
		});
	await broker.start();
	const gateway = broker.getLocalService("api") as any;
	api = `http://127.0.0.1:${gateway.server.address().port}/api`;

	const nodes = await until(
		"the agent's node to register",
		() => ok("GET", "/nodes/"),
		list => list.count === 1 && list.results[0].is_active && !list.results[0].is_paused
	);
	nodeId = nodes.results[0].id;
	const workspace = await ok(
		"POST",
		"/workspaces/",
		{
			name: "e2e-products",
			title: "E2E Products",
			json_config: { version: "1.0", broker: { type: "host", host_path: wsDir } }
		},
		201
	);
	workspaceId = workspace.id;
}, 60000);

afterAll(async () => {
	await broker?.stop().catch(() => undefined);
	await tdb?.drop().catch(() => undefined);
	if (root) fs.rmSync(root, { recursive: true, force: true });
}, 30000);

test("a job with a property input and a file output completes with its product", async () => {
	const type = await createJobType({
		name: "e2e-greet",
		command: script("greet.sh"),
		args: '"${name}" ${job_output_dir}',
		inputs: [{ name: "name", type: "property" }],
		outputs: [{ name: "greeting", type: "file", media_type: "text/plain" }]
	});
	const queued = await newJob(type.id, { name: "big world" }, ["greeting"]);

	const job = await waitEnded(queued.id);
	expect(job).toMatchObject({ status: "COMPLETED", error: null, num_exes: 1 });
	expect(job.inputs).toEqual([{ name: "name", type: "property", value: "big world" }]);
	expect(job.outputs).toHaveLength(1);
	const product = job.outputs[0].value;
	expect(job.outputs[0]).toMatchObject({ name: "greeting", type: "file" });
	// the value is one argument, never split again: "big world", not "big"
	expect(product).toMatchObject({
		file_name: "greeting.txt",
		media_type: "text/plain",
		file_size: Buffer.byteLength("hello big world\n"),
		workspace: { id: workspaceId, name: "e2e-products" },
		job_type: { id: type.id },
		job: { id: job.id },
		is_deleted: false
	});
	expect(job.results.output_data).toEqual([{ name: "greeting", file_id: product.id }]);
	expect(readProduct("e2e-greet", job.id, "greeting.txt")).toBe("hello big world\n");

	const exes = await exesOf(job.id);
	expect(exes).toHaveLength(1);
	expect(exes[0]).toMatchObject({
		status: "COMPLETED",
		job_exit_code: 0,
		error: null,
		node: { id: nodeId }
	});
	expect(product.job_exe).toEqual({ id: exes[0].id });
	const details = await ok("GET", `/job-executions/${exes[0].id}/`);
	expect(details.command_arguments).toContain("big world ");
	expect(details.command_arguments).not.toContain("${");
	for (const step of ["pre", "job", "post"]) {
		expect(details[`${step}_started`]).toEqual(expect.any(String));
		expect(details[`${step}_completed`]).toEqual(expect.any(String));
	}

	const logs = await ok("GET", `/job-executions/${exes[0].id}/logs/`);
	expect(logs).toMatchObject({ id: exes[0].id, status: "COMPLETED", is_finished: true });
	expect(logs.stdout).toContain("greeted big world\n");
	expect(logs.stdout).toContain("ARTIFACT:greeting:");
	expect(logs.stderr).toBe("a note on stderr\n");
});

test("exit codes map through the error mapping; an unmapped one is algorithm-unknown", async () => {
	const algorithm = await ok(
		"POST",
		"/errors/",
		{
			name: "e2e-algorithm-broke",
			title: "Algorithm Broke",
			description: "The algorithm gave up",
			category: "ALGORITHM"
		},
		201
	);
	const data = await ok(
		"POST",
		"/errors/",
		{
			name: "e2e-bad-input",
			title: "Bad Input",
			description: "The input data is unusable",
			category: "DATA"
		},
		201
	);
	const type = await createJobType({
		name: "e2e-exit-codes",
		command: script("exit-code.sh"),
		args: "${code}",
		inputs: [{ name: "code", type: "property" }],
		errorMapping: { "3": algorithm.name, "4": data.name }
	});
	const expected: Record<string, { name: string; category: string }> = {
		"3": { name: "e2e-algorithm-broke", category: "ALGORITHM" },
		"4": { name: "e2e-bad-input", category: "DATA" },
		"5": { name: "algorithm-unknown", category: "ALGORITHM" }
	};
	const jobs: Record<string, number> = {};
	for (const code of Object.keys(expected)) jobs[code] = (await newJob(type.id, { code })).id;

	for (const [code, error] of Object.entries(expected)) {
		const job = await waitEnded(jobs[code]);
		// an ALGORITHM or DATA failure is final: no retry
		expect(job).toMatchObject({ status: "FAILED", num_exes: 1, error });
		const exes = await exesOf(job.id);
		expect(exes).toHaveLength(1);
		expect(exes[0]).toMatchObject({
			status: "FAILED",
			job_exit_code: Number(code),
			error: { name: error.name, category: error.category }
		});
	}
});

test("a job running past its timeout is killed and fails with `timeout`", async () => {
	const type = await createJobType({
		name: "e2e-timeout",
		command: script("sleep.sh"),
		args: "30",
		timeout: 2,
		maxTries: 1
	});
	const queued = await newJob(type.id);
	const exe = await runningExe(queued.id);
	const taskDir = await taskDirOnceStarted(exe.id);
	expect(processesIn(taskDir)).not.toEqual([]);

	const job = await waitEnded(queued.id);
	expect(job).toMatchObject({
		status: "FAILED",
		num_exes: 1,
		error: { name: "timeout", category: "SYSTEM" }
	});
	const [ended] = await exesOf(job.id);
	expect(ended).toMatchObject({ id: exe.id, status: "FAILED", error: { name: "timeout" } });
	// the script and its `sleep` are gone
	await until(
		`the processes in ${taskDir} to be gone`,
		async () => processesIn(taskDir).length > 0,
		alive => !alive,
		3000
	);
	const logs = await ok("GET", `/job-executions/${exe.id}/logs/`);
	expect(logs.is_finished).toBe(true);
	expect(logs.stdout).toMatch(/^pid \d+$/m);
	expect(logs.stdout).not.toContain("woke up");
});

test("canceling a running job kills its process", async () => {
	const type = await createJobType({
		name: "e2e-cancel",
		command: script("sleep.sh"),
		args: "30",
		timeout: 60
	});
	const queued = await newJob(type.id);
	const exe = await runningExe(queued.id);
	const taskDir = await taskDirOnceStarted(exe.id);
	expect(processesIn(taskDir)).not.toEqual([]);

	const res = await call("PATCH", `/jobs/${queued.id}/`, { status: "CANCELED" });
	expect(res.status).toBe(200);
	expect(res.body).toMatchObject({ id: queued.id, status: "CANCELED" });
	const details = await ok("GET", `/job-executions/${exe.id}/`);
	expect(details.status).toBe("CANCELED");
	expect(details.ended).toEqual(expect.any(String));

	await until(
		`the processes in ${taskDir} to be gone`,
		async () => processesIn(taskDir).length > 0,
		alive => !alive,
		5000
	);
	// the agent's report of the kill changes nothing: the job stays CANCELED, with no new run
	await holds(
		"the job to stay CANCELED with its one execution",
		async () => ({ job: await getJob(queued.id), exes: await exesOf(queued.id) }),
		v =>
			v.job.status === "CANCELED" &&
			v.job.num_exes === 1 &&
			v.exes.length === 1 &&
			v.exes[0].status === "CANCELED",
		800
	);
	// the logs and step times come with that report: kept, though the execution had ended
	const logs = await until(
		`the logs of canceled execution ${exe.id} to be kept`,
		() => ok("GET", `/job-executions/${exe.id}/logs/`),
		l => l.stdout !== ""
	);
	expect(logs).toMatchObject({ id: exe.id, status: "CANCELED", is_finished: true, stderr: "" });
	expect(logs.stdout).toMatch(/^pid \d+\nsleeping 30\n$/);
	const kept = await ok("GET", `/job-executions/${exe.id}/`);
	expect(kept).toMatchObject({ status: "CANCELED", ended: details.ended, pre_exit_code: 0 });
	expect(kept.command_arguments).toBe("30");
	for (const column of ["pre_started", "pre_completed", "job_started", "job_completed"])
		expect(kept[column]).toEqual(expect.any(String));
	expect((await getJob(queued.id)).status).toBe("CANCELED");
});

test("a SYSTEM failure is retried with new executions up to max_tries", async () => {
	const type = await createJobType({
		name: "e2e-no-command",
		command: path.join(root, "no-such-command"),
		args: "",
		maxTries: 3
	});
	const queued = await newJob(type.id);
	const job = await waitEnded(queued.id);
	expect(job).toMatchObject({
		status: "FAILED",
		num_exes: 3,
		max_tries: 3,
		error: { name: "task-launch", category: "SYSTEM" }
	});
	const exes = await exesOf(job.id);
	expect(exes).toHaveLength(3);
	for (const exe of exes)
		expect(exe).toMatchObject({
			status: "FAILED",
			node: { id: nodeId },
			error: { name: "task-launch", category: "SYSTEM" }
		});
	expect(new Set(exes.map(e => e.id)).size).toBe(3);
});

test("max_scheduled 1 runs the jobs of a type one at a time", async () => {
	const type = await createJobType({
		name: "e2e-one-at-a-time",
		command: script("exit-code.sh"),
		args: "0 0.6",
		maxScheduled: 1
	});
	const ids: number[] = [];
	for (let i = 0; i < 3; i++) ids.push((await newJob(type.id)).id);

	let maxRunning = 0;
	let heldBack = false;
	await until(
		"the three jobs to end",
		async () => {
			const list = await ok("GET", `/jobs/?job_type_id=${type.id}&page_size=10`);
			const statuses: string[] = list.results.map((j: any) => j.status);
			const running = statuses.filter(s => s === "RUNNING").length;
			maxRunning = Math.max(maxRunning, running);
			if (running === 1 && statuses.includes("QUEUED")) heldBack = true;
			return statuses;
		},
		statuses => statuses.length === 3 && statuses.every(s => ENDED.includes(s))
	);
	expect(maxRunning).toBe(1);
	expect(heldBack).toBe(true);
	for (const id of ids) expect((await getJob(id)).status).toBe("COMPLETED");

	// and the executions' times do not overlap
	const exes = (await ok("GET", `/job-executions/?job_type_id=${type.id}&order=started`)).results;
	expect(exes).toHaveLength(3);
	for (let i = 1; i < exes.length; i++)
		expect(Date.parse(exes[i].started)).toBeGreaterThanOrEqual(Date.parse(exes[i - 1].ended));
});

describe("pauses", () => {
	test("the jobs of a paused job type stay QUEUED until it is un-paused", async () => {
		const paused = await createJobType({
			name: "e2e-paused-type",
			command: script("exit-code.sh"),
			args: "0"
		});
		const other = await createJobType({
			name: "e2e-unpaused-type",
			command: script("exit-code.sh"),
			args: "0"
		});
		const edit = await ok("PATCH", `/job-types/${paused.id}/`, { is_paused: true });
		expect(edit.is_paused).toBe(true);

		const held = await newJob(paused.id);
		const free = await newJob(other.id);
		// the scheduler runs meanwhile: the other type's job completes...
		expect((await waitEnded(free.id)).status).toBe("COMPLETED");
		// ...while the paused type's job stays on the queue
		await holds(
			"the paused type's job to stay QUEUED",
			() => getJob(held.id),
			job => job.status === "QUEUED",
			600
		);
		const queue = await ok("GET", "/queue/status/");
		expect(
			queue.queue_status.find((s: any) => s.job_type_name === "e2e-paused-type")
		).toMatchObject({ count: 1, is_job_type_paused: true });

		await ok("PATCH", `/job-types/${paused.id}/`, { is_paused: false });
		const job = await waitEnded(held.id);
		expect(job).toMatchObject({ status: "COMPLETED", num_exes: 1 });
	});

	test("nothing is scheduled while the scheduler is paused", async () => {
		const type = await createJobType({
			name: "e2e-scheduler-pause",
			command: script("exit-code.sh"),
			args: "0"
		});
		const settings = await ok("PATCH", "/scheduler/", { is_paused: true });
		expect(settings.is_paused).toBe(true);
		let queued: any;
		try {
			queued = await newJob(type.id);
			await holds(
				"the job to stay QUEUED while the scheduler is paused",
				() => getJob(queued.id),
				job => job.status === "QUEUED",
				1200
			);
			expect((await ok("GET", "/scheduler/")).is_paused).toBe(true);
		} finally {
			await ok("PATCH", "/scheduler/", { is_paused: false });
		}
		const job = await waitEnded(queued.id);
		expect(job).toMatchObject({ status: "COMPLETED", num_exes: 1 });
	});

	test("nothing is scheduled on a paused node", async () => {
		const type = await createJobType({
			name: "e2e-node-pause",
			command: script("exit-code.sh"),
			args: "0"
		});
		const pausedNode = await ok(
			"PATCH",
			`/nodes/${nodeId}/`,
			{ is_paused: true, pause_reason: "e2e maintenance" },
			201
		);
		expect(pausedNode).toMatchObject({ is_paused: true, pause_reason: "e2e maintenance" });
		let queued: any;
		try {
			queued = await newJob(type.id);
			await holds(
				"the job to stay QUEUED while the only node is paused",
				() => getJob(queued.id),
				job => job.status === "QUEUED",
				1200
			);
		} finally {
			const resumed = await ok("PATCH", `/nodes/${nodeId}/`, { is_paused: false }, 201);
			expect(resumed).toMatchObject({ is_paused: false, pause_reason: null });
		}
		const job = await waitEnded(queued.id);
		expect(job).toMatchObject({ status: "COMPLETED", num_exes: 1 });
		expect((await exesOf(job.id))[0].node).toMatchObject({ id: nodeId });
	});
});

test("a long-running job whose process exits is requeued, past max_tries and its timeout", async () => {
	// exits 3 after 1.2 s: a timeout of 1 s would kill it first, but long-running types have none
	const type = await createJobType({
		name: "e2e-long-running",
		command: script("exit-code.sh"),
		args: "3 1.2",
		longRunning: true,
		timeout: 1,
		maxTries: 1
	});
	const queued = await newJob(type.id);
	const exes = await until(
		"a third execution of the long-running job to run",
		async () => {
			const job = await getJob(queued.id);
			if (ENDED.includes(job.status))
				throw new Error(`the long-running job ended: ${JSON.stringify(job)}`);
			return exesOf(queued.id);
		},
		list => list.length >= 3 && list[2].status === "RUNNING",
		20000
	);
	for (const exe of exes.slice(0, 2))
		expect(exe).toMatchObject({
			status: "FAILED",
			job_exit_code: 3,
			error: { name: "algorithm-unknown" }
		});
	const job = await getJob(queued.id);
	expect(job.status).toBe("RUNNING");
	expect(job.num_exes).toBe(3);
	expect(job.max_tries).toBe(1);

	// canceling ends the loop
	const res = await call("PATCH", `/jobs/${queued.id}/`, { status: "CANCELED" });
	expect(res.status).toBe(200);
	await holds(
		"the canceled long-running job to stay CANCELED without new executions",
		async () => ({ job: await getJob(queued.id), exes: await exesOf(queued.id) }),
		v =>
			v.job.status === "CANCELED" &&
			v.exes.length === 3 &&
			v.exes.every((e: any) => ENDED.includes(e.status)),
		1500
	);
});

describe("results manifests and ARTIFACT lines", () => {
	test("a 1.0 results manifest registers a files output", async () => {
		const type = await createJobType({
			name: "e2e-manifest-1-0",
			command: script("manifest-1-0.sh"),
			args: "${job_output_dir}",
			outputs: [{ name: "tables", type: "files" }]
		});
		const queued = await newJob(type.id, {}, ["tables"]);
		const job = await waitEnded(queued.id);
		expect(job).toMatchObject({ status: "COMPLETED", error: null });
		const [output] = job.outputs;
		expect(output).toMatchObject({ name: "tables", type: "files" });
		const products = [...output.value].sort((a: any, b: any) =>
			a.file_name.localeCompare(b.file_name)
		);
		expect(products).toMatchObject([
			{ file_name: "doc.xml", media_type: "application/xml", file_size: 4 },
			{ file_name: "table.csv", media_type: "text/csv", file_size: 8 }
		]);
		expect(job.results.output_data).toEqual([
			{ name: "tables", file_ids: expect.arrayContaining(products.map((p: any) => p.id)) }
		]);
		expect(readProduct("e2e-manifest-1-0", job.id, "table.csv")).toBe("a,b\n1,2\n");
		expect(readProduct("e2e-manifest-1-0", job.id, "doc.xml")).toBe("<x/>");
	});

	test("a 1.1 results manifest registers file and files outputs with data times", async () => {
		const type = await createJobType({
			name: "e2e-manifest-1-1",
			command: script("manifest-1-1.sh"),
			args: "${job_output_dir}",
			outputs: [
				{ name: "report", type: "file" },
				{ name: "parts", type: "files" }
			]
		});
		const queued = await newJob(type.id, {}, ["report", "parts"]);
		const job = await waitEnded(queued.id);
		expect(job).toMatchObject({ status: "COMPLETED", error: null });
		const byName = Object.fromEntries(job.outputs.map((o: any) => [o.name, o.value]));
		expect(byName.report).toMatchObject({ file_name: "report.txt", media_type: "text/plain" });
		expect(byName.report.data_started).toMatch(/^2024-05-06T07:08:09/);
		expect(byName.report.data_ended).toMatch(/^2024-05-06T08:08:09/);
		expect(byName.parts.map((p: any) => p.file_name).sort()).toEqual([
			"part-1.dat",
			"part-2.dat"
		]);
		expect(readProduct("e2e-manifest-1-1", job.id, "report.txt")).toBe("report\n");
		expect(readProduct("e2e-manifest-1-1", job.id, "part-1.dat")).toBe("part one\n");
		expect(readProduct("e2e-manifest-1-1", job.id, "part-2.dat")).toBe("part two\n");
		const [exe] = await exesOf(job.id);
		const details = await ok("GET", `/job-executions/${exe.id}/`);
		expect(details.results_manifest.output_data.map((o: any) => o.name).sort()).toEqual([
			"parts",
			"report"
		]);
	});

	test("ARTIFACT lines register outputs, and the manifest wins on a conflict", async () => {
		const type = await createJobType({
			name: "e2e-artifacts",
			command: script("artifacts.sh"),
			args: "${job_output_dir} ${mode}",
			inputs: [{ name: "mode", type: "property" }],
			outputs: [
				{ name: "result", type: "file" },
				{ name: "many", type: "files" }
			]
		});
		const plain = await newJob(type.id, { mode: "plain" }, ["result", "many"]);
		const conflict = await newJob(type.id, { mode: "conflict" }, ["result", "many"]);
		for (const [queued, result, content] of [
			[plain, "a.json", '{"a": 1}\n'],
			[conflict, "b.json", '{"b": 2}\n']
		] as const) {
			const job = await waitEnded(queued.id);
			expect(job).toMatchObject({ status: "COMPLETED", error: null });
			const byName = Object.fromEntries(job.outputs.map((o: any) => [o.name, o.value]));
			expect(byName.result).toMatchObject({
				file_name: result,
				media_type: "application/json"
			});
			expect(byName.many.map((p: any) => p.file_name).sort()).toEqual(["m1.txt", "m2.txt"]);
			expect(fs.readdirSync(productDir("e2e-artifacts", job.id)).sort()).toEqual(
				[result, "m1.txt", "m2.txt"].sort()
			);
			expect(readProduct("e2e-artifacts", job.id, result)).toBe(content);
			expect(readProduct("e2e-artifacts", job.id, "m1.txt")).toBe("one\n");
			expect(readProduct("e2e-artifacts", job.id, "m2.txt")).toBe("two\n");
		}
	});
});

test("a missing required output fails the job as algorithm-unknown, not retried", async () => {
	const type = await createJobType({
		name: "e2e-no-output",
		command: script("no-output.sh"),
		args: "",
		outputs: [{ name: "result", type: "file" }],
		maxTries: 3
	});
	const queued = await newJob(type.id, {}, ["result"]);
	const job = await waitEnded(queued.id);
	expect(job).toMatchObject({
		status: "FAILED",
		num_exes: 1,
		error: { name: "algorithm-unknown", category: "ALGORITHM" }
	});
	const exes = await exesOf(job.id);
	expect(exes).toHaveLength(1);
	expect(exes[0]).toMatchObject({
		status: "FAILED",
		job_exit_code: 0,
		error: { name: "algorithm-unknown" }
	});
	// the execution's logs say why
	const logs = await ok("GET", `/job-executions/${exes[0].id}/logs/`);
	expect(logs.stderr).toMatch(/^scale: the required output "result" was not produced/m);
	expect(fs.existsSync(productDir("e2e-no-output", job.id))).toBe(false);
});

test("a requeued FAILED job goes back on the queue and runs", async () => {
	const flag = path.join(root, "requeue-flag");
	const type = await createJobType({
		name: "e2e-requeue",
		command: script("fail-unless.sh"),
		args: `${flag} \${job_output_dir}`,
		outputs: [{ name: "found", type: "file" }],
		maxTries: 2
	});
	const queued = await newJob(type.id, {}, ["found"]);
	const failed = await waitEnded(queued.id);
	expect(failed).toMatchObject({
		status: "FAILED",
		num_exes: 1,
		max_tries: 2,
		error: { name: "algorithm-unknown" }
	});
	expect((await exesOf(queued.id))[0]).toMatchObject({ status: "FAILED", job_exit_code: 7 });

	fs.writeFileSync(flag, "");
	// the type is paused while the job is requeued, so its QUEUED state can be seen
	await ok("PATCH", `/job-types/${type.id}/`, { is_paused: true });
	const requeued = await ok("POST", "/queue/requeue-jobs/", { job_ids: [queued.id] });
	expect(requeued.count).toBe(1);
	expect(requeued.results).toHaveLength(1);
	expect(requeued.results[0]).toMatchObject({ id: queued.id, status: "QUEUED", error: null });
	const waiting = await getJob(queued.id);
	// the failure allowance is raised: num_exes before the requeue + the type's max_tries
	expect(waiting).toMatchObject({ status: "QUEUED", num_exes: 2, max_tries: 3, error: null });
	const exes = await exesOf(queued.id);
	expect(exes.map(e => e.status)).toEqual(["FAILED", "QUEUED"]);

	await ok("PATCH", `/job-types/${type.id}/`, { is_paused: false });
	const job = await waitEnded(queued.id);
	expect(job).toMatchObject({ status: "COMPLETED", num_exes: 2, error: null });
	expect(job.outputs[0].value).toMatchObject({ file_name: "found.txt" });
	expect(readProduct("e2e-requeue", job.id, "found.txt")).toBe("flag found\n");
	expect((await exesOf(queued.id)).map(e => e.status)).toEqual(["FAILED", "COMPLETED"]);
});
