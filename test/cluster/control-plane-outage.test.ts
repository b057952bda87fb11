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
/** The scheduler's lease of an agent (services/scheduler.service.ts, leaseMs). */
const LEASE_MS = 15000;

interface ExeRow {
	id: number;
	status: string;
	agent_id: string;
	error_name: string | null;
	stdout: string | null;
	job_started: Date | null;
}

/**
 * An agent's work outlives its control plane. A control plane and an agent, each its own OS
 * process, over a real nats-server; four jobs of one try each run on the agent, and the control
 * plane is killed (SIGKILL) while they run. They finish while it is down, for longer than the
 * agent's lease; it is started again, and the agent, stopped (SIGSTOP) as it comes back, speaks
 * only 12 s later. Each job must end COMPLETED with its one execution and its real stdout: none
 * failed as node-lost, none run twice.
 */
describe("a control plane down longer than an agent's lease", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let control: ServiceProcess;
	let agent: ServiceProcess;
	let api: string;
	let apiPort: number;
	let root: string;
	let wsDir: string;

	const outputs = () => `control plane:\n${control?.output()}\nagent:\n${agent?.output()}`;

	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			(err as Error).message += `\n${outputs()}`;
			throw err;
		}
	}

	async function q<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await db.db.query(sql, { bind });
		return rows as T[];
	}

	const startControl = () =>
		startProcess({
			SERVICES: JOBS_CONTROL_PLANE.join(","),
			TRANSPORTER: nats.url,
			NODE_ID: "outage-control",
			DATABASE_URL: db.url,
			PORT: String(apiPort),
			LOG_LEVEL: "info"
		});

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "control-plane-outage-"));
		fs.chmodSync(root, 0o755);
		wsDir = path.join(root, "workspace");
		fs.mkdirSync(wsDir, { mode: 0o777 });
		fs.chmodSync(wsDir, 0o777);
		nats = await startNats();
		db = await createTestDatabase();
		apiPort = await freePort();
		api = `http://127.0.0.1:${apiPort}/api`;
		control = startControl();
		const workDir = path.join(root, "agent");
		fs.mkdirSync(workDir, { mode: 0o755 });
		agent = startProcess({
			SERVICES: "node-agent",
			TRANSPORTER: nats.url,
			NODE_ID: "outage-agent",
			AGENT_WORK_DIR: workDir,
			LOG_LEVEL: "info"
		});
		await withOutput(() =>
			waitUntil(
				async () =>
					(
						await q<{ n: string }>(
							"SELECT count(*) AS n FROM node WHERE is_active AND agent_id = 'outage-agent'"
						)
					)[0]?.n === "1",
				60000,
				"the agent registered"
			)
		);
	}, 90000);

	afterAll(async () => {
		agent?.proc.kill("SIGCONT");
		await agent?.stop("SIGKILL").catch(() => undefined);
		await control?.stop("SIGKILL").catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("records the work that finished meanwhile, once, with its real outcome", async () => {
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
			max_tries: 1,
			cpus_required: 0.25,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: JOB,
				command_arguments: "${seconds} ${job_output_dir}",
				input_data: [{ name: "seconds", type: "property" }],
				output_data: [{ name: "out", type: "file" }]
			}
		});
		expect(type.status).toBe(201);
		const jobIds: number[] = [];
		for (const seconds of [4, 5, 6, 7]) {
			const queued = await request("POST", `${api}/queue/new-job/`, {
				job_type_id: type.body.id,
				job_data: {
					version: "1.0",
					input_data: [{ name: "seconds", value: String(seconds) }],
					output_data: [{ name: "out", workspace_id: workspace.body.id }]
				}
			});
			expect(queued.status).toBe(201);
			jobIds.push(queued.body.id);
		}
		const exes = () =>
			q<ExeRow>(
				`SELECT e.id, e.status, e.agent_id, er.name AS error_name, l.stdout, e.job_started
				 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
				 LEFT JOIN job_exe_log l ON l.job_exe_id = e.id
				 WHERE e.job_id = ANY($1::int[]) ORDER BY e.job_id, e.id`,
				[jobIds]
			);
		await withOutput(() =>
			waitUntil(
				// started on the agent, not only placed: a run still on its way when the control
				// plane is killed never arrives, and its execution is rightly failed as node-lost
				async () =>
					(await exes()).filter(e => e.status === "RUNNING" && e.job_started).length ===
					4,
				60000,
				"the four jobs running"
			)
		);

		await control.stop("SIGKILL");
		const killedAt = Date.now();
		// every job ends on the agent while nobody listens, and the lease runs out
		await new Promise(r => setTimeout(r, LEASE_MS + 5000));
		expect(await exes()).toHaveLength(4);
		control = startControl();
		// the agent is slow to come back: it says nothing for 12 s after the control plane starts
		agent.proc.kill("SIGSTOP");
		await withOutput(() =>
			waitUntil(
				async () => control.output().includes("scheduler: leading"),
				60000,
				"the new control plane leading"
			)
		);
		await new Promise(r => setTimeout(r, 12000));
		agent.proc.kill("SIGCONT");

		await withOutput(() =>
			waitUntil(
				async () => {
					const rows = await exes();
					return rows.every(e => e.status !== "RUNNING" && e.status !== "QUEUED");
				},
				60000,
				"every execution ended"
			)
		);
		const rows = await exes();
		await withOutput(async () => {
			expect(rows).toHaveLength(4);
			for (const [i, row] of rows.entries()) {
				expect(row).toMatchObject({
					status: "COMPLETED",
					agent_id: "outage-agent",
					error_name: null
				});
				expect(row.stdout).toContain(`sleeping ${4 + i}`);
			}
			for (const jobId of jobIds) {
				const job = await request("GET", `${api}/jobs/${jobId}/`);
				expect(job.body).toMatchObject({ status: "COMPLETED", num_exes: 1 });
			}
		});
		expect(Date.now() - killedAt).toBeGreaterThan(LEASE_MS);
	}, 240000);
});
