import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import {
	startProcess,
	waitUntil,
	type ServiceProcess,
	JOBS_CONTROL_PLANE
} from "../helpers/process";

const JOB = path.resolve(__dirname, "..", "fixtures", "jobs", "sleep-then-output.sh");
interface ExeRow {
	id: number;
	status: string;
	agent_id: string | null;
	node_id: number | null;
	error_name: string | null;
}

/**
 * A control plane and two agents, each its own OS process, over a real nats-server. The agent
 * running a job is killed (SIGKILL): its execution must fail as `node-lost` and the job must be
 * run again, to completion, on the other agent, with one product.
 */
describe("losing the agent of a running job", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let control: ServiceProcess;
	const agents: Record<string, ServiceProcess> = {};
	let api: string;
	let root: string;
	let wsDir: string;

	function outputs(): string {
		const parts = [`control plane:\n${control?.output() ?? ""}`];
		for (const [id, p] of Object.entries(agents)) parts.push(`${id}:\n${p.output()}`);
		return parts.join("\n");
	}

	/** Runs `step`; on failure, adds the processes' output to the message. */
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
			`SELECT e.id, e.status, e.agent_id, e.node_id, er.name AS error_name
			 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
			 WHERE e.job_id = $1 ORDER BY e.id`,
			[jobId]
		);

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "agent-loss-"));
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
			NODE_ID: "cluster-control",
			DATABASE_URL: db.url,
			PORT: String(port)
		});
		for (const id of ["agent-1", "agent-2"]) {
			const workDir = path.join(root, id);
			fs.mkdirSync(workDir, { mode: 0o755 });
			agents[id] = startProcess({
				SERVICES: "node-agent",
				TRANSPORTER: nats.url,
				NODE_ID: id,
				AGENT_WORK_DIR: workDir
			});
		}
		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/nodes/`);
					if (res.status !== 200) return false;
					const active = res.body.results.filter((n: any) => n.is_active);
					const live = await q<{ agent_id: string }>(
						"SELECT agent_id FROM node WHERE is_active AND agent_id IS NOT NULL"
					);
					return active.length === 2 && live.length === 2;
				},
				60000,
				"two active nodes"
			)
		);
	}, 90000);

	afterAll(async () => {
		for (const p of Object.values(agents)) await p.stop("SIGKILL").catch(() => undefined);
		await control?.stop().catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("fails the execution as node-lost and completes the job on the other agent", async () => {
		const workspace = await request("POST", `${api}/workspaces/`, {
			name: "products",
			title: "Products",
			is_active: true,
			json_config: { broker: { type: "host", host_path: wsDir } }
		});
		expect(workspace.status).toBe(201);

		const type = await request("POST", `${api}/job-types/`, {
			name: "sleep-then-output",
			version: "1.0",
			title: "Sleep Then Output",
			max_tries: 3,
			cpus_required: 1,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: JOB,
				command_arguments: "5 ${job_output_dir}",
				input_data: [],
				output_data: [{ name: "out", type: "file" }]
			}
		});
		if (type.status !== 201) throw new Error(`job type: ${type.status} ${type.text}`);

		const queued = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: type.body.id,
			job_data: {
				version: "1.0",
				input_data: [],
				output_data: [{ name: "out", workspace_id: workspace.body.id }]
			}
		});
		if (queued.status !== 201) throw new Error(`new job: ${queued.status} ${queued.text}`);
		const jobId: number = queued.body.id;

		// The first execution runs on one of the agents: which one, the database says.
		let first!: ExeRow;
		await withOutput(() =>
			waitUntil(
				async () => {
					const rows = await exes(jobId);
					if (rows.length === 0 || rows[0].status !== "RUNNING") return false;
					first = rows[0];
					return true;
				},
				60000,
				"the job's first execution to run"
			)
		);
		expect(Object.keys(agents)).toContain(first.agent_id);
		const lostAgent = first.agent_id as string;
		const otherAgent = lostAgent === "agent-1" ? "agent-2" : "agent-1";
		const job = await request("GET", `${api}/jobs/${jobId}/`);
		expect(job.status).toBe(200);
		expect(job.body.status).toBe("RUNNING");

		await agents[lostAgent].stop("SIGKILL");

		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/jobs/${jobId}/`);
					return ["COMPLETED", "FAILED", "CANCELED"].includes(res.body?.status);
				},
				60000,
				"the job to end after its agent was killed"
			)
		);

		const rows = await exes(jobId);
		const [other] = await q<{ id: number }>("SELECT id FROM node WHERE agent_id = $1", [
			otherAgent
		]);
		await withOutput(async () => {
			// The lost execution ended FAILED, as node-lost.
			expect(rows[0]).toMatchObject({
				id: first.id,
				status: "FAILED",
				agent_id: lostAgent,
				error_name: "node-lost"
			});
			// A second execution ran, to completion, on the other node.
			expect(rows).toHaveLength(2);
			expect(rows[1]).toMatchObject({
				status: "COMPLETED",
				agent_id: otherAgent,
				node_id: other.id,
				error_name: null
			});
			expect(rows[1].node_id).not.toBe(first.node_id);
			expect(rows.filter(r => r.status === "COMPLETED")).toHaveLength(1);
		});

		const done = await request("GET", `${api}/jobs/${jobId}/`);
		expect(done.body).toMatchObject({ status: "COMPLETED", num_exes: 2 });
		const listed = await request("GET", `${api}/job-executions/?job_id=${jobId}`);
		expect(listed.status).toBe(200);
		expect(
			listed.body.results
				.map((e: any) => [e.id, e.status])
				.sort((a: any, b: any) => a[0] - b[0])
		).toEqual([
			[rows[0].id, "FAILED"],
			[rows[1].id, "COMPLETED"]
		]);

		// Exactly one product, made by the second execution, and its file is in the workspace.
		const products = await q<{ job_exe_id: number; workspace_id: number; file_path: string }>(
			`SELECT job_exe_id, workspace_id, file_path FROM scale_file
			 WHERE file_type = 'PRODUCT' AND job_id = $1`,
			[jobId]
		);
		expect(products).toHaveLength(1);
		expect(products[0]).toMatchObject({
			job_exe_id: rows[1].id,
			workspace_id: workspace.body.id
		});
		const file = path.resolve(wsDir, products[0].file_path);
		expect(fs.existsSync(file)).toBe(true);
		expect(fs.readFileSync(file, "utf8")).toBe("done after 5 s\n");
	}, 120000);
});
