import fs from "fs";
import os from "os";
import path from "path";
import { spawnSync } from "child_process";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import {
	START_SCRIPT,
	startProcess,
	waitUntil,
	type ServiceProcess,
	JOBS_CONTROL_PLANE
} from "../helpers/process";
import { spec } from "../fixtures/agent";

const JOB = path.resolve(__dirname, "..", "fixtures", "jobs", "sleep-then-output.sh");
const NATS_USER = "scale";
const NATS_PASS = "pw-Zx81!q";
const DB_PASSWORD_MARK = "postgres://";

/**
 * What a peer on NATS learns and may do. A control plane (with the database) and an agent
 * started with no DATABASE_URL at all, over a nats-server that requires a password; a bare
 * broker joins with the password, as anything on the subject space could, and tries its luck.
 */
describe("the cluster towards a peer on NATS", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let control: ServiceProcess;
	let agent: ServiceProcess;
	let peer: ServiceBroker;
	let api: string;
	let root: string;
	let wsDir: string;

	function outputs(): string {
		return `control plane:\n${control?.output() ?? ""}\nagent:\n${agent?.output() ?? ""}`;
	}

	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			(err as Error).message = `${(err as Error).message}\n${outputs()}`;
			throw err;
		}
	}

	async function q<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await db.db.query(sql, { bind });
		return rows as T[];
	}

	/** JSON of a registry structure, which refers to itself. */
	function json(value: unknown): string {
		const seen = new WeakSet<object>();
		return JSON.stringify(value, (_key, v) => {
			if (v && typeof v === "object") {
				if (seen.has(v)) return undefined;
				seen.add(v);
			}
			return v;
		});
	}

	/** The error a call ends with (or a failure if it succeeds). */
	async function refusal(call: Promise<unknown>): Promise<any> {
		try {
			await call;
		} catch (err) {
			return err;
		}
		throw new Error("the call was accepted");
	}

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "trust-"));
		fs.chmodSync(root, 0o755);
		wsDir = path.join(root, "workspace");
		fs.mkdirSync(wsDir, { mode: 0o755 });
		nats = await startNats({ user: NATS_USER, pass: NATS_PASS });
		db = await createTestDatabase();
		const port = await freePort();
		api = `http://127.0.0.1:${port}/api`;
		control = startProcess({
			SERVICES: JOBS_CONTROL_PLANE.join(","),
			TRANSPORTER: nats.address,
			NATS_USER,
			NATS_PASSWORD: NATS_PASS,
			NODE_ID: "trust-control",
			DATABASE_URL: db.url,
			PORT: String(port)
		});
		const workDir = path.join(root, "agent");
		fs.mkdirSync(workDir, { mode: 0o755 });
		// No DATABASE_URL: startProcess passes only PATH and what is given here.
		agent = startProcess({
			SERVICES: "node-agent",
			TRANSPORTER: nats.url,
			NODE_ID: "trust-agent",
			AGENT_WORK_DIR: workDir
		});
		const config = loadConfig({ LOG_LEVEL: "fatal", SERVICES: "api", TRANSPORTER: nats.url });
		peer = new ServiceBroker({
			...brokerOptions(config, null),
			nodeID: "curious-peer",
			requestTimeout: 10000
		});
		await peer.start();
		await withOutput(() =>
			waitUntil(
				async () => {
					const [row] = await q<{ n: string }>(
						"SELECT count(*) AS n FROM node WHERE is_active AND agent_id = 'trust-agent'"
					);
					return (
						Number(row.n) === 1 &&
						peer.registry
							.getServiceList({ onlyAvailable: true })
							.some((svc: { name: string }) => svc.name === "scheduler")
					);
				},
				60000,
				"the agent registered and the control plane seen by the peer"
			)
		);
	}, 90000);

	afterAll(async () => {
		await peer?.stop().catch(() => undefined);
		await agent?.stop("SIGKILL").catch(() => undefined);
		await control?.stop().catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("learns no database URL or password from any node", async () => {
		const password = new URL(db.url).password;
		const leaks = (text: string) =>
			text.includes(DB_PASSWORD_MARK) ||
			text.includes(NATS_PASS) ||
			(password !== "" && text.includes(password));

		// what the peer's registry holds of the others (its own node's services are its own objects)
		const list = (await peer.call("$node.list", {})) as any[];
		expect(list.map(n => n.id)).toEqual(
			expect.arrayContaining(["trust-control", "trust-agent", "curious-peer"])
		);
		expect(leaks(json(list))).toBe(false);
		for (const node of list) expect(node.metadata?.databaseUrl).toBeUndefined();
		for (const nodeID of ["trust-control", "trust-agent"]) {
			const remoteList = await peer.call("$node.list", {}, { nodeID });
			expect(leaks(json(remoteList))).toBe(false);
			const options = await peer.call("$node.options", {}, { nodeID });
			expect((options as any).namespace).toBe("scale");
			expect(leaks(json(options))).toBe(false);
		}
		for (const nodeID of ["trust-control", "trust-agent"])
			expect(leaks(json(peer.registry.nodes.get(nodeID).rawInfo))).toBe(false);
	});

	it("learns no API token from the gateway's settings", async () => {
		const services = (await peer.call("$node.services", {
			withSettings: true,
			onlyAvailable: true
		})) as { name: string; settings?: Record<string, unknown> }[];
		const gateway = services.find(svc => svc.name === "api");
		expect(gateway?.settings?.port).toBeDefined();
		expect(gateway?.settings).not.toHaveProperty("apiTokens");
	});

	it("finds no action that reshapes the gateway", async () => {
		const actions = (await peer.call("$node.actions", {})) as { name: string }[];
		const names = actions.map(a => a.name);
		expect(names).toContain("node-agent.run");
		for (const name of ["api.addRoute", "api.removeRoute", "api.listAliases", "api.rest"])
			expect(names).not.toContain(name);
		const err = await refusal(peer.call("api.addRoute", { route: { path: "/x" } }));
		expect(err.type).toBe("SERVICE_NOT_FOUND");
	});

	it("cannot make an agent run a command", async () => {
		const sentinel = path.join(root, "pwned");
		const err = await refusal(
			peer.call(
				"node-agent.run",
				spec({
					jobExeId: 999999,
					command: "/usr/bin/touch",
					commandArguments: sentinel
				}),
				{ nodeID: "trust-agent" }
			)
		);
		expect(err.type).toBe("FORBIDDEN");
		expect(err.code).toBe(403);
		expect(err.message).toMatch(/does not lead the scheduler/);
		await new Promise(r => setTimeout(r, 500));
		expect(fs.existsSync(sentinel)).toBe(false);
	});

	it("cannot speak for the agent, nor stop, read or end what it runs; the job completes", async () => {
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
			cpus_required: 0.5,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: JOB,
				command_arguments: "3 ${job_output_dir}",
				input_data: [],
				output_data: [{ name: "out", type: "file" }]
			}
		});
		expect(type.status).toBe(201);
		const queued = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: type.body.id,
			job_data: {
				version: "1.0",
				input_data: [],
				output_data: [{ name: "out", workspace_id: workspace.body.id }]
			}
		});
		expect(queued.status).toBe(201);
		const jobId: number = queued.body.id;
		let exeId = 0;
		await withOutput(() =>
			waitUntil(
				async () => {
					const [row] = await q<{ id: number; status: string }>(
						"SELECT id, status FROM job_exe WHERE job_id = $1",
						[jobId]
					);
					exeId = row?.id ?? 0;
					return row?.status === "RUNNING";
				},
				30000,
				"the job to run on the agent"
			)
		);

		const forged = {
			jobExeId: exeId,
			agentId: "trust-agent",
			status: "FAILED",
			exitCode: 1,
			errorName: null,
			products: [],
			resultsManifest: null
		};
		// A report in the agent's name from elsewhere is refused...
		let err = await refusal(peer.call("scheduler.exeFinished", forged));
		expect(err.type).toBe("FORBIDDEN");
		// ...alone or among reports in the sender's own name
		err = await refusal(
			peer.call("scheduler.exeFinished", {
				reports: [{ ...forged, agentId: "curious-peer" }, forged]
			})
		);
		expect(err.type).toBe("FORBIDDEN");
		err = await refusal(
			peer.call("nodes.heartbeat", {
				agentId: "trust-agent",
				slaveId: "x",
				resources: { cpus: 1, mem: 1, disk: 1 },
				running: []
			})
		);
		expect(err.type).toBe("FORBIDDEN");
		// ...and one in its own name ends nothing it does not hold.
		await peer.call("scheduler.exeFinished", { ...forged, agentId: "curious-peer" });
		err = await refusal(
			peer.call("node-agent.cancel", { jobExeId: exeId }, { nodeID: "trust-agent" })
		);
		expect(err.type).toBe("FORBIDDEN");
		err = await refusal(
			peer.call("node-agent.logs", { jobExeId: exeId }, { nodeID: "trust-agent" })
		);
		expect(err.type).toBe("FORBIDDEN");
		const [still] = await q<{ status: string }>("SELECT status FROM job_exe WHERE id = $1", [
			exeId
		]);
		expect(still.status).toBe("RUNNING");

		// The gateway (a node with job-executions) may read the live logs.
		const logs = await request("GET", `${api}/job-executions/${exeId}/logs/combined/`);
		expect(logs.status).toBeLessThan(500);

		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/jobs/${jobId}/`);
					return res.body?.status === "COMPLETED";
				},
				30000,
				"the job to complete on the agent that has no database URL"
			)
		);
		const rows = await q<{ status: string; agent_id: string }>(
			"SELECT status, agent_id FROM job_exe WHERE job_id = $1",
			[jobId]
		);
		expect(rows).toEqual([{ status: "COMPLETED", agent_id: "trust-agent" }]);
	}, 60000);

	it("refuses malformed calls and changes nothing", async () => {
		const count = async () =>
			(
				await q<{ n: string }>(
					"SELECT (SELECT count(*) FROM node) + (SELECT count(*) FROM job_exe) + (SELECT count(*) FROM job) AS n"
				)
			)[0].n;
		const before = await count();
		const calls: [string, unknown, string?][] = [
			["scheduler.exeFinished", { jobExeId: "1; DROP TABLE job", agentId: "curious-peer" }],
			["scheduler.exeFinished", { jobExeId: 1, agentId: "curious-peer", status: "DONE" }],
			["scheduler.exeSteps", { steps: "all of them" }],
			[
				"nodes.register",
				{ agentId: "curious-peer", slaveId: 7, hostname: "", resources: {} }
			],
			["nodes.heartbeat", { agentId: "curious-peer" }],
			["nodes.mustStop", { jobExeIds: ["x"] }],
			["node-agent.run", { jobExeId: -1 }, "trust-agent"],
			["node-agent.run", { executions: [{ jobExeId: -1 }] }, "trust-agent"],
			["scheduler.exeFinished", { reports: [{ jobExeId: 1, agentId: "curious-peer" }] }],
			["node-agent.cancel", { jobExeId: "all" }, "trust-agent"],
			["ingest.arrived", { files: [{ name: "../../etc/passwd" }] }]
		];
		for (const [action, params, nodeID] of calls) {
			const err = await refusal(peer.call(action, params, nodeID ? { nodeID } : {}));
			expect([400, 403, 404, 409, 422]).toContain(err.code);
		}
		expect(await count()).toBe(before);
	});

	it("refuses to start with a wrong NATS password, saying so", () => {
		const run = spawnSync(process.execPath, [START_SCRIPT], {
			env: {
				PATH: process.env.PATH ?? "",
				SERVICES: "node-agent",
				TRANSPORTER: nats.address,
				NATS_USER,
				NATS_PASSWORD: "wrong",
				AGENT_WORK_DIR: path.join(root, "refused")
			},
			encoding: "utf8",
			timeout: 20000
		});
		expect(run.status).toBe(2);
		expect(run.stderr).toMatch(/refused these credentials/);
		expect(run.stderr).not.toContain("wrong");
	});

	it("refuses an agent-only process without TRANSPORTER, saying so", () => {
		const run = spawnSync(process.execPath, [START_SCRIPT], {
			env: { PATH: process.env.PATH ?? "", SERVICES: "node-agent" },
			encoding: "utf8",
			timeout: 20000
		});
		expect(run.status).toBe(2);
		expect(run.stderr).toMatch(/set TRANSPORTER/);
	});
});
