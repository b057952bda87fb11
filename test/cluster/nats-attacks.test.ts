import fs from "fs";
import os from "os";
import path from "path";
import { randomUUID } from "crypto";
import { ServiceBroker } from "moleculer";
import { connect, type NatsConnection } from "nats";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import { identity, natsUsers, type Identity } from "../../lib/cluster/nats-identities";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import {
	JOBS_CONTROL_PLANE,
	startProcess,
	waitUntil,
	type ServiceProcess
} from "../helpers/process";

/**
 * The attacks of an agent machine's NATS identity (agent-1's, which its jobs could once read)
 * against a control plane (control-1, with the database) and another agent (agent-2), each an
 * OS process, through a nats-server with the permissions `npm run cluster` writes. The attacker
 * speaks raw NATS, or runs a Moleculer broker of its own with the stolen identity.
 */

const P = "MOL-scale";
const JOB = path.resolve(__dirname, "..", "fixtures", "jobs", "sleep-then-output.sh");

let root: string;
let nats: RunningNatsServer;
let port: number;
let db: TestDatabase;
let api: string;
let control: ServiceProcess;
let agent2: ServiceProcess;
let typeId: number;
let workspaceId: number;
const ids = new Map<string, Identity>();
const open: NatsConnection[] = [];
const brokers: ServiceBroker[] = [];
const processes: ServiceProcess[] = [];

const natsLog = () => fs.readFileSync(path.join(root, "nats-server.log"), "utf8");

function outputs(): string {
	return processes.map(p => p.output()).join("\n----\n");
}

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

function env(name: string): Record<string, string> {
	return {
		TRANSPORTER: `nats://127.0.0.1:${port}`,
		NATS_USER: name,
		NATS_PASSWORD: ids.get(name)!.password,
		NODE_ID: name,
		NATS_ROLE: ids.get(name)!.role
	};
}

function agentProcess(nodeId: string, asName: string): ServiceProcess {
	const workDir = path.join(root, `work-${nodeId}-${randomUUID().slice(0, 6)}`);
	fs.mkdirSync(workDir, { recursive: true, mode: 0o755 });
	const p = startProcess({
		...env(asName),
		SERVICES: "node-agent",
		NODE_ID: nodeId,
		AGENT_WORK_DIR: workDir
	});
	processes.push(p);
	return p;
}

/** A raw NATS connection with `name`'s identity. */
async function raw(name: string): Promise<NatsConnection> {
	const nc = await connect({
		servers: `127.0.0.1:${port}`,
		user: name,
		pass: name === "spy" ? "spy" : ids.get(name)!.password,
		reconnect: false
	});
	open.push(nc);
	return nc;
}

/** A Moleculer broker of the attacker's, as `nodeId` with `name`'s identity, in `role`. */
async function rogueBroker(
	schemas: object[],
	role: "control" | "agent",
	name = "agent-1"
): Promise<ServiceBroker> {
	const config = loadConfig({
		...env(name),
		LOG_LEVEL: "fatal",
		SERVICES: role === "agent" ? "node-agent" : "api",
		NATS_ROLE: role
	});
	const broker = new ServiceBroker({ ...brokerOptions(config, null, role), nodeID: name });
	for (const schema of schemas) broker.createService(schema as never);
	brokers.push(broker);
	await broker.start();
	return broker;
}

/** The operator's broker (the REPL's identity): it may ask any node what its registry holds. */
let operator: ServiceBroker;

/** Which nodes `nodeId`'s registry says offer `service`. */
async function offeredBy(nodeId: string, service: string): Promise<string[]> {
	const list = (await operator.call(
		"$node.services",
		{ onlyAvailable: true, skipInternal: true },
		{ nodeID: nodeId }
	)) as { name: string; nodes?: string[]; nodeID?: string }[];
	return list
		.filter(s => s.name === service)
		.flatMap(s => s.nodes ?? (s.nodeID ? [s.nodeID] : []))
		.sort();
}

/** A Moleculer request packet (protocol 5, JSON) from `sender`. */
function requestPacket(sender: string, action: string, params: unknown): Uint8Array {
	const id = randomUUID();
	return new TextEncoder().encode(
		JSON.stringify({
			ver: "5",
			sender,
			id,
			action,
			params,
			meta: {},
			headers: {},
			timeout: 5000,
			level: 1,
			tracing: null,
			parentID: null,
			requestID: id,
			caller: null,
			stream: false
		})
	);
}

async function queueSleep(seconds: number): Promise<number> {
	const queued = await request("POST", `${api}/queue/new-job/`, {
		job_type_id: typeId,
		job_data: {
			version: "1.0",
			input_data: [{ name: "seconds", value: String(seconds) }],
			output_data: [{ name: "out", workspace_id: workspaceId }]
		}
	});
	if (queued.status !== 201) throw new Error(`new job: ${queued.status} ${queued.text}`);
	return queued.body.id;
}

const exes = (jobId: number) =>
	q<{ id: number; status: string; agent_id: string }>(
		"SELECT id, status, agent_id FROM job_exe WHERE job_id = $1 ORDER BY id",
		[jobId]
	);

async function runningExe(jobId: number): Promise<number> {
	let exeId = 0;
	let job: unknown = null;
	try {
		await waitUntil(
			async () => {
				const rows = await exes(jobId);
				exeId = rows[0]?.status === "RUNNING" ? rows[0].id : 0;
				job = (await request("GET", `${api}/jobs/${jobId}/`)).body;
				return exeId > 0;
			},
			60000,
			`job ${jobId} running`
		);
	} catch (err) {
		(err as Error).message += `\n${JSON.stringify(job)}\n${outputs()}`;
		throw err;
	}
	return exeId;
}

async function jobEnded(jobId: number): Promise<string> {
	let status = "";
	await withOutput(() =>
		waitUntil(
			async () => {
				const res = await request("GET", `${api}/jobs/${jobId}/`);
				status = res.body?.status;
				return ["COMPLETED", "FAILED", "CANCELED"].includes(status);
			},
			90000,
			`job ${jobId} to end`
		)
	);
	return status;
}

beforeAll(async () => {
	ensureNatsServer();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "nats-attacks-"));
	fs.chmodSync(root, 0o755);
	port = await freePort();
	for (const [name, role] of [
		["control-1", "control"],
		["agent-1", "agent"],
		["agent-2", "agent"],
		["operator", "operator"]
	] as const)
		ids.set(name, identity(root, name, role, `nats://127.0.0.1:${port}`));
	nats = await startNatsServer({
		dir: root,
		port,
		users: [...natsUsers([...ids.values()]), { user: "spy", password: "spy" }],
		logFile: path.join(root, "nats-server.log")
	});
	db = await createTestDatabase();
	const apiPort = await freePort();
	api = `http://127.0.0.1:${apiPort}/api`;
	control = startProcess({
		...env("control-1"),
		SERVICES: JOBS_CONTROL_PLANE.join(","),
		DATABASE_URL: db.url,
		PORT: String(apiPort)
	});
	processes.push(control);
	agent2 = agentProcess("agent-2", "agent-2");
	const operatorConfig = loadConfig({ ...env("operator"), LOG_LEVEL: "fatal", SERVICES: "api" });
	operator = new ServiceBroker(brokerOptions(operatorConfig, null, "operator"));
	brokers.push(operator);
	await operator.start();
	await withOutput(() =>
		waitUntil(
			async () =>
				(
					await q<{ n: string }>(
						"SELECT count(*) AS n FROM node WHERE is_active AND agent_id = 'agent-2'"
					)
				)[0]?.n === "1",
			60000,
			"agent-2 registered"
		)
	);
	const wsDir = path.join(root, "workspace");
	fs.mkdirSync(wsDir, { mode: 0o777 });
	fs.chmodSync(wsDir, 0o777);
	const workspace = await request("POST", `${api}/workspaces/`, {
		name: "products",
		title: "Products",
		is_active: true,
		json_config: { broker: { type: "host", host_path: wsDir } }
	});
	if (workspace.status !== 201) throw new Error(`workspace: ${workspace.text}`);
	workspaceId = workspace.body.id;
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
	if (type.status !== 201) throw new Error(`job type: ${type.status} ${type.text}`);
	typeId = type.body.id;
}, 120000);

afterAll(async () => {
	for (const b of brokers) await b.stop().catch(() => undefined);
	await Promise.all(open.map(nc => nc.close().catch(() => undefined)));
	for (const p of processes) await p.stop("SIGKILL").catch(() => undefined);
	await db?.drop().catch(() => undefined);
	await nats?.stop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
}, 60000);

describe("an attacker holding an agent's NATS identity", () => {
	it("cannot report for another agent with a forged sender, raw or on its own subject", async () => {
		const jobId = await queueSleep(20);
		const exeId = await runningExe(jobId);
		const [node] = await q<Record<string, unknown>>(
			"SELECT cpus_total, mem_total, slave_id FROM node WHERE agent_id = 'agent-2'"
		);
		const forgedFinish = {
			jobExeId: exeId,
			agentId: "agent-2",
			status: "COMPLETED",
			exitCode: 0,
			products: [],
			resultsManifest: null,
			parseResults: [],
			stdout: "forged stdout",
			stderr: "",
			steps: {}
		};
		const forgedBeat = {
			agentId: "agent-2",
			slaveId: "forged",
			resources: { cpus: 64, mem: 1024 * 1024, disk: 1024 * 1024 },
			running: []
		};
		const attacker = await raw("agent-1");
		const spy = await raw("spy");
		const answers: string[] = [];
		spy.subscribe(`${P}.RES.*.*.agent-1`, {
			callback: (_e, m) => answers.push(`${m.subject} ${m.string()}`)
		});
		await spy.flush();
		// 1. under agent-2's name on the subject: nats-server refuses the publication
		attacker.publish(
			`${P}.REQ.agent.agent-2.control-1`,
			requestPacket("agent-2", "scheduler.exeFinished", forgedFinish)
		);
		// 2. on its own subject, the packet naming agent-2 as its sender: the control plane drops it
		attacker.publish(
			`${P}.REQ.agent.agent-1.control-1`,
			requestPacket("agent-2", "scheduler.exeFinished", forgedFinish)
		);
		attacker.publish(
			`${P}.REQ.agent.agent-1.control-1`,
			requestPacket("agent-2", "nodes.heartbeat", forgedBeat)
		);
		// 3. as itself, for agent-2: the control plane knows it is agent-1 and refuses
		attacker.publish(
			`${P}.REQ.agent.agent-1.control-1`,
			requestPacket("agent-1", "scheduler.exeFinished", forgedFinish)
		);
		attacker.publish(
			`${P}.REQ.agent.agent-1.control-1`,
			requestPacket("agent-1", "nodes.heartbeat", forgedBeat)
		);
		await attacker.flush();
		await withOutput(async () => {
			await waitUntil(
				async () =>
					natsLog().includes(
						`Publish Violation - User "agent-1", Subject "${P}.REQ.agent.agent-2.control-1"`
					),
				5000,
				"nats-server's refusal"
			);
			await waitUntil(
				async () => /names \\?"agent-2\\?" as its sender/.test(control.output()),
				10000,
				"the control plane's refusal of the forged sender"
			);
			// the two calls as agent-1 were answered: refused, naming agent-1
			await waitUntil(async () => answers.length === 2, 10000, "two answers to agent-1");
		});
		for (const answer of answers) {
			expect(answer).toContain('"success":false');
			expect(answer).toMatch(/comes from node \\"agent-1\\"/);
		}
		const rows = await exes(jobId);
		expect(rows).toEqual([expect.objectContaining({ id: exeId, status: "RUNNING" })]);
		const [after] = await q<Record<string, unknown>>(
			"SELECT cpus_total, mem_total, slave_id FROM node WHERE agent_id = 'agent-2'"
		);
		expect(after).toEqual(node);
		// the job runs on to its real end
		expect(
			(await request("PATCH", `${api}/jobs/${jobId}/`, { status: "CANCELED" })).status
		).toBe(200);
		await jobEnded(jobId);
	}, 120000);

	it("cannot pose as the scheduler or the nodes service: no report goes to it, no agent asks it who leads", async () => {
		const swallowed: unknown[] = [];
		// as a control plane: nats-server refuses everything it publishes in that role
		const asControl = await rogueBroker([], "control");
		await asControl.stop();
		expect(natsLog()).toContain(
			`Publish Violation - User "agent-1", Subject "${P}.INFO.control.agent-1"`
		);
		// as the agent it is, offering the scheduler's and the nodes service's actions
		await rogueBroker(
			[
				{
					name: "scheduler",
					actions: {
						exeFinished: (ctx: { params: unknown }) => {
							swallowed.push(ctx.params);
							return { ok: true };
						}
					}
				},
				{ name: "nodes", actions: { leader: () => "agent-1" } },
				{ name: "node-agent", actions: { ping: () => "pong" } }
			],
			"agent"
		);
		await withOutput(() =>
			waitUntil(
				async () => (await offeredBy("control-1", "node-agent")).includes("agent-1"),
				20000,
				"the rogue agent seen by the control plane"
			)
		);
		for (const nodeId of ["control-1", "agent-2"]) {
			expect(await offeredBy(nodeId, "scheduler")).toEqual(["control-1"]);
			expect(await offeredBy(nodeId, "nodes")).toEqual(["control-1"]);
		}
		expect(control.output()).toMatch(
			/offers (scheduler, nodes|nodes, scheduler), not its role's/
		);
		// reports of jobs finishing meanwhile all reach the real scheduler
		const jobIds = await Promise.all([1, 1, 1, 1, 1, 1].map(s => queueSleep(s)));
		for (const jobId of jobIds) expect(await jobEnded(jobId)).toBe("COMPLETED");
		for (const jobId of jobIds) {
			const rows = await exes(jobId);
			expect(rows).toHaveLength(1);
			expect(rows[0]).toMatchObject({ status: "COMPLETED", agent_id: "agent-2" });
		}
		expect(swallowed).toEqual([]);
	}, 180000);

	it("cannot see another agent's run specs, nor take its node ID; the agent keeps running", async () => {
		const attacker = await raw("agent-1");
		let refused: string | null = null;
		attacker.subscribe(`${P}.REQ.*.*.agent-2`, {
			callback: err => {
				if (err) refused = err.message;
			}
		});
		await attacker.flush();
		await waitUntil(async () => refused !== null, 5000, "the subscription refused");
		expect(refused).toMatch(/Permissions Violation for Subscription/);

		// agent-2's own identity, copied to a second process: the newcomer stops, agent-2 runs on
		await new Promise(r => setTimeout(r, 6000)); // past the incumbent's joining time
		const second = agentProcess("agent-2", "agent-2");
		const code = await new Promise<number | null>(resolve => {
			const timer = setTimeout(() => resolve(-1), 30000);
			second.proc.once("exit", c => {
				clearTimeout(timer);
				resolve(c);
			});
		});
		expect(code).not.toBe(-1);
		expect(code).not.toBe(0);
		expect(second.output()).toMatch(/nodeID conflict/);
		expect(agent2.proc.exitCode).toBeNull();
		expect(agent2.output()).toContain("comes from another process with this node's ID");
		const jobId = await queueSleep(1);
		expect(await jobEnded(jobId)).toBe("COMPLETED");
		expect((await exes(jobId))[0]).toMatchObject({ agent_id: "agent-2", status: "COMPLETED" });
	}, 120000);
});
