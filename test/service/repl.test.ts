import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { JOB_SERVICES, startE2e, sleep, type E2e } from "../helpers/e2e";
import { COMMANDS } from "../../lib/repl/commands";
import type { CommandArgs } from "../../lib/repl/command";

const SERVICES = [...JOB_SERVICES, "ingest", "metrics"];

let tdb: TestDatabase;
let e2e: E2e;
let root: string;

/** Runs a command as moleculer-repl would; answers what it printed. */
async function repl(name: string, args: CommandArgs = {}): Promise<string> {
	const command = COMMANDS.find(c => c.command.split(" ")[0] === name);
	if (!command) throw new Error(`no command ${name}`);
	const printed: string[] = [];
	await command.run(
		{
			broker: e2e.broker,
			print: text => printed.push(text),
			write: text => printed.push(text)
		},
		args
	);
	return printed.join("\n");
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20000) {
	const deadline = Date.now() + timeoutMs;
	while (!(await check())) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await sleep(50);
	}
}

async function count(sql: string): Promise<number> {
	const [[row]] = (await tdb.db.query(sql)) as any;
	return Number(row.n);
}

let echoType: number;

beforeAll(async () => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "repl-"));
	fs.chmodSync(root, 0o755);
	tdb = await createTestDatabase();
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "repl");
	await until(
		"the agent's node",
		async () => (await count("SELECT count(*) AS n FROM node WHERE is_active")) === 1
	);
	const type = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name: "echo",
			version: "1.0",
			title: "Echo",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: "/bin/echo",
				command_arguments: "hello from the job",
				input_data: [],
				output_data: []
			}
		},
		201
	);
	echoType = type.id;
}, 60000);

afterAll(async () => {
	await e2e?.stop();
	await tdb?.drop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

const newJob = async () =>
	(
		await e2e.ok(
			"POST",
			"/queue/new-job/",
			{
				job_type_id: echoType,
				job_data: { version: "1.0", input_data: [], output_data: [] }
			},
			201
		)
	).id as number;

describe("the operators' REPL commands", () => {
	it("lists every command once, each with a description", () => {
		const names = COMMANDS.map(c => c.command.split(" ")[0]);
		expect(new Set(names).size).toBe(names.length);
		expect(names).toEqual(
			expect.arrayContaining([
				"queue",
				"jobs",
				"job",
				"cancel",
				"requeue",
				"node-status",
				"node-pause",
				"node-resume",
				"node-drain",
				"node-undrain",
				"scheduler-pause",
				"scheduler-resume",
				"logs",
				"strikes",
				"metrics-day"
			])
		);
		for (const c of COMMANDS) expect(c.description.length).toBeGreaterThan(10);
	});

	it("pauses the scheduler, shows the queue, cancels and requeues a job, resumes", async () => {
		expect(await repl("scheduler-pause")).toBe("scheduler: paused");
		const a = await newJob();
		const b = await newJob();
		const queue = await repl("queue");
		expect(queue).toMatch(/^job type\s+queued\s+longest queued\s+priority\s+paused/);
		expect(queue).toMatch(/echo 1\.0\s+2\s/);

		expect(await repl("jobs", { options: { status: "queued" } })).toMatch(
			new RegExp(`^\\s*${b}\\s+echo 1\\.0\\s+QUEUED`, "m")
		);
		expect(await repl("cancel", { id: String(a) })).toBe(`job ${a}: CANCELED`);
		expect((await e2e.ok("GET", `/jobs/${a}/`)).status).toBe("CANCELED");
		const requeued = await repl("requeue", { ids: [String(a), "999999"] });
		expect(requeued).toMatch(new RegExp(`^\\s*${a}\\s+echo\\s+QUEUED`, "m"));
		expect(requeued).toContain("refused: no such job: 999999");
		expect((await e2e.ok("GET", `/jobs/${a}/`)).status).toBe("QUEUED");

		expect(await repl("scheduler-resume")).toBe("scheduler: running");
		await until("both jobs to complete", async () => {
			const jobs = await Promise.all([a, b].map(id => e2e.ok("GET", `/jobs/${id}/`)));
			return jobs.every(j => j.status === "COMPLETED");
		});
		const details = await repl("job", { id: String(b) });
		expect(details).toMatch(/status\s+COMPLETED/);
		expect(details).toMatch(/tries\s+1 of/);
		const [exe] = (await e2e.ok("GET", `/job-executions/?job_id=${b}`)).results;
		expect(details).toMatch(new RegExp(`^\\s*${exe.id}\\s+COMPLETED`, "m"));

		const logs = await repl("logs", { id: String(exe.id) });
		expect(logs).toContain(`--- stdout of execution ${exe.id} ---\nhello from the job`);
		expect(logs).toContain(`--- stderr of execution ${exe.id} ---\n(empty)`);
	});

	it("shows the nodes and pauses and resumes one", async () => {
		const [node] = (await e2e.ok("GET", "/nodes/")).results;
		const listed = await repl("node-status");
		// the agent's node id, online, heard from lately, resources free of offered
		expect(listed).toMatch(
			new RegExp(
				`^\\s*${node.id}\\s+\\S+\\s+${node.agent_id}\\s+online\\s+-\\s+\\d+ m?s ago\\s+2 / 2\\s+\\d+ / \\d+\\s+\\d+ / \\d+\\s+0$`,
				"m"
			)
		);
		expect(await repl("node-pause", { id: String(node.id), reason: ["disk", "swap"] })).toBe(
			`node ${node.id} (${node.hostname}): paused: disk swap`
		);
		expect((await e2e.ok("GET", `/nodes/${node.id}/`)).is_paused).toBe(true);
		expect(await repl("node-status")).toMatch(/\s+paused\s+disk swap\s+/);
		expect(await repl("node-resume", { id: String(node.id) })).toBe(
			`node ${node.id} (${node.hostname}): resumed`
		);
		expect((await e2e.ok("GET", `/nodes/${node.id}/`)).is_paused).toBe(false);
	});

	it("drains a node, shows it draining, and ends the drain", async () => {
		const [node] = (await e2e.ok("GET", "/nodes/")).results;
		expect(await repl("node-status")).toMatch(
			/^id\s+hostname\s+agent\s+state\s+reason\s+heartbeat\s+cpus free\s+mem MiB free\s+disk MiB free\s+running$/m
		);
		expect(await repl("node-drain", { id: String(node.id) })).toMatch(
			new RegExp(`^node ${node.id} \\(${node.hostname}\\): draining since \\d{4}-`)
		);
		expect(await e2e.ok("GET", `/nodes/${node.id}/`)).toMatchObject({
			is_draining: true,
			drain_by: "user"
		});
		expect(await repl("node-status")).toMatch(
			new RegExp(`^\\s*${node.id}\\s+\\S+\\s+\\S+\\s+draining\\s.*\\s+\\d+$`, "m")
		);
		expect(await repl("node-undrain", { id: String(node.id) })).toBe(
			`node ${node.id} (${node.hostname}): no longer draining`
		);
		expect((await e2e.ok("GET", `/nodes/${node.id}/`)).is_draining).toBe(false);
		expect(await repl("node-drain", { id: "x" })).toContain(
			'error: node id must be a positive integer, got "x"'
		);
	});

	it("shows strikes with their ingest counts", async () => {
		const ws = path.join(root, "ws");
		fs.mkdirSync(ws);
		fs.mkdirSync(path.join(root, "drop"));
		await e2e.ok(
			"POST",
			"/workspaces/",
			{ name: "raw", title: "raw", json_config: { broker: { type: "host", host_path: ws } } },
			201
		);
		await e2e.ok("POST", "/strike/create/", {
			name: "drop",
			title: "Drop",
			configuration: {
				version: "1.0",
				mount: path.join(root, "drop"),
				transfer_suffix: "_tmp",
				files_to_ingest: [
					{ filename_regex: ".*", workspace_path: "in", workspace_name: "raw" }
				]
			}
		});
		const out = await repl("strikes");
		expect(out).toMatch(/^id\s+name\s+job\s+transferring\s+ingesting\s+ingested/);
		expect(out).toMatch(/^\s*1\s+drop\s+\S+\s+0\s+0\s+0\s+0\s+0\s+0$/m);
		// its monitor job is let go, so nothing runs, fails or is requeued behind the next tests
		const strike = await e2e.ok("GET", "/strikes/1/");
		await e2e.ok("PATCH", `/jobs/${strike.job.id}/`, { status: "CANCELED" });
	});

	it("computes a day's metrics", async () => {
		const out = await repl("metrics-day", { day: "2026-01-02" });
		expect(out).toMatch(/^daily metrics of 2026-01-02:/);
		expect(out).toMatch(/jobTypes\s+\d+/);
	});

	it.each([
		["job", { id: "abc" }, 'error: job id must be a positive integer, got "abc"'],
		["cancel", { id: "-3" }, 'error: job id must be a positive integer, got "-3"'],
		["requeue", { ids: [] }, "error: give at least one job id"],
		["requeue", { ids: ["4", "x"] }, 'error: job id must be a positive integer, got "x"'],
		["jobs", { options: { status: "DONE" } }, "error: status must be one of PENDING"],
		["jobs", { options: { limit: "0" } }, 'error: limit must be a positive integer, got "0"'],
		["node-pause", { id: "1.5" }, 'error: node id must be a positive integer, got "1.5"'],
		["logs", { id: "7", options: { stream: "both" } }, "error: stream must be one of stdout"],
		[
			"metrics-day",
			{ day: "2026-02-30" },
			'error: day must be a day as YYYY-MM-DD, got "2026-02-30"'
		]
	])("%s refuses %j and changes nothing", async (name, args, message) => {
		const before = await count(
			"SELECT (SELECT count(*) FROM job) + (SELECT count(*) FROM queue) + (SELECT count(*) FROM node WHERE is_paused) AS n"
		);
		expect(await repl(name, args as CommandArgs)).toContain(message);
		expect(
			await count(
				"SELECT (SELECT count(*) FROM job) + (SELECT count(*) FROM queue) + (SELECT count(*) FROM node WHERE is_paused) AS n"
			)
		).toBe(before);
	});

	it("prints the control plane's refusal, not a stack trace", async () => {
		expect(await repl("job", { id: "424242" })).toMatch(/^failed: .*424242/);
		expect(await repl("cancel", { id: "424242" })).toMatch(/^failed: /);
	});
});
