import fs from "fs";
import os from "os";
import path from "path";
import Docker from "dockerode";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { requireTestDocker } from "../helpers/dockerd";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import {
	startProcess,
	waitUntil,
	type ServiceProcess,
	JOBS_CONTROL_PLANE
} from "../helpers/process";

interface ExeRow {
	id: number;
	status: string;
	error_name: string | null;
}

/**
 * A control plane and an agent, each its own OS process, over a real nats-server, running a
 * container job on a real Docker engine. The agent is killed (SIGKILL) while the container runs,
 * which the engine keeps running; the agent started again removes it (found by its labels), the
 * execution fails as `node-lost`, and the job runs again to completion with one product.
 */
describe("losing the agent of a running container", () => {
	const engine = requireTestDocker();
	const docker = new Docker({ socketPath: engine.socket });
	let nats: NatsServer;
	let db: TestDatabase;
	let control: ServiceProcess;
	let agent: ServiceProcess;
	let agentEnv: Record<string, string>;
	let api: string;
	let root: string;
	let wsDir: string;

	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			const error = err as Error;
			error.message = `${error.message}\ncontrol plane:\n${control?.output()}\nagent:\n${agent?.output()}`;
			throw error;
		}
	}

	async function q<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await db.db.query(sql, { bind });
		return rows as T[];
	}

	const containersOf = (exeId: number) =>
		docker.listContainers({ all: true, filters: { label: [`scale.job_exe_id=${exeId}`] } });

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "container-loss-"));
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
		const workDir = path.join(root, "agent");
		fs.mkdirSync(workDir, { mode: 0o755 });
		agentEnv = {
			SERVICES: "node-agent",
			TRANSPORTER: nats.url,
			NODE_ID: "agent-c",
			AGENT_WORK_DIR: workDir,
			AGENT_DOCKER_HOST: engine.host,
			AGENT_DOCKER_NETWORK: "none"
		};
		agent = startProcess(agentEnv);
		await withOutput(() =>
			waitUntil(
				async () =>
					(await q("SELECT 1 FROM node WHERE is_active AND agent_id = 'agent-c'"))
						.length === 1,
				60000,
				"the agent's node"
			)
		);
	}, 90000);

	afterAll(async () => {
		await agent?.stop().catch(() => undefined);
		await control?.stop().catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("removes the container when the agent starts again, and runs the job again", async () => {
		const workspace = await request("POST", `${api}/workspaces/`, {
			name: "products",
			title: "Products",
			is_active: true,
			json_config: { broker: { type: "host", host_path: wsDir } }
		});
		expect(workspace.status).toBe(201);
		const type = await request("POST", `${api}/job-types/`, {
			name: "container-sleep",
			version: "1.0",
			docker_image: engine.image,
			max_tries: 3,
			cpus_required: 0.5,
			mem_required: 32,
			interface: {
				version: "1.0",
				command: "/bin/sh",
				command_arguments:
					"-c 'sleep 8; echo done > ${job_output_dir}/out.txt; echo ARTIFACT:out:${job_output_dir}/out.txt'",
				input_data: [],
				output_data: [{ name: "out", type: "file" }]
			}
		});
		if (type.status !== 201) throw new Error(`job type: ${type.status} ${type.text}`);
		const queued = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: type.body.id,
			job_data: {
				input_data: [],
				output_data: [{ name: "out", workspace_id: workspace.body.id }]
			}
		});
		if (queued.status !== 201) throw new Error(`new job: ${queued.status} ${queued.text}`);
		const jobId: number = queued.body.id;
		const exes = () =>
			q<ExeRow>(
				`SELECT e.id, e.status, er.name AS error_name
				 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
				 WHERE e.job_id = $1 ORDER BY e.id`,
				[jobId]
			);

		let first!: ExeRow;
		await withOutput(() =>
			waitUntil(
				async () => {
					const [row] = await exes();
					if (row?.status !== "RUNNING") return false;
					first = row;
					return (await containersOf(row.id)).some(c => c.State === "running");
				},
				60000,
				"the job's container to run"
			)
		);

		await agent.stop("SIGKILL");
		// the engine keeps the container of the dead agent running
		expect((await containersOf(first.id)).map(c => c.State)).toEqual(["running"]);
		agent = startProcess(agentEnv);
		await withOutput(() =>
			waitUntil(
				async () => (await containersOf(first.id)).length === 0,
				60000,
				"the restarted agent to remove the container left behind"
			)
		);

		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/jobs/${jobId}/`);
					return ["COMPLETED", "FAILED", "CANCELED"].includes(res.body?.status);
				},
				90000,
				"the job to end after its agent was killed"
			)
		);
		const rows = await exes();
		await withOutput(async () => {
			expect(rows[0]).toMatchObject({
				id: first.id,
				status: "FAILED",
				error_name: "node-lost"
			});
			expect(rows.at(-1)).toMatchObject({ status: "COMPLETED", error_name: null });
		});
		const products = await q<{ file_path: string }>(
			`SELECT file_path FROM scale_file WHERE file_type = 'PRODUCT' AND job_id = $1`,
			[jobId]
		);
		expect(products).toHaveLength(1);
		expect(fs.readFileSync(path.resolve(wsDir, products[0].file_path), "utf8")).toBe("done\n");
		// nothing of this node's is left: its label is the agent's slave id
		const node = fs.readFileSync(path.join(agentEnv.AGENT_WORK_DIR, "slave_id"), "utf8").trim();
		expect(
			await docker.listContainers({ all: true, filters: { label: [`scale.node=${node}`] } })
		).toEqual([]);
	}, 180000);

	it("maps a container's exit code through the job type's error mapping", async () => {
		const error = await request("POST", `${api}/errors/`, {
			name: "tiles-missing",
			title: "Tiles Missing",
			description: "The input had no tiles",
			category: "DATA"
		});
		expect(error.status).toBe(201);
		const type = await request("POST", `${api}/job-types/`, {
			name: "container-exit",
			version: "1.0",
			docker_image: engine.image,
			max_tries: 3,
			cpus_required: 0.5,
			mem_required: 32,
			error_mapping: { version: "1.0", exit_codes: { "3": "tiles-missing" } },
			interface: {
				version: "1.0",
				command: "/bin/sh",
				command_arguments: "-c 'echo no tiles >&2; exit 3'",
				input_data: [],
				output_data: []
			}
		});
		if (type.status !== 201) throw new Error(`job type: ${type.status} ${type.text}`);
		const queued = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: type.body.id,
			job_data: { input_data: [], output_data: [] }
		});
		expect(queued.status).toBe(201);
		let job: any;
		await withOutput(() =>
			waitUntil(
				async () => {
					job = (await request("GET", `${api}/jobs/${queued.body.id}/`)).body;
					return job?.status === "FAILED";
				},
				60000,
				"the job to fail"
			)
		);
		// a DATA error: not retried
		expect(job).toMatchObject({
			num_exes: 1,
			error: { name: "tiles-missing", category: "DATA" }
		});
		const exes = await request("GET", `${api}/job-executions/?job_id=${queued.body.id}`);
		const logs = await request("GET", `${api}/job-executions/${exes.body.results[0].id}/logs/`);
		expect(logs.body.stderr).toContain("no tiles\n");
	}, 120000);
});
