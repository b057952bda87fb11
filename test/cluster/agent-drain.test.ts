import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import {
	JOBS_CONTROL_PLANE,
	startProcess,
	waitUntil,
	type ServiceProcess
} from "../helpers/process";

const JOB = path.resolve(__dirname, "..", "fixtures", "jobs", "sleep-then-output.sh");
/** the agents' AGENT_DRAIN_S here (60 by default) */
const DRAIN_S = 3;

interface ExeRow {
	id: number;
	status: string;
	agent_id: string | null;
	error_name: string | null;
	stderr: string | null;
}

/**
 * SIGTERM drains an agent. A control plane and agents, each its own OS process, over a real
 * nats-server. Agent A runs a short job (it ends within the drain time) and a long one of one
 * try; it gets SIGTERM: the short job completes there, the long one is stopped at the drain
 * time as `node-shutdown` (the `scale:` line last in its stderr) and runs again, to completion,
 * on agent B without counting the try; nothing is placed on A once it drains; A exits 0. An
 * agent given SIGTERM twice stops at once.
 */
describe("draining an agent on SIGTERM", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let control: ServiceProcess;
	const agents: Record<string, ServiceProcess> = {};
	let api: string;
	let root: string;
	let wsDir: string;
	let typeId: number;
	let workspaceId: number;

	function outputs(): string {
		const parts = [`control plane:\n${control?.output() ?? ""}`];
		for (const [id, p] of Object.entries(agents)) parts.push(`${id}:\n${p.output()}`);
		return parts.join("\n");
	}

	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			const error = err as Error;
			error.message = `${error.message}\n${outputs()}`;
			throw error;
		}
	}

	async function q<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await db.db.query(sql, { bind });
		return rows as T[];
	}

	const exes = (jobId: number) =>
		q<ExeRow>(
			`SELECT e.id, e.status, e.agent_id, er.name AS error_name, l.stderr
			 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
				LEFT JOIN job_exe_log l ON l.job_exe_id = e.id
			 WHERE e.job_id = $1 ORDER BY e.id`,
			[jobId]
		);

	function startAgent(id: string): ServiceProcess {
		const workDir = path.join(root, id);
		fs.mkdirSync(workDir, { mode: 0o755 });
		agents[id] = startProcess({
			SERVICES: "node-agent",
			TRANSPORTER: nats.url,
			NODE_ID: id,
			AGENT_WORK_DIR: workDir,
			AGENT_DRAIN_S: String(DRAIN_S),
			LOG_LEVEL: "info"
		});
		return agents[id];
	}

	async function nodeOf(agentId: string): Promise<number> {
		let id = 0;
		await withOutput(() =>
			waitUntil(
				async () => {
					const rows = await q<{ id: number }>(
						"SELECT id FROM node WHERE agent_id = $1 AND is_active",
						[agentId]
					);
					id = rows[0]?.id ?? 0;
					return id > 0;
				},
				60000,
				`${agentId}'s node`
			)
		);
		return id;
	}

	async function pause(nodeId: number, paused: boolean) {
		const reply = await request("PATCH", `${api}/nodes/${nodeId}/`, { is_paused: paused });
		expect(reply.status).toBe(201);
	}

	async function newJob(seconds: number, maxTries?: number): Promise<number> {
		const queued = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: typeId,
			job_data: {
				version: "1.0",
				input_data: [{ name: "seconds", value: String(seconds) }],
				output_data: [{ name: "out", workspace_id: workspaceId }]
			}
		});
		if (queued.status !== 201) throw new Error(`new job: ${queued.status} ${queued.text}`);
		if (maxTries !== undefined)
			await q("UPDATE job SET max_tries = $2 WHERE id = $1", [queued.body.id, maxTries]);
		return queued.body.id;
	}

	/** waits until the job's process runs on the agent (its main step reported started) */
	async function running(jobId: number, agentId: string) {
		await withOutput(() =>
			waitUntil(
				async () => {
					const rows = await q<{ id: number }>(
						`SELECT id FROM job_exe WHERE job_id = $1 AND status = 'RUNNING'
							AND agent_id = $2 AND job_started IS NOT NULL`,
						[jobId, agentId]
					);
					return rows.length === 1;
				},
				60000,
				`job ${jobId} to run on ${agentId}`
			)
		);
	}

	async function ended(jobId: number) {
		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/jobs/${jobId}/`);
					return ["COMPLETED", "FAILED", "CANCELED"].includes(res.body?.status);
				},
				60000,
				`job ${jobId} to end`
			)
		);
		return (await request("GET", `${api}/jobs/${jobId}/`)).body;
	}

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-drain-"));
		fs.chmodSync(root, 0o755);
		wsDir = path.join(root, "workspace");
		fs.mkdirSync(wsDir, { mode: 0o755 });
		nats = await startNats();
		db = await createTestDatabase();
		const port = await freePort();
		api = `http://127.0.0.1:${port}/api`;
		control = startProcess({
			SERVICES: JOBS_CONTROL_PLANE.join(","),
			TRANSPORTER: nats.url,
			NODE_ID: "drain-control",
			DATABASE_URL: db.url,
			PORT: String(port)
		});
		startAgent("agent-a");
		startAgent("agent-b");
		await withOutput(() =>
			waitUntil(
				async () => (await request("GET", `${api}/workspaces/`)).status === 200,
				60000,
				"the control plane"
			)
		);
		const workspace = await request("POST", `${api}/workspaces/`, {
			name: "products",
			title: "Products",
			is_active: true,
			json_config: { broker: { type: "host", host_path: wsDir } }
		});
		expect(workspace.status).toBe(201);
		workspaceId = workspace.body.id;
		const type = await request("POST", `${api}/job-types/`, {
			name: "sleep-then-output",
			version: "1.0",
			title: "Sleep Then Output",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: JOB,
				command_arguments: "${seconds} ${job_output_dir}",
				input_data: [{ name: "seconds", type: "property" }],
				output_data: [{ name: "out", type: "file" }]
			}
		});
		if (type.status !== 201) throw new Error(`job type: ${type.status} ${type.text}`);
		typeId = type.body.id;
	}, 90000);

	afterAll(async () => {
		for (const p of Object.values(agents)) await p.stop("SIGKILL").catch(() => undefined);
		await control?.stop().catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("lets a job end within the drain time, stops the other and runs it elsewhere without counting the try", async () => {
		const a = await nodeOf("agent-a");
		const b = await nodeOf("agent-b");
		// both jobs go to A: B is paused until they run
		await pause(b, true);
		const long = await newJob(DRAIN_S + 5, 1);
		const short = await newJob(2);
		await running(long, "agent-a");
		await running(short, "agent-a");
		await pause(b, false);

		const exited = agents["agent-a"].stop("SIGTERM");
		const signaled = Date.now();
		// the control plane hears of the drain at once: the node shows it, and takes no work
		await withOutput(() =>
			waitUntil(
				async () => {
					const status = await request("GET", `${api}/nodes/status/`);
					const entry = status.body.results.find((r: any) => r.node.id === a);
					return entry?.node.is_draining === true && entry.node.drain_by === "agent";
				},
				DRAIN_S * 1000,
				"agent-a's node to show its drain"
			)
		);
		const [drain] = await q<{ since: Date }>(
			"SELECT draining_since AS since FROM node WHERE id = $1",
			[a]
		);
		const meanwhile = await newJob(1);
		const code = await exited;
		const took = Date.now() - signaled;
		await withOutput(async () => {
			expect(code).toBe(0);
			// the drain time, then the stop and the reports: within the kill grace and more
			expect(took).toBeGreaterThanOrEqual(DRAIN_S * 1000 - 200);
			expect(took).toBeLessThan(DRAIN_S * 1000 + 8000);
			expect(agents["agent-a"].output()).toMatch(/SIGTERM received: draining \(node-agent\)/);
		});

		// the short job, still running when the drain began, completed on A, once
		expect(await ended(short)).toMatchObject({ status: "COMPLETED", num_exes: 1 });
		expect((await exes(short)).map(e => [e.status, e.agent_id])).toEqual([
			["COMPLETED", "agent-a"]
		]);
		const [{ late }] = await q<{ late: boolean }>(
			"SELECT ended > $2 AS late FROM job_exe WHERE job_id = $1",
			[short, drain.since]
		);
		expect(late).toBe(true);
		// the long one was stopped on A as node-shutdown and completed on B, its one try intact
		expect(await ended(long)).toMatchObject({ status: "COMPLETED", num_exes: 2, max_tries: 2 });
		const [stopped, again] = await exes(long);
		await withOutput(async () => {
			expect(stopped).toMatchObject({
				status: "FAILED",
				agent_id: "agent-a",
				error_name: "node-shutdown"
			});
			expect(stopped.stderr).toMatch(
				new RegExp(
					`(^|\\n)scale: the node was shut down \\(the agent received SIGTERM\\) and the execution had not ended within the drain time of ${DRAIN_S} s: stopped while its process ran\\n$`
				)
			);
			expect(again).toMatchObject({ status: "COMPLETED", agent_id: "agent-b" });
		});
		const logs = await request("GET", `${api}/job-executions/${stopped.id}/logs/`);
		expect(logs.status).toBe(200);
		expect(JSON.stringify(logs.body)).toContain("scale: the node was shut down");
		// the job queued during the drain ran on B; nothing was placed on A after its drain began
		expect(await ended(meanwhile)).toMatchObject({ status: "COMPLETED" });
		expect((await exes(meanwhile)).map(e => e.agent_id)).toEqual(["agent-b"]);
		const placedOnA = await q<{ id: number }>(
			"SELECT id FROM job_exe WHERE agent_id = 'agent-a' AND started >= $1",
			[drain.since]
		);
		expect(placedOnA).toEqual([]);
		// one product each, from the executions that completed
		const products = await q<{ job_id: number }>(
			"SELECT job_id FROM scale_file WHERE file_type = 'PRODUCT' ORDER BY job_id"
		);
		expect(products.map(p => p.job_id)).toEqual([long, short, meanwhile].sort((x, y) => x - y));
	}, 120000);

	it("stops at once on a second SIGTERM", async () => {
		const b = await nodeOf("agent-b");
		startAgent("agent-c");
		await nodeOf("agent-c");
		await pause(b, true);
		const job = await newJob(10, 1);
		await running(job, "agent-c");
		await pause(b, false);
		const exited = agents["agent-c"].stop("SIGTERM");
		await withOutput(() =>
			waitUntil(
				async () => /SIGTERM received: draining/.test(agents["agent-c"].output()),
				5000,
				"agent-c to drain"
			)
		);
		await new Promise(r => setTimeout(r, 300));
		const again = Date.now();
		agents["agent-c"].proc.kill("SIGTERM");
		const code = await exited;
		await withOutput(async () => {
			expect(code).toBe(0);
			expect(Date.now() - again).toBeLessThan(5000);
			expect(agents["agent-c"].output()).toMatch(/SIGTERM received again: stopping at once/);
		});
		expect(await ended(job)).toMatchObject({ status: "COMPLETED", num_exes: 2, max_tries: 2 });
		const [stopped, rerun] = await exes(job);
		await withOutput(async () => {
			expect(stopped).toMatchObject({
				status: "FAILED",
				agent_id: "agent-c",
				error_name: "node-shutdown"
			});
			expect(stopped.stderr).toMatch(
				/(^|\n)scale: the node was shut down at once \(the agent received SIGTERM again\): stopped while its process ran\n$/
			);
			expect(rerun).toMatchObject({ status: "COMPLETED", agent_id: "agent-b" });
		});
	}, 120000);
});
