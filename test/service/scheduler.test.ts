import { promises as fs } from "fs";
import os from "os";
import path from "path";
import { Errors, ServiceBroker, type ServiceSchema } from "moleculer";
import type {
	ExecutionFinished,
	ExecutionSpec,
	NodeDocker,
	ProducedFile
} from "../../lib/documents/agent-protocol";
import { loadConfig } from "../../lib/launch/config";
import { cancelJob } from "../../lib/queue/cancel";
import { loadServiceSchemas } from "../../lib/launch/services";
import { intakeGateOf } from "../../lib/recipes/intake-gate";
import { brokerOptions } from "../../moleculer.config";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { transaction } from "../../lib/db/run";

/**
 * The scheduler against real PostgreSQL, with the nodes service and a stand-in agent: a
 * `node-agent` service playing the agent's side of the protocol (it records the run calls it is
 * given and answers `scheduler.exeFinished` as a real agent would).
 */

let tdb: TestDatabase;
let main: Started;
let agent: StandIn;
let eventId: number;
/** Every broker of this file meets the others over the in-process Fake transporter. */
const namespace = `sched-${Math.random().toString(36).slice(2, 8)}`;

const FAST = {
	scheduler: {
		tickMs: 100,
		leaderRetryMs: 200,
		leadGraceMs: 0,
		flushMs: 1,
		unreachableBackoffMs: 300
	},
	nodes: {}
};

interface Started {
	broker: ServiceBroker;
	api: string;
	stop(): Promise<void>;
}

type Outcome = Partial<ExecutionFinished> | "hold" | "throw" | "unreachable";

/** The agent's side of the contract, recording what it is asked to do. */
class StandIn {
	runs: ExecutionSpec[] = [];
	cancels: number[] = [];
	held = new Map<number, ExecutionSpec>();
	behave: (spec: ExecutionSpec) => Outcome = () => ({});
	/** launches a second told in its answers (a launch window's rate); 0: none told */
	launchRate = 0;
	broker!: ServiceBroker;

	schema(): ServiceSchema {
		// eslint-disable-next-line @typescript-eslint/no-this-alias
		const self = this;
		return {
			name: "node-agent",
			actions: {
				run(ctx: any) {
					// the scheduler sends the executions it placed here together
					const specs = ctx.params.executions as ExecutionSpec[];
					const outcomes = specs.map(spec => self.behave(spec));
					if (outcomes.includes("throw")) throw new Error("cannot launch");
					// as an agent restarted under its nodeID answers before its services run
					if (outcomes.includes("unreachable"))
						throw new Errors.ServiceNotFoundError({
							action: "node-agent.run",
							nodeID: ctx.nodeID
						});
					specs.forEach((spec, i) => {
						const outcome = outcomes[i];
						self.runs.push(spec);
						if (outcome === "hold") self.held.set(spec.jobExeId, spec);
						else
							setImmediate(
								() =>
									void self.finish(
										spec.jobExeId,
										outcome as Partial<ExecutionFinished>
									)
							);
					});
					if (self.launchRate === 0) return { accepted: true };
					// nothing held is launched yet: all of it is the backlog
					return {
						accepted: true,
						launch: { rate: self.launchRate, backlog: self.held.size }
					};
				},
				cancel(ctx: any) {
					self.cancels.push(ctx.params.jobExeId);
					return { found: self.held.delete(ctx.params.jobExeId) };
				}
			}
		};
	}

	async finish(jobExeId: number, outcome: Partial<ExecutionFinished> = {}) {
		this.held.delete(jobExeId);
		return this.broker.call("scheduler.exeFinished", {
			jobExeId,
			agentId: this.broker.nodeID,
			status: "COMPLETED",
			exitCode: 0,
			products: [],
			resultsManifest: null,
			parseResults: [],
			stdout: "",
			stderr: "",
			steps: {},
			...outcome
		});
	}

	reset() {
		this.runs = [];
		this.cancels = [];
		this.held.clear();
		this.behave = () => ({});
		this.launchRate = 0;
	}
}

async function startBroker(opts: {
	services: string[];
	extra?: ServiceSchema[];
	settings?: Record<string, Record<string, unknown>>;
}): Promise<Started> {
	const config = loadConfig({ LOG_LEVEL: "error", SERVICES: opts.services.join(",") });
	const broker = new ServiceBroker({
		...brokerOptions(config, tdb.url),
		nodeID: `t-${Math.random().toString(36).slice(2, 10)}`,
		transporter: "Fake",
		namespace
	} as any);
	for (const schema of loadServiceSchemas({ ...config, port: 0 }))
		broker.createService({
			...schema,
			settings: { ...schema.settings, ...(opts.settings?.[schema.name as string] ?? {}) }
		});
	for (const extra of opts.extra ?? []) broker.createService(extra);
	await broker.start();
	const gateway = broker.getLocalService("api") as any;
	const port = gateway ? gateway.server.address().port : 0;
	return { broker, api: `http://127.0.0.1:${port}/api`, stop: () => broker.stop() };
}

async function q<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	try {
		const [rows] = await tdb.db.query(sql, { bind });
		return rows as T[];
	} catch (error: any) {
		throw new Error(`${error.message}: ${sql}`);
	}
}

async function waitFor<T>(
	probe: () => Promise<T> | T,
	ok: (value: T) => boolean = v => !!v,
	timeoutMs = 8000
): Promise<T> {
	const start = Date.now();
	for (;;) {
		const value = await probe();
		if (ok(value)) return value;
		if (Date.now() - start > timeoutMs)
			throw new Error(`timed out waiting; last value: ${JSON.stringify(value)}`);
		await new Promise(r => setTimeout(r, 20));
	}
}

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

let typeSeq = 0;

interface TypeOpts {
	iface?: Record<string, unknown>;
	errorMapping?: Record<string, unknown>;
	paused?: boolean;
	maxScheduled?: number | null;
	longRunning?: boolean;
	maxTries?: number;
	/** a container job type (uses_docker) with this docker_image */
	dockerImage?: string;
	dockerPrivileged?: boolean;
}

async function jobType(opts: TypeOpts = {}): Promise<{ id: number; revId: number }> {
	const iface = opts.iface ?? {
		version: "1.0",
		command: "/bin/true",
		command_arguments: "",
		input_data: [],
		output_data: []
	};
	const [t] = await q<{ id: number }>(
		`INSERT INTO job_type (name, version, interface, error_mapping, is_paused, max_scheduled,
			is_long_running, max_tries, uses_docker, docker_image, docker_privileged)
		 VALUES ($1, '1.0', $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
		[
			`type-${++typeSeq}`,
			JSON.stringify(iface),
			JSON.stringify(opts.errorMapping ?? { version: "1.0", exit_codes: {} }),
			opts.paused ?? false,
			opts.maxScheduled ?? null,
			opts.longRunning ?? false,
			opts.maxTries ?? 3,
			opts.dockerImage !== undefined,
			opts.dockerImage ?? null,
			opts.dockerPrivileged ?? false
		]
	);
	const [r] = await q<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, $2) RETURNING id`,
		[t.id, JSON.stringify(iface)]
	);
	return { id: t.id, revId: r.id };
}

interface JobOpts {
	priority?: number;
	cpus?: number;
	mem?: number;
	disk?: number;
	data?: Record<string, unknown>;
	maxTries?: number;
	timeout?: number;
	queued?: string;
}

/** A queued job as the queue service makes one: job, execution and queue row. */
async function queueJob(
	type: { id: number; revId: number },
	opts: JobOpts = {}
): Promise<{ jobId: number; exeId: number }> {
	const priority = opts.priority ?? 100;
	const [job] = await q<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
			timeout, max_tries, cpus_required, mem_required, disk_in_required, disk_out_required,
			data, queued, last_status_change)
		 VALUES ($1, $2, $3, 'QUEUED', $4, 1, $5, $6, $7, $8, 0, $9, $10, now(), now())
		 RETURNING id`,
		[
			type.id,
			type.revId,
			eventId,
			priority,
			opts.timeout ?? 60,
			opts.maxTries ?? 3,
			opts.cpus ?? 1,
			opts.mem ?? 64,
			opts.disk ?? 0,
			JSON.stringify(opts.data ?? { version: "1.0", input_data: [], output_data: [] })
		]
	);
	const [exe] = await q<{ id: number }>(
		`INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
		 VALUES ($1, $3, 'QUEUED', $2, now())
		 RETURNING id`,
		[job.id, opts.timeout ?? 60, type.id]
	);
	await q(
		`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required, mem_required,
			disk_in_required, disk_out_required, disk_total_required, queued)
		 VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7, coalesce($8::timestamptz, now()))`,
		[
			exe.id,
			job.id,
			type.id,
			priority,
			opts.cpus ?? 1,
			opts.mem ?? 64,
			opts.disk ?? 0,
			opts.queued ?? null
		]
	);
	return { jobId: job.id, exeId: exe.id };
}

function wake(broker: ServiceBroker = main.broker) {
	broker.broadcast("queue.changed");
}

let slaveSeq = 0;

async function registerNode(
	resources = { cpus: 4, mem: 4096, disk: 10000 },
	broker: ServiceBroker = agent.broker,
	docker?: NodeDocker
): Promise<number> {
	const { nodeId } = await broker.call<{ nodeId: number }, any>("nodes.register", {
		agentId: broker.nodeID,
		slaveId: `slave-${++slaveSeq}`,
		hostname: `host-${slaveSeq}.example.com`,
		port: 5051,
		resources,
		...(docker ? { docker } : {})
	});
	return nodeId;
}

async function job(id: number) {
	const [row] = await q(
		`SELECT j.*, e.name AS error_name FROM job j LEFT JOIN error e ON e.id = j.error_id
		 WHERE j.id = $1`,
		[id]
	);
	return row;
}

async function exes(jobId: number) {
	return q(
		`SELECT x.*, e.name AS error_name, e.category AS error_category
		 FROM job_exe x LEFT JOIN error e ON e.id = x.error_id
		 WHERE x.job_id = $1 ORDER BY x.id`,
		[jobId]
	);
}

/** Ends all live work and takes every node out, so tests do not see each other's. */
async function reset() {
	await q(`DELETE FROM queue`);
	await q(
		`UPDATE job_exe SET status = 'CANCELED', ended = now() WHERE status IN ('QUEUED', 'RUNNING')`
	);
	await q(`UPDATE job SET status = 'CANCELED' WHERE status IN ('QUEUED', 'RUNNING')`);
	await q(`UPDATE node SET is_active = false, agent_id = NULL`);
	await q(`UPDATE scheduler SET is_paused = false, node_error_period = 1, max_node_errors = 50`);
	agent.reset();
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	const [event] = await q<{ id: number }>(
		`INSERT INTO trigger_event (type, description, processed) VALUES ('USER', '{}', now())
		 RETURNING id`
	);
	eventId = event.id;
	agent = new StandIn();
	main = await startBroker({
		services: ["api", "status", "nodes", "scheduler", "recipe-types", "queue"],
		extra: [agent.schema()],
		settings: FAST
	});
	agent.broker = main.broker;
	await waitFor(() => (main.broker.getLocalService("scheduler") as any).isLeader());
});

afterAll(async () => {
	await main?.stop();
	await tdb?.drop();
});

beforeEach(reset);

describe("placement", () => {
	it("runs queued executions by priority, lower first, then by queue time", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const low = await queueJob(type, { priority: 200 });
		const high = await queueJob(type, { priority: 50 });
		const mid1 = await queueJob(type, { priority: 100, queued: "2020-01-02T00:00:00Z" });
		const mid0 = await queueJob(type, { priority: 100, queued: "2020-01-01T00:00:00Z" });
		await registerNode({ cpus: 1, mem: 1024, disk: 1000 });
		const order: number[] = [];
		for (let i = 0; i < 4; i++) {
			await waitFor(() => agent.runs.length === i + 1);
			const spec = agent.runs[i];
			order.push(spec.jobExeId);
			await agent.finish(spec.jobExeId);
		}
		expect(order).toEqual([high.exeId, mid0.exeId, mid1.exeId, low.exeId]);
		for (const j of [low, high, mid0, mid1])
			expect((await job(j.jobId)).status).toBe("COMPLETED");
		// its report flushes and passes over, the intake of new recipes does not wait for them
		// (lib/recipes/intake-gate.ts): each let go of the gate as often as it took it
		let free = false;
		void intakeGateOf(main.broker)
			.quiet(60000)
			.then(() => (free = true));
		await waitFor(() => free);
	});

	it("marks the execution and job RUNNING with node, resources and command arguments, and sends a spec", async () => {
		agent.behave = () => "hold";
		const type = await jobType({
			iface: {
				version: "1.0",
				command: "echo",
				command_arguments: "hello ${job_output_dir}",
				input_data: [{ name: "word", type: "property", required: true }],
				output_data: []
			}
		});
		const node = await registerNode();
		const j = await queueJob(type, {
			cpus: 1.5,
			mem: 256,
			disk: 32,
			timeout: 90,
			data: { version: "1.0", input_data: [{ name: "word", value: "hi" }], output_data: [] }
		});
		wake();
		await waitFor(() => agent.runs.length === 1);
		const [exe] = await exes(j.jobId);
		expect(exe).toMatchObject({
			status: "RUNNING",
			node_id: node,
			agent_id: main.broker.nodeID,
			cpus_scheduled: 1.5,
			mem_scheduled: 256,
			disk_out_scheduled: 32,
			disk_total_scheduled: 32,
			command_arguments: "hello ${job_output_dir}"
		});
		expect(exe.started).toBeInstanceOf(Date);
		const row = await job(j.jobId);
		expect(row.status).toBe("RUNNING");
		expect(row.started).toBeInstanceOf(Date);
		expect(await q("SELECT * FROM queue WHERE job_id = $1", [j.jobId])).toEqual([]);
		const spec = agent.runs[0];
		expect(spec).toMatchObject({
			jobExeId: j.exeId,
			jobId: j.jobId,
			jobType: { id: type.id, usesDocker: false, isLongRunning: false },
			inputs: { word: { value: "hi" } },
			timeout: 90,
			resources: { cpus: 1.5, mem: 256, disk: 32 }
		});
		expect(spec.interface.command).toBe("echo");
	});

	it("places only what fits in each node's free cpus, memory and disk", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		await registerNode({ cpus: 2, mem: 1000, disk: 100 });
		const big = await queueJob(type, { cpus: 3 });
		const memHog = await queueJob(type, { cpus: 1, mem: 2000 });
		const diskHog = await queueJob(type, { cpus: 1, disk: 500 });
		const small = [
			await queueJob(type, { cpus: 1 }),
			await queueJob(type, { cpus: 1 }),
			await queueJob(type, { cpus: 1 })
		];
		wake();
		await waitFor(() => agent.runs.length === 2);
		await sleep(300);
		expect(agent.runs.map(r => r.jobExeId)).toEqual([small[0].exeId, small[1].exeId]);
		for (const j of [big, memHog, diskHog, small[2]])
			expect((await job(j.jobId)).status).toBe("QUEUED");
		await agent.finish(small[0].exeId);
		await waitFor(() => agent.runs.length === 3);
		expect(agent.runs[2].jobExeId).toBe(small[2].exeId);
	});

	it("spreads executions over nodes by free cpus", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const a = await registerNode({ cpus: 4, mem: 4096, disk: 1000 });
		const b = await registerNode({ cpus: 4, mem: 4096, disk: 1000 });
		const jobs = [await queueJob(type), await queueJob(type)];
		wake();
		await waitFor(() => agent.runs.length === 2);
		const nodes = await q(`SELECT node_id FROM job_exe WHERE id = ANY($1) ORDER BY node_id`, [
			jobs.map(j => j.exeId)
		]);
		expect(nodes.map(n => n.node_id)).toEqual([a, b].sort((x, y) => x - y));
	});

	it("does not let unplaceable high-priority jobs starve placeable ones behind them", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		await registerNode({ cpus: 2, mem: 1024, disk: 1000 });
		// More huge jobs than one claim batch holds, all ahead of the small one.
		const service = main.broker.getLocalService("scheduler") as any;
		const { batchSize, maxScanRows } = service.settings;
		service.settings.batchSize = 2;
		service.settings.maxScanRows = 10;
		try {
			const huge = [];
			for (let i = 0; i < 5; i++) huge.push(await queueJob(type, { priority: 1, cpus: 100 }));
			const small = await queueJob(type, { priority: 500, cpus: 1 });
			wake();
			await waitFor(() => agent.runs.length === 1);
			expect(agent.runs[0].jobExeId).toBe(small.exeId);
			for (const h of huge) expect((await job(h.jobId)).status).toBe("QUEUED");
		} finally {
			service.settings.batchSize = batchSize;
			service.settings.maxScanRows = maxScanRows;
		}
	});

	it("places nothing on a paused node until it is resumed", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		let reply = await request("PATCH", `${main.api}/nodes/${node}/`, {
			is_paused: true,
			pause_reason: "maintenance"
		});
		expect(reply.status).toBe(201);
		const j = await queueJob(type);
		wake();
		await sleep(400);
		expect(agent.runs).toEqual([]);
		reply = await request("PATCH", `${main.api}/nodes/${node}/`, { is_paused: false });
		expect(reply.status).toBe(201);
		expect(reply.body.pause_reason).toBeNull();
		await waitFor(() => agent.runs.length === 1);
		expect(agent.runs[0].jobExeId).toBe(j.exeId);
	});

	it("places nothing on an inactive node or one out of its lease", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		await q(`UPDATE node SET is_active = false WHERE id = $1`, [node]);
		await queueJob(type);
		wake();
		await sleep(300);
		expect(agent.runs).toEqual([]);
		await q(
			`UPDATE node SET is_active = true, last_heartbeat = now() - interval '1 hour' WHERE id = $1`,
			[node]
		);
		wake();
		await sleep(300);
		expect(agent.runs).toEqual([]);
		await main.broker.call("nodes.heartbeat", {
			agentId: main.broker.nodeID,
			slaveId: (await q(`SELECT slave_id FROM node WHERE id = $1`, [node]))[0].slave_id,
			resources: { cpus: 4, mem: 4096, disk: 10000 },
			running: []
		});
		await waitFor(() => agent.runs.length === 1);
	});

	it("skips paused job types and schedules the others", async () => {
		agent.behave = () => "hold";
		const paused = await jobType({ paused: true });
		const other = await jobType();
		await registerNode();
		const p = await queueJob(paused, { priority: 1 });
		const o = await queueJob(other, { priority: 100 });
		wake();
		await waitFor(() => agent.runs.length === 1);
		await sleep(200);
		expect(agent.runs.map(r => r.jobExeId)).toEqual([o.exeId]);
		expect((await job(p.jobId)).status).toBe("QUEUED");
		await q(`UPDATE job_type SET is_paused = false WHERE id = $1`, [paused.id]);
		wake();
		await waitFor(() => agent.runs.length === 2);
		expect(agent.runs[1].jobExeId).toBe(p.exeId);
	});

	it("honours max_scheduled per job type", async () => {
		agent.behave = () => "hold";
		const type = await jobType({ maxScheduled: 2 });
		const other = await jobType();
		await registerNode({ cpus: 16, mem: 16000, disk: 10000 });
		const jobs = [];
		for (let i = 0; i < 4; i++) jobs.push(await queueJob(type, { priority: 1 }));
		const o = await queueJob(other, { priority: 50 });
		wake();
		await waitFor(() => agent.runs.length === 3);
		await sleep(300);
		expect(agent.runs.map(r => r.jobExeId).sort((a, b) => a - b)).toEqual(
			[jobs[0].exeId, jobs[1].exeId, o.exeId].sort((a, b) => a - b)
		);
		await agent.finish(jobs[0].exeId);
		await waitFor(() => agent.runs.length === 4);
		expect(agent.runs[3].jobExeId).toBe(jobs[2].exeId);
		await sleep(200);
		expect(agent.runs.length).toBe(4);
	});

	it("places no more than an agent's launch window, and then what ranks first", async () => {
		agent.behave = () => "hold";
		// one launch a second: a window holds its minimum of 2, and takes one more a second
		agent.launchRate = 1;
		const scheduler = main.broker.getLocalService("scheduler") as any;
		try {
			const type = await jobType();
			await registerNode({ cpus: 16, mem: 16000, disk: 10000 });
			const first = await queueJob(type);
			wake();
			// the first run finds no window (the agent had told no rate): its answer sets one
			await waitFor(() => agent.runs.length === 1);
			const early = [];
			for (let i = 0; i < 4; i++) early.push(await queueJob(type));
			wake();
			await waitFor(() => agent.runs.length === 2);
			// queued later but ranked earlier, it goes first when the window opens again
			const urgent = await queueJob(type, { priority: 1 });
			wake();
			await sleep(300);
			// resources are there for all; the window took one more, the rest wait QUEUED
			expect(agent.runs.map(r => r.jobExeId)).toEqual([first.exeId, early[0].exeId]);
			for (const j of [...early.slice(1), urgent])
				expect((await job(j.jobId)).status).toBe("QUEUED");
			await waitFor(() => agent.runs.length === 3);
			expect(agent.runs[2].jobExeId).toBe(urgent.exeId);
		} finally {
			scheduler.windows.forget(main.broker.nodeID);
		}
	});

	it("pauses and resumes the whole scheduler through GET|PATCH /scheduler/", async () => {
		agent.behave = () => "hold";
		let reply = await request("GET", `${main.api}/scheduler/`);
		expect(reply.status).toBe(200);
		expect(reply.body).toEqual({
			is_paused: false,
			node_error_period: 1,
			max_node_errors: 50,
			num_message_handlers: 1,
			system_logging_level: "INFO"
		});
		reply = await request("PATCH", `${main.api}/scheduler/`, { is_paused: true });
		expect(reply.status).toBe(200);
		expect(reply.body.is_paused).toBe(true);
		const type = await jobType();
		await registerNode();
		await queueJob(type);
		wake();
		await sleep(400);
		expect(agent.runs).toEqual([]);
		expect((await request("GET", `${main.api}/status/`)).body.scheduler.is_paused).toBe(true);
		reply = await request("PATCH", `${main.api}/v3/scheduler/`, { is_paused: false });
		expect(reply.status).toBe(200);
		await waitFor(() => agent.runs.length === 1);
	});

	it("refuses bad scheduler edits with a 400 naming the field", async () => {
		let reply = await request("PATCH", `${main.api}/scheduler/`, {});
		expect(reply.status).toBe(400);
		expect(reply.body.detail).toMatch(/No fields/);
		reply = await request("PATCH", `${main.api}/scheduler/`, { is_paused: "yes" });
		expect(reply.status).toBe(400);
		expect(reply.body.detail).toMatch(/^is_paused:/);
		reply = await request("PATCH", `${main.api}/scheduler/`, { node_error_period: 0 });
		expect(reply.status).toBe(400);
		expect(reply.body.detail).toMatch(/^node_error_period:/);
		reply = await request("PATCH", `${main.api}/scheduler/`, {
			node_error_period: 5,
			max_node_errors: 7
		});
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({ node_error_period: 5, max_node_errors: 7 });
	});

	it("wakes on a new job without waiting for the safety tick", async () => {
		agent.behave = () => "hold";
		const service = main.broker.getLocalService("scheduler") as any;
		const type = await jobType();
		await registerNode();
		await sleep(150);
		const tick = service.settings.tickMs;
		clearInterval(service.ticker);
		try {
			const j = await queueJob(type);
			const started = Date.now();
			wake();
			await waitFor(() => agent.runs.length === 1, undefined, 2000);
			expect(agent.runs[0].jobExeId).toBe(j.exeId);
			expect(Date.now() - started).toBeLessThan(500);
		} finally {
			service.ticker = setInterval(() => void service.tick(), tick);
		}
	});

	it("reports the queue depth and resources in GET /status/", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		await registerNode({ cpus: 2, mem: 2048, disk: 500 });
		await queueJob(type, { cpus: 1.5, mem: 512, disk: 100 });
		await queueJob(type, { cpus: 1.5, mem: 512, disk: 100 });
		wake();
		await waitFor(() => agent.runs.length === 1);
		await sleep(100);
		const reply = await request("GET", `${main.api}/status/`);
		expect(reply.status).toBe(200);
		expect(reply.body.queue_depth).toBe(1);
		expect(reply.body.scheduler).toMatchObject({
			is_online: true,
			hostname: main.broker.nodeID
		});
		expect(reply.body.resources).toEqual({
			total: { cpus: 2, mem: 2048, disk: 500 },
			scheduled: { cpus: 1.5, mem: 512, disk: 100 },
			used: { cpus: 0, mem: 0, disk: 0 }
		});
	});
});

describe("a recipe's freed jobs", () => {
	/** A recipe A → B, C of 1-cpu jobs, run to its end; answers its jobs A, B, C. */
	async function runFan() {
		await registerNode({ cpus: 3, mem: 4096, disk: 10000 });
		const names: string[] = [];
		for (let i = 0; i < 3; i++) {
			const type = await jobType();
			const [row] = await q<{ name: string }>(`SELECT name FROM job_type WHERE id = $1`, [
				type.id
			]);
			names.push(row.name);
		}
		const job = (name: string, type: string, deps: string[]) => ({
			name,
			job_type: { name: type, version: "1.0" },
			dependencies: deps.map(d => ({ name: d, connections: [] }))
		});
		const recipeType = await request("POST", `${main.api}/recipe-types/`, {
			name: `fan-${names[0]}`,
			version: "1.0",
			definition: {
				input_data: [],
				jobs: [job("A", names[0], []), job("B", names[1], ["A"]), job("C", names[2], ["A"])]
			}
		});
		expect(recipeType.status).toBe(201);
		const recipe = await request("POST", `${main.api}/queue/new-recipe/`, {
			recipe_type_id: recipeType.body.id,
			recipe_data: {}
		});
		expect(recipe.status).toBe(201);
		const jobsOf = () =>
			q<{ job_name: string; status: string; started: Date | null; ended: Date | null }>(
				`SELECT rj.job_name, j.status, j.started, j.ended FROM recipe_job rj
				 JOIN job j ON j.id = rj.job_id WHERE rj.recipe_id = $1 ORDER BY rj.job_name`,
				[recipe.body.id]
			);
		await waitFor(async () => (await jobsOf()).every(j => j.status === "COMPLETED"));
		return jobsOf();
	}

	it("are placed in the transaction recording their predecessor's end, in the room it frees and holds", async () => {
		const [a, b, c] = await runFan();
		// A's 1 cpu of 3 held 2 more for B and C: both placed when A's end was recorded
		expect(b.started!.getTime()).toBe(a.ended!.getTime());
		expect(c.started!.getTime()).toBe(a.ended!.getTime());
		expect(agent.runs).toHaveLength(3);
		const scheduler = main.broker.getLocalService("scheduler") as any;
		expect(scheduler.roomHolds.heldByNode(performance.now()).size).toBe(0);
	});

	it("wait for a pass when the hand-off fails: the end is recorded all the same", async () => {
		const scheduler = main.broker.getLocalService("scheduler") as any;
		const real = scheduler.reportWriter.handOff;
		let tried = 0;
		scheduler.reportWriter.handOff = async () => {
			tried++;
			throw new Error("the hand-off broke");
		};
		try {
			const [a, b, c] = await runFan();
			expect(tried).toBe(1);
			for (const freed of [b, c]) {
				expect(freed.status).toBe("COMPLETED");
				expect(freed.started!.getTime()).toBeGreaterThan(a.ended!.getTime());
			}
		} finally {
			scheduler.reportWriter.handOff = real;
		}
	});

	it("leave the room held for them when another replica says it recorded their predecessor's end", async () => {
		const scheduler = main.broker.getLocalService("scheduler") as any;
		scheduler.roomHolds.hold(987654, 1, { cpus: 2, mem: 128, disk: 0 });
		expect(scheduler.roomHolds.heldByNode(performance.now()).get(1)?.cpus).toBe(2);
		await main.broker.broadcast("scheduler.wake", { ended: [987654, "x"] });
		// well before the hold would lapse (ROOM_HOLD_MS)
		await sleep(50);
		expect(scheduler.roomHolds.heldByNode(performance.now() + 1).size).toBe(0);
	});
});

describe("container jobs", () => {
	const engine = (extra: Partial<NodeDocker> = {}): NodeDocker => ({
		engine: true,
		pull: false,
		images: [],
		privileged: false,
		...extra
	});
	const BIG = { cpus: 8, mem: 8192, disk: 10000 };
	const SMALL = { cpus: 2, mem: 2048, disk: 10000 };

	async function placedOn(exeId: number): Promise<number | null> {
		const [row] = await q<{ node_id: number | null }>(
			`SELECT node_id FROM job_exe WHERE id = $1`,
			[exeId]
		);
		return row.node_id;
	}

	it("go to the node that has their image, not to a roomier one without it", async () => {
		agent.behave = () => "hold";
		const a = await registerNode(BIG, undefined, engine({ images: ["alpine:3"] }));
		const b = await registerNode(
			SMALL,
			undefined,
			engine({ images: ["busybox:latest", "registry:5000/scale/x:1.2", "<none>:<none>"] })
		);
		const container = await jobType({ dockerImage: "registry:5000/scale/x:1.2" });
		const official = await jobType({ dockerImage: "docker.io/library/busybox" });
		const process = await jobType();
		const jobs = [
			await queueJob(container),
			await queueJob(official),
			await queueJob(process),
			await queueJob(process)
		];
		wake();
		await waitFor(() => agent.runs.length === 4);
		expect(await placedOn(jobs[0].exeId)).toBe(b);
		expect(await placedOn(jobs[1].exeId)).toBe(b);
		// process jobs go anywhere, by free cpus: A
		expect(await placedOn(jobs[2].exeId)).toBe(a);
		expect(await placedOn(jobs[3].exeId)).toBe(a);
		const spec = agent.runs.find(r => r.jobExeId === jobs[0].exeId)!;
		expect(spec.jobType).toMatchObject({
			usesDocker: true,
			dockerImage: "registry:5000/scale/x:1.2"
		});
	});

	it("wait QUEUED while no node has their image nor pulls, say why once, and go to a node that pulls", async () => {
		agent.behave = () => "hold";
		const service = main.broker.getLocalService("scheduler") as any;
		const warn = jest.spyOn(service.logger, "warn");
		try {
			// no engine at all: an agent that does not say (an older one), and one without
			await registerNode(BIG);
			await registerNode(SMALL, undefined, engine({ engine: false, pull: true }));
			const container = await jobType({ dockerImage: "scale-x:1" });
			const process = await jobType();
			const waiting = await queueJob(container, { priority: 1 });
			const p = await queueJob(process, { priority: 100 });
			wake();
			await waitFor(() => agent.runs.length === 1);
			expect(agent.runs[0].jobExeId).toBe(p.exeId);
			const said = () =>
				warn.mock.calls.filter(call => (call[0] as any)?.jobTypeId === container.id);
			await waitFor(() => said().length === 1);
			expect(said()[0][0]).toMatchObject({
				jobTypeId: container.id,
				image: "scale-x:1",
				reason: "no node has a Docker engine (of 2 nodes taking work)"
			});

			// an engine without the image, that does not pull: still waiting, a new reason
			await registerNode(BIG, undefined, engine({ images: ["scale-x:2"] }));
			await waitFor(() => said().length === 2);
			expect(said()[1][0]).toMatchObject({
				reason: "no node has the image scale-x:1 and none pulls (of 3 nodes taking work)"
			});
			// passes go on (the tick, every 100 ms), and say it no more
			await sleep(400);
			expect(said()).toHaveLength(2);
			expect((await job(waiting.jobId)).status).toBe("QUEUED");
			expect(agent.runs).toHaveLength(1);

			// a node that pulls takes it
			const puller = await registerNode(SMALL, undefined, engine({ pull: true }));
			await waitFor(() => agent.runs.length === 2);
			expect(agent.runs[1].jobExeId).toBe(waiting.exeId);
			expect(await placedOn(waiting.exeId)).toBe(puller);
		} finally {
			warn.mockRestore();
		}
	});

	it("that are privileged go only to a node that allows it", async () => {
		agent.behave = () => "hold";
		const plain = await registerNode(BIG, undefined, engine({ pull: true }));
		const privileged = await jobType({ dockerImage: "busybox", dockerPrivileged: true });
		const ordinary = await jobType({ dockerImage: "busybox" });
		const first = await queueJob(privileged, { priority: 1 });
		const second = await queueJob(ordinary, { priority: 2 });
		wake();
		await waitFor(() => agent.runs.length === 1);
		await sleep(300);
		expect(agent.runs.map(r => r.jobExeId)).toEqual([second.exeId]);
		expect(await placedOn(second.exeId)).toBe(plain);
		expect((await job(first.jobId)).status).toBe("QUEUED");
		const allowing = await registerNode(
			SMALL,
			undefined,
			engine({ images: ["busybox:latest"], privileged: true })
		);
		await waitFor(() => agent.runs.length === 2);
		expect(await placedOn(first.exeId)).toBe(allowing);
	});

	it("go to a node once its heartbeat lists their image", async () => {
		agent.behave = () => "hold";
		const node = await registerNode(SMALL, undefined, engine({ images: ["alpine:3"] }));
		const [{ slave_id: slaveId }] = await q<{ slave_id: string }>(
			`SELECT slave_id FROM node WHERE id = $1`,
			[node]
		);
		const container = await jobType({ dockerImage: "scale-x:1" });
		const j = await queueJob(container);
		wake();
		await sleep(300);
		expect(agent.runs).toEqual([]);
		await main.broker.call("nodes.heartbeat", {
			agentId: main.broker.nodeID,
			slaveId,
			resources: SMALL,
			running: [],
			docker: engine({ images: ["alpine:3", "scale-x:1"] })
		});
		await waitFor(() => agent.runs.length === 1);
		expect(agent.runs[0].jobExeId).toBe(j.exeId);
		expect(await placedOn(j.exeId)).toBe(node);
		const [row] = await q(`SELECT docker_images FROM node WHERE id = $1`, [node]);
		expect(row.docker_images).toEqual([
			"docker.io/library/alpine:3",
			"docker.io/library/scale-x:1"
		]);
	});
});

describe("completion", () => {
	let wsDir: string;
	let wsId: number;
	let rawDir: string;
	let rawId: number;

	beforeAll(async () => {
		wsDir = await fs.mkdtemp(path.join(os.tmpdir(), "sched-products-"));
		rawDir = await fs.mkdtemp(path.join(os.tmpdir(), "sched-raw-"));
		const config = (dir: string) =>
			JSON.stringify({ version: "1.0", broker: { type: "host", host_path: dir } });
		[{ id: wsId }] = await q<{ id: number }>(
			`INSERT INTO workspace (name, json_config) VALUES ('products', $1) RETURNING id`,
			[config(wsDir)]
		);
		[{ id: rawId }] = await q<{ id: number }>(
			`INSERT INTO workspace (name, json_config) VALUES ('raw', $1) RETURNING id`,
			[config(rawDir)]
		);
	});

	afterAll(async () => {
		await fs.rm(wsDir, { recursive: true, force: true });
		await fs.rm(rawDir, { recursive: true, force: true });
	});

	const IFACE = {
		version: "1.0",
		command: "process",
		command_arguments: "${image} ${job_output_dir}",
		input_data: [{ name: "image", type: "file", required: true, media_types: [] }],
		output_data: [
			{ name: "footprint", type: "file", required: true, media_type: "application/json" },
			{ name: "tiles", type: "files", required: false }
		]
	};

	async function source(name: string, extra = ""): Promise<number> {
		await fs.mkdir(path.join(rawDir, "in"), { recursive: true });
		await fs.writeFile(path.join(rawDir, "in", name), "data");
		const [row] = await q<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				file_size, uuid, data_type ${extra ? ", meta_data" : ""})
			 VALUES ('SOURCE', $1, $2::text, $3, 'image/tiff', 4, md5($2::text), '{raw}' ${extra ? ", $4" : ""})
			 RETURNING id`,
			extra ? [rawId, name, `in/${name}`, extra] : [rawId, name, `in/${name}`]
		);
		return row.id;
	}

	function data(fileId: number) {
		return {
			version: "1.0",
			input_data: [{ name: "image", file_id: fileId }],
			output_data: [
				{ name: "footprint", workspace_id: wsId },
				{ name: "tiles", workspace_id: wsId }
			]
		};
	}

	function products(exeId: number): ProducedFile[] {
		return [
			{
				outputName: "footprint",
				workspaceId: wsId,
				filePath: `out/${exeId}/footprint.json`,
				fileName: "footprint.json",
				mediaType: "application/json",
				size: 120,
				dataStarted: "2021-03-04T05:06:07.000Z",
				dataEnded: "2021-03-04T06:06:07.000Z",
				geoJson: {
					type: "Feature",
					properties: { sensor: "x1" },
					geometry: {
						type: "Polygon",
						coordinates: [
							[
								[0, 0],
								[4, 0],
								[4, 2],
								[0, 2],
								[0, 0]
							]
						]
					}
				}
			},
			{
				outputName: "tiles",
				workspaceId: wsId,
				filePath: `out/${exeId}/a.png`,
				fileName: "a.png",
				mediaType: "",
				size: 10
			},
			{
				outputName: "tiles",
				workspaceId: wsId,
				filePath: `out/${exeId}/b.tif`,
				fileName: "b.tif",
				mediaType: "",
				size: 11
			}
		];
	}

	it("registers products, ancestry, results, logs and parse results in one go", async () => {
		const type = await jobType({ iface: IFACE });
		const src = await source("scene1.tif");
		await registerNode();
		const manifest = { version: "1.1", output_data: [], parse_results: [] };
		agent.behave = spec => ({
			products: products(spec.jobExeId),
			resultsManifest: manifest,
			parseResults: [
				{
					filename: "scene1.tif",
					data_types: ["raw", "optical"],
					new_workspace_path: "parsed/2021",
					geo_metadata: {
						data_started: "2021-03-04T05:00:00Z",
						data_ended: "2021-03-04T05:30:00Z",
						geo_json: {
							type: "Polygon",
							coordinates: [
								[
									[10, 10],
									[12, 10],
									[12, 12],
									[10, 12],
									[10, 10]
								]
							]
						}
					}
				}
			],
			stdout: "working\ndone\n",
			stderr: "a warning\n",
			steps: {
				pre: {
					started: "2021-01-01T00:00:00.000Z",
					completed: "2021-01-01T00:00:01.000Z",
					exitCode: 0
				},
				main: {
					started: "2021-01-01T00:00:01.000Z",
					completed: "2021-01-01T00:00:05.000Z",
					exitCode: 0
				},
				post: {
					started: "2021-01-01T00:00:05.000Z",
					completed: "2021-01-01T00:00:06.000Z",
					exitCode: 0
				}
			}
		});
		const j = await queueJob(type, { data: data(src) });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "COMPLETED");

		const spec = agent.runs[0];
		expect(spec.inputs.image).toEqual({
			files: [
				{
					fileId: src,
					hostPath: path.join(rawDir, "in", "scene1.tif"),
					fileName: "scene1.tif",
					mediaType: "image/tiff",
					size: 4
				}
			]
		});
		expect(spec.outputWorkspaces).toEqual({
			footprint: { workspaceId: wsId, hostPath: wsDir },
			tiles: { workspaceId: wsId, hostPath: wsDir }
		});

		const made = await q(`SELECT * FROM scale_file WHERE job_exe_id = $1 ORDER BY id`, [
			j.exeId
		]);
		expect(made).toHaveLength(3);
		const [footprint, a, b] = made;
		expect(footprint).toMatchObject({
			file_type: "PRODUCT",
			workspace_id: wsId,
			file_name: "footprint.json",
			file_path: `out/${j.exeId}/footprint.json`,
			media_type: "application/json",
			file_size: "120",
			geometry: "POLYGON ((0 0, 4 0, 4 2, 0 2, 0 0))",
			center_point: "POINT (2 1)",
			meta_data: { sensor: "x1" },
			job_type_id: type.id,
			job_id: j.jobId,
			is_operational: true,
			is_published: true,
			has_been_published: true
		});
		expect(footprint.uuid).toMatch(/^[0-9a-f]{32}$/);
		expect(footprint.data_started.toISOString()).toBe("2021-03-04T05:06:07.000Z");
		expect(footprint.published).toBeInstanceOf(Date);
		expect(a.media_type).toBe("image/png");
		expect(b.media_type).toBe("image/tiff");
		expect(new Set(made.map(m => m.uuid)).size).toBe(3);

		const links = await q(
			`SELECT ancestor_id, descendant_id, job_id, job_exe_id FROM file_ancestry_link
			 WHERE job_id = $1 ORDER BY descendant_id`,
			[j.jobId]
		);
		expect(links).toEqual(
			made.map(m => ({
				ancestor_id: src,
				descendant_id: m.id,
				job_id: j.jobId,
				job_exe_id: j.exeId
			}))
		);

		const results = {
			version: "1.0",
			output_data: [
				{ name: "footprint", file_id: footprint.id },
				{ name: "tiles", file_ids: [a.id, b.id] }
			]
		};
		const row = await job(j.jobId);
		expect(row.results).toEqual(results);
		expect(row.ended).toBeInstanceOf(Date);
		const [exe] = await exes(j.jobId);
		expect(exe).toMatchObject({ status: "COMPLETED", results, results_manifest: manifest });
		expect(exe.pre_started.toISOString()).toBe("2021-01-01T00:00:00.000Z");
		expect(exe.job_completed.toISOString()).toBe("2021-01-01T00:00:05.000Z");
		expect(exe.post_exit_code).toBe(0);
		expect(exe.job_exit_code).toBe(0);
		const [log] = await q(`SELECT * FROM job_exe_log WHERE job_exe_id = $1`, [j.exeId]);
		expect(log).toMatchObject({ stdout: "working\ndone\n", stderr: "a warning\n" });

		const [parsed] = await q(`SELECT * FROM scale_file WHERE id = $1`, [src]);
		expect(parsed).toMatchObject({
			is_parsed: true,
			data_type: ["raw", "optical"],
			geometry: "POLYGON ((10 10, 12 10, 12 12, 10 12, 10 10))",
			center_point: "POINT (11 11)",
			file_path: "parsed/2021/scene1.tif"
		});
		expect(parsed.parsed).toBeInstanceOf(Date);
		expect(parsed.data_started.toISOString()).toBe("2021-03-04T05:00:00.000Z");
		expect(parsed.data_ended.toISOString()).toBe("2021-03-04T05:30:00.000Z");
		await expect(
			fs.readFile(path.join(rawDir, "parsed/2021/scene1.tif"), "utf8")
		).resolves.toBe("data");
		const events = await q(
			`SELECT * FROM trigger_event WHERE type = 'PARSE' AND description->>'file_id' = $1`,
			[String(src)]
		);
		expect(events).toHaveLength(1);
		expect(events[0]).toMatchObject({
			rule_id: null,
			processed: null,
			description: { version: "1.0", file_id: src, file_name: "scene1.tif", parse_id: src }
		});
	});

	it("keeps product uuids across reruns of the same job data", async () => {
		const type = await jobType({ iface: IFACE });
		const src = await source("scene2.tif");
		await registerNode();
		agent.behave = spec => ({ products: products(spec.jobExeId).slice(0, 1) });
		const first = await queueJob(type, { data: data(src) });
		const second = await queueJob(type, { data: data(src) });
		wake();
		await waitFor(async () => (await job(second.jobId)).status === "COMPLETED");
		await waitFor(async () => (await job(first.jobId)).status === "COMPLETED");
		const uuids = await q(`SELECT uuid FROM scale_file WHERE job_id = ANY($1) ORDER BY id`, [
			[first.jobId, second.jobId]
		]);
		expect(uuids).toHaveLength(2);
		expect(uuids[0].uuid).toBe(uuids[1].uuid);
	});

	it("marks products of a non-operational job type as not operational", async () => {
		const type = await jobType({ iface: IFACE });
		await q(`UPDATE job_type SET is_operational = false WHERE id = $1`, [type.id]);
		const src = await source("scene3.tif");
		await registerNode();
		agent.behave = spec => ({ products: products(spec.jobExeId).slice(0, 1) });
		const j = await queueJob(type, { data: data(src) });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "COMPLETED");
		const [p] = await q(`SELECT is_operational FROM scale_file WHERE job_id = $1`, [j.jobId]);
		expect(p.is_operational).toBe(false);
	});

	it("fails a completion whose required output is missing (algorithm-unknown)", async () => {
		const type = await jobType({ iface: IFACE });
		const src = await source("scene4.tif");
		await registerNode();
		agent.behave = () => ({ products: [], stderr: "done\n" });
		const j = await queueJob(type, { data: data(src) });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "FAILED");
		expect((await job(j.jobId)).error_name).toBe("algorithm-unknown");
		expect(await q(`SELECT id FROM scale_file WHERE job_id = $1`, [j.jobId])).toEqual([]);
		// why, after the algorithm's own stderr, where the execution's logs are read
		const [log] = await q(`SELECT stderr FROM job_exe_log WHERE job_exe_id = $1`, [j.exeId]);
		expect(log.stderr).toMatch(/^done\nscale: outputs refused: .+\n$/);
	});

	it("answers a repeated exeFinished with ok and changes nothing", async () => {
		const type = await jobType({ iface: IFACE });
		const src = await source("scene5.tif");
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type, { data: data(src) });
		wake();
		await waitFor(() => agent.runs.length === 1);
		const outcome = { products: products(j.exeId).slice(0, 1), stdout: "one" };
		expect(await agent.finish(j.exeId, outcome)).toEqual({ ok: true });
		const before = await job(j.jobId);
		const [exeBefore] = await exes(j.jobId);
		expect(await agent.finish(j.exeId, { ...outcome, stdout: "two" })).toEqual({ ok: true });
		expect(
			await agent.finish(j.exeId, { status: "FAILED", exitCode: 1, products: [] })
		).toEqual({ ok: true });
		expect(await job(j.jobId)).toEqual(before);
		expect((await exes(j.jobId))[0]).toEqual(exeBefore);
		expect(await q(`SELECT id FROM scale_file WHERE job_id = $1`, [j.jobId])).toHaveLength(1);
		const [log] = await q(`SELECT stdout FROM job_exe_log WHERE job_exe_id = $1`, [j.exeId]);
		expect(log.stdout).toBe("one");
	});

	it("takes the reports of several executions in one call, and refuses a malformed one whole", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const [j1, j2, j3] = [await queueJob(type), await queueJob(type), await queueJob(type)];
		wake();
		await waitFor(() => agent.runs.length === 3);
		const report = (jobExeId: number) => ({
			jobExeId,
			agentId: agent.broker.nodeID,
			status: "COMPLETED",
			exitCode: 0,
			products: [],
			resultsManifest: null
		});
		await expect(
			agent.broker.call("scheduler.exeFinished", {
				reports: [report(j3.exeId), { jobExeId: 1 }]
			})
		).rejects.toMatchObject({ type: "VALIDATION_ERROR" });
		expect(
			await agent.broker.call("scheduler.exeFinished", {
				reports: [report(j1.exeId), report(j2.exeId)]
			})
		).toEqual({ ok: true });
		expect([(await job(j1.jobId)).status, (await job(j2.jobId)).status]).toEqual([
			"COMPLETED",
			"COMPLETED"
		]);
		expect((await job(j3.jobId)).status).toBe("RUNNING");
	});

	it("takes duplicate reports arriving together once", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		const answers = await Promise.all([
			agent.finish(j.exeId, { stdout: "first" }),
			agent.finish(j.exeId, { stdout: "second" }),
			agent.finish(j.exeId, { status: "FAILED", exitCode: 2 })
		]);
		expect(answers).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
		expect((await job(j.jobId)).status).toBe("COMPLETED");
		expect(await exes(j.jobId)).toHaveLength(1);
		const [log] = await q(`SELECT stdout FROM job_exe_log WHERE job_exe_id = $1`, [j.exeId]);
		expect(log.stdout).toBe("first");
	});

	it("records step reports on the running execution", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		const step = (s: Record<string, unknown>) =>
			main.broker.call("scheduler.exeSteps", {
				steps: [{ jobExeId: j.exeId, agentId: main.broker.nodeID, ...s }]
			});
		await expect(
			step({ step: "pre", event: "started", at: "2022-02-02T00:00:00.000Z" })
		).resolves.toEqual({ ok: true });
		await step({
			step: "pre",
			event: "completed",
			at: "2022-02-02T00:00:01.000Z",
			exitCode: 0,
			commandArguments: "a b c"
		});
		await step({ step: "main", event: "started", at: "2022-02-02T00:00:02.000Z" });
		const [exe] = await exes(j.jobId);
		expect(exe.pre_started.toISOString()).toBe("2022-02-02T00:00:00.000Z");
		expect(exe.pre_completed.toISOString()).toBe("2022-02-02T00:00:01.000Z");
		expect(exe.pre_exit_code).toBe(0);
		expect(exe.job_started.toISOString()).toBe("2022-02-02T00:00:02.000Z");
		expect(exe.command_arguments).toBe("a b c");
		// Reports in another agent's name change nothing of an execution this agent holds.
		await expect(
			main.broker.call("scheduler.exeSteps", {
				steps: [
					{
						jobExeId: j.exeId,
						agentId: "another-agent",
						step: "main",
						event: "completed",
						at: "2022-02-02T00:00:03.000Z",
						exitCode: 0
					}
				]
			})
		).resolves.toEqual({ ok: false });
		await main.broker.call("scheduler.exeFinished", {
			jobExeId: j.exeId,
			agentId: "another-agent",
			status: "FAILED",
			exitCode: 1,
			products: [],
			resultsManifest: null
		});
		const [still] = await exes(j.jobId);
		expect(still.status).toBe("RUNNING");
		expect(still.job_completed).toBeNull();
		await agent.finish(j.exeId);
		await expect(
			step({ step: "post", event: "started", at: "2022-02-02T00:00:09.000Z" })
		).resolves.toEqual({ ok: false });
	});

	it("records the steps and command line a report carries (a short execution sends no steps)", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		await agent.finish(j.exeId, {
			commandArguments: "x y",
			steps: {
				pre: {
					started: "2022-03-03T00:00:00.000Z",
					completed: "2022-03-03T00:00:01.000Z",
					exitCode: 0
				},
				main: {
					started: "2022-03-03T00:00:02.000Z",
					completed: "2022-03-03T00:00:03.000Z",
					exitCode: 0
				},
				post: {
					started: "2022-03-03T00:00:04.000Z",
					completed: "2022-03-03T00:00:05.000Z",
					exitCode: 0
				}
			}
		});
		const [exe] = await exes(j.jobId);
		expect(exe.status).toBe("COMPLETED");
		expect(exe.command_arguments).toBe("x y");
		expect(exe.pre_started.toISOString()).toBe("2022-03-03T00:00:00.000Z");
		expect(exe.job_started.toISOString()).toBe("2022-03-03T00:00:02.000Z");
		expect(exe.post_completed.toISOString()).toBe("2022-03-03T00:00:05.000Z");
	});
});

describe("failure", () => {
	it("maps an exit code through the job type's error mapping and ends the job (DATA)", async () => {
		await q(
			`INSERT INTO error (name, title, category) VALUES ('bad-pixels', 'Bad Pixels', 'DATA')`
		);
		const type = await jobType({
			errorMapping: { version: "1.0", exit_codes: { "3": "bad-pixels" } }
		});
		await registerNode();
		agent.behave = () => ({ status: "FAILED", exitCode: 3 });
		const j = await queueJob(type);
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "FAILED");
		const row = await job(j.jobId);
		expect(row.error_name).toBe("bad-pixels");
		expect(row.ended).toBeInstanceOf(Date);
		const list = await exes(j.jobId);
		expect(list).toHaveLength(1);
		expect(list[0]).toMatchObject({
			status: "FAILED",
			error_name: "bad-pixels",
			job_exit_code: 3
		});
		expect(list[0].ended).toBeInstanceOf(Date);
	});

	it("records algorithm-unknown for an unmapped exit code, without retrying", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => ({ status: "FAILED", exitCode: 7 });
		const j = await queueJob(type);
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "FAILED");
		expect((await job(j.jobId)).error_name).toBe("algorithm-unknown");
		expect(await exes(j.jobId)).toHaveLength(1);
		expect(agent.runs).toHaveLength(1);
	});

	it("retries SYSTEM errors with a new execution until max_tries", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => ({ status: "FAILED", exitCode: null, errorName: "task-launch" });
		const j = await queueJob(type, { maxTries: 3 });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "FAILED");
		const row = await job(j.jobId);
		expect(row.error_name).toBe("task-launch");
		expect(row.num_exes).toBe(3);
		const list = await exes(j.jobId);
		expect(list.map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "task-launch"],
			["FAILED", "task-launch"],
			["FAILED", "task-launch"]
		]);
		expect(agent.runs.map(r => r.jobExeId)).toEqual(list.map(e => e.id));
		expect(await q(`SELECT * FROM queue WHERE job_id = $1`, [j.jobId])).toEqual([]);
	});

	it("requeues a SYSTEM failure with the job's resources and priority", async () => {
		const type = await jobType();
		await registerNode();
		let first = true;
		agent.behave = () => {
			if (first) {
				first = false;
				return { status: "FAILED", exitCode: null, errorName: "timeout" };
			}
			return "hold";
		};
		const j = await queueJob(type, { priority: 7, cpus: 2, mem: 100, disk: 5, maxTries: 2 });
		wake();
		await waitFor(() => agent.runs.length === 2);
		const list = await exes(j.jobId);
		expect(list[0]).toMatchObject({ status: "FAILED", error_name: "timeout" });
		expect(list[1]).toMatchObject({ status: "RUNNING", cpus_scheduled: 2, mem_scheduled: 100 });
		const row = await job(j.jobId);
		expect(row).toMatchObject({ status: "RUNNING", num_exes: 2, error_id: null, priority: 7 });
		expect(agent.runs[1].resources).toEqual({ cpus: 2, mem: 100, disk: 5 });
	});

	it("always requeues long-running job types, even after algorithm errors", async () => {
		const type = await jobType({ longRunning: true, maxTries: 1 });
		await registerNode();
		let n = 0;
		agent.behave = () => (++n <= 2 ? { status: "FAILED", exitCode: 1 } : "hold");
		const j = await queueJob(type, { maxTries: 1, timeout: 600 });
		wake();
		await waitFor(() => agent.runs.length === 3);
		const list = await exes(j.jobId);
		expect(list.map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "algorithm-unknown"],
			["FAILED", "algorithm-unknown"],
			["RUNNING", null]
		]);
		expect((await job(j.jobId)).num_exes).toBe(3);
		expect(agent.runs[2].timeout).toBe(0);
	});

	it("fails with task-launch and retries when the agent refuses the run call", async () => {
		const type = await jobType();
		await registerNode();
		let n = 0;
		agent.behave = () => (++n === 1 ? "throw" : "hold");
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		const list = await exes(j.jobId);
		expect(list.map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "task-launch"],
			["RUNNING", null]
		]);
	});

	it("fails a CANCELED report's execution and job as canceled", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => ({ status: "CANCELED", exitCode: null });
		const j = await queueJob(type);
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "CANCELED");
		expect((await exes(j.jobId))[0].status).toBe("CANCELED");
	});

	it("pauses a node with too many SYSTEM failures in the window", async () => {
		let reply = await request("PATCH", `${main.api}/scheduler/`, {
			max_node_errors: 2,
			node_error_period: 5
		});
		expect(reply.status).toBe(200);
		const type = await jobType();
		const node = await registerNode();
		agent.behave = () => ({ status: "FAILED", exitCode: null, errorName: "filesystem-io" });
		const j = await queueJob(type, { maxTries: 5 });
		wake();
		await waitFor(
			async () => (await q(`SELECT is_paused FROM node WHERE id = $1`, [node]))[0].is_paused
		);
		const [row] = await q(`SELECT * FROM node WHERE id = $1`, [node]);
		expect(row).toMatchObject({
			is_paused: true,
			is_paused_errors: true,
			pause_reason: "System Failure Rate Too High"
		});
		await sleep(300);
		expect(agent.runs).toHaveLength(2);
		expect((await job(j.jobId)).status).toBe("QUEUED");
		reply = await request("PATCH", `${main.api}/nodes/${node}/`, { is_paused: false });
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({
			is_paused: false,
			is_paused_errors: false,
			pause_reason: null
		});
	});
});

describe("canceled while running", () => {
	/** Cancels the job as PATCH /jobs/{id}/ does: in a transaction of its own, before the kill. */
	async function cancel(jobId: number) {
		return transaction(tdb.db, t => cancelJob(tdb.db, t, jobId));
	}

	async function logOf(exeId: number) {
		return (
			await q(`SELECT stdout, stderr FROM job_exe_log WHERE job_exe_id = $1`, [exeId])
		)[0];
	}

	it("keeps the logs and step times of the agent's report, the statuses as the cancel left them", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		await main.broker.call("scheduler.exeSteps", {
			steps: [
				{
					jobExeId: j.exeId,
					agentId: main.broker.nodeID,
					step: "pre",
					event: "started",
					at: "2022-04-04T00:00:00.000Z"
				}
			]
		});
		expect((await cancel(j.jobId)).canceledExe).toMatchObject({
			id: j.exeId,
			previous: "RUNNING",
			agentId: main.broker.nodeID
		});
		const [canceled] = await exes(j.jobId);
		const report: Partial<ExecutionFinished> = {
			status: "CANCELED",
			exitCode: null,
			stdout: "pid 12\nsleeping 30\n",
			stderr: "terminated\n",
			commandArguments: "30",
			steps: {
				pre: {
					started: "2022-04-04T00:00:05.000Z",
					completed: "2022-04-04T00:00:06.000Z",
					exitCode: 0
				},
				main: { started: "2022-04-04T00:00:07.000Z", completed: "2022-04-04T00:00:08.000Z" }
			}
		};
		expect(await agent.finish(j.exeId, report)).toEqual({ ok: true });
		const [exe] = await exes(j.jobId);
		expect(exe).toMatchObject({ status: "CANCELED", error_id: null, job_exit_code: null });
		expect(exe.ended).toEqual(canceled.ended);
		// what was recorded stays; what was not is filled in
		expect(exe.pre_started.toISOString()).toBe("2022-04-04T00:00:00.000Z");
		expect(exe.pre_completed.toISOString()).toBe("2022-04-04T00:00:06.000Z");
		expect(exe.pre_exit_code).toBe(0);
		expect(exe.job_started.toISOString()).toBe("2022-04-04T00:00:07.000Z");
		expect(exe.job_completed.toISOString()).toBe("2022-04-04T00:00:08.000Z");
		expect(exe.post_started).toBeNull();
		expect(exe.command_arguments).toBe("30");
		expect(await logOf(j.exeId)).toEqual({
			stdout: "pid 12\nsleeping 30\n",
			stderr: "terminated\n"
		});
		expect(await job(j.jobId)).toMatchObject({ status: "CANCELED", num_exes: 1 });

		// a repeat, and a report from another agent, change nothing
		expect(await agent.finish(j.exeId, { ...report, stdout: "again" })).toEqual({ ok: true });
		await agent.finish(j.exeId, {
			...report,
			agentId: "another-agent",
			stdout: "not mine",
			steps: { post: { started: "2022-04-04T00:00:09.000Z" } }
		});
		expect((await exes(j.jobId))[0]).toEqual(exe);
		expect((await logOf(j.exeId)).stdout).toBe("pid 12\nsleeping 30\n");
		expect(await exes(j.jobId)).toHaveLength(1);
		expect(await q(`SELECT id FROM queue WHERE job_id = $1`, [j.jobId])).toEqual([]);
	});

	it("keeps the logs of a process that ended by itself as the cancel came, nothing else", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		await cancel(j.jobId);
		await agent.finish(j.exeId, {
			stdout: "done anyway\n",
			steps: { main: { started: "2022-05-05T00:00:00.000Z", exitCode: 0 } }
		});
		const [exe] = await exes(j.jobId);
		expect(exe).toMatchObject({ status: "CANCELED", job_exit_code: 0, results: null });
		expect(exe.job_started.toISOString()).toBe("2022-05-05T00:00:00.000Z");
		expect(await logOf(j.exeId)).toEqual({ stdout: "done anyway\n", stderr: "" });
		expect(await job(j.jobId)).toMatchObject({ status: "CANCELED", results: null });
	});
});

describe("lost agents", () => {
	it("gives an execution a lease from its placement, however old its node's heartbeat", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [node]);
		await new Promise(r => setTimeout(r, 1000)); // ten lost-agent checks
		expect((await exes(j.jobId)).map(e => e.status)).toEqual(["RUNNING"]);
		await q(`UPDATE job_exe SET started = now() - interval '1 hour' WHERE job_id = $1`, [
			j.jobId
		]);
		await waitFor(async () => (await exes(j.jobId)).length === 2);
		await q(`UPDATE node SET is_active = false WHERE id = $1`, [node]);
	});

	it("fails the executions of a node out of its heartbeat lease with node-lost and requeues them", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		const j = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		// not heard from for a lease since its heartbeat and the execution's placement
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [node]);
		await q(`UPDATE job_exe SET started = now() - interval '1 hour' WHERE job_id = $1`, [
			j.jobId
		]);
		await waitFor(async () => (await exes(j.jobId)).length === 2);
		const list = await exes(j.jobId);
		expect(list.map(e => [e.status, e.error_name, e.error_category])).toEqual([
			["FAILED", "node-lost", "SYSTEM"],
			["QUEUED", null, null]
		]);
		expect((await job(j.jobId)).status).toBe("QUEUED");
		await q(`UPDATE node SET is_active = false WHERE id = $1`, [node]);
		// node-lost does not count against the node
		expect((await q(`SELECT is_paused FROM node WHERE id = $1`, [node]))[0].is_paused).toBe(
			false
		);
	});

	it("fails executions the agent's heartbeat does not list, once past the grace", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		const kept = await queueJob(type);
		const forgotten = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 2);
		await q(`UPDATE job_exe SET started = now() - interval '1 hour' WHERE id = ANY($1)`, [
			[kept.exeId, forgotten.exeId]
		]);
		const [{ slave_id }] = await q(`SELECT slave_id FROM node WHERE id = $1`, [node]);
		const reply = await main.broker.call<any, any>("nodes.heartbeat", {
			agentId: main.broker.nodeID,
			slaveId: slave_id,
			resources: { cpus: 4, mem: 4096, disk: 10000 },
			running: [kept.exeId]
		});
		expect(reply).toEqual({ ok: true, nodeId: node, cancel: [] });
		const list = await exes(forgotten.jobId);
		expect(list[0]).toMatchObject({ status: "FAILED", error_name: "node-lost" });
		expect((await exes(kept.jobId))[0].status).toBe("RUNNING");
	});

	it("places nothing on an agent for a while after a run could not reach it", async () => {
		const type = await jobType();
		await registerNode();
		const until = Date.now() + 200;
		agent.behave = () => (Date.now() < until ? "unreachable" : {});
		const j = await queueJob(type, { maxTries: 3 });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "COMPLETED");
		const list = await exes(j.jobId);
		// without the pause, the retries would have met the same refusal and used up the tries
		expect(list.map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "node-lost"],
			["COMPLETED", null]
		]);
	});

	it("loses nothing an agent holds while a run could not reach it (set aside, still heard from)", async () => {
		const type = await jobType();
		await registerNode();
		agent.behave = () => "hold";
		const held = await queueJob(type);
		wake();
		await waitFor(() => agent.runs.length === 1);
		// the next run fails as one sent to an agent's previous process does: the agent is
		// set aside for placement (300 ms here), three lost-agent checks pass meanwhile
		agent.behave = () => "unreachable";
		const refused = await queueJob(type, { maxTries: 3 });
		wake();
		await waitFor(async () => (await exes(refused.jobId)).length === 2);
		await new Promise(r => setTimeout(r, 300));
		expect((await exes(held.jobId)).map(e => e.status)).toEqual(["RUNNING"]);
		agent.behave = () => ({});
		await agent.finish(held.exeId);
		expect((await exes(held.jobId)).map(e => [e.status, e.error_name])).toEqual([
			["COMPLETED", null]
		]);
		await waitFor(async () => (await job(refused.jobId)).status === "COMPLETED");
	});

	it("fails with node-lost and requeues when the agent leaves the cluster", async () => {
		const remote = new StandIn();
		remote.behave = () => "hold";
		const agentBroker = new ServiceBroker({
			namespace,
			nodeID: `agent-${Math.random().toString(36).slice(2, 8)}`,
			transporter: "Fake",
			logger: false
		});
		agentBroker.createService(remote.schema());
		remote.broker = agentBroker;
		await agentBroker.start();
		try {
			await agentBroker.waitForServices(["nodes", "scheduler"], 5000);
			await main.broker.waitForServices(["node-agent"], 5000);
			const type = await jobType();
			const node = await registerNode(undefined, agentBroker);
			const j = await queueJob(type);
			wake();
			await waitFor(() => remote.runs.length === 1);
			expect(agent.runs).toEqual([]);
			await agentBroker.stop();
			await waitFor(async () => (await exes(j.jobId)).length === 2);
			const list = await exes(j.jobId);
			expect(list.map(e => [e.status, e.error_name])).toEqual([
				["FAILED", "node-lost"],
				["QUEUED", null]
			]);
			// The nodes service forgets the agent too.
			await waitFor(
				async () =>
					(await q(`SELECT agent_id FROM node WHERE id = $1`, [node]))[0].agent_id,
				agentId => agentId === null
			);
		} finally {
			await agentBroker.stop().catch(() => undefined);
		}
	});
});

describe("draining nodes", () => {
	it("places nothing on a draining node, and places again once its drain ends", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		let reply = await request("PATCH", `${main.api}/nodes/${node}/`, { is_draining: true });
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({ is_draining: true, drain_by: "user" });
		const j = await queueJob(type);
		wake();
		await sleep(400);
		expect(agent.runs).toEqual([]);
		reply = await request("PATCH", `${main.api}/nodes/${node}/`, { is_draining: false });
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({ is_draining: false, draining_since: null });
		await waitFor(() => agent.runs.length === 1);
		expect(agent.runs[0].jobExeId).toBe(j.exeId);
	});

	it("queues a job stopped by its node's shutdown again without counting the try", async () => {
		await request("PATCH", `${main.api}/scheduler/`, {
			max_node_errors: 1,
			node_error_period: 5
		});
		const type = await jobType();
		const node = await registerNode();
		let n = 0;
		agent.behave = () =>
			++n === 1
				? {
						status: "FAILED",
						exitCode: null,
						errorName: "node-shutdown",
						stderr: "scale: the node was shut down\n"
					}
				: {};
		const j = await queueJob(type, { maxTries: 1 });
		wake();
		await waitFor(async () => (await job(j.jobId)).status === "COMPLETED");
		const list = await exes(j.jobId);
		expect(list.map(e => [e.status, e.error_name, e.error_category])).toEqual([
			["FAILED", "node-shutdown", "SYSTEM"],
			["COMPLETED", null, null]
		]);
		// two executions, the first not counted: max_tries rose with num_exes
		expect(await job(j.jobId)).toMatchObject({ num_exes: 2, max_tries: 2 });
		// nor does it count against the node
		expect((await q(`SELECT is_paused FROM node WHERE id = $1`, [node]))[0].is_paused).toBe(
			false
		);
		const [log] = await q(`SELECT stderr FROM job_exe_log WHERE job_exe_id = $1`, [list[0].id]);
		expect(log.stderr).toBe("scale: the node was shut down\n");
	});

	it("records an execution lost from a draining node as node-shutdown, without counting the try", async () => {
		agent.behave = () => "hold";
		const type = await jobType();
		const node = await registerNode();
		const j = await queueJob(type, { maxTries: 1 });
		wake();
		await waitFor(() => agent.runs.length === 1);
		const [{ slave_id }] = await q(`SELECT slave_id FROM node WHERE id = $1`, [node]);
		// the agent shuts down: it says so, then is gone (its lease runs out) before it reports
		expect(
			await main.broker.call("nodes.drain", {
				agentId: main.broker.nodeID,
				slaveId: slave_id
			})
		).toEqual({ ok: true, nodeId: node });
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [node]);
		await q(`UPDATE job_exe SET started = now() - interval '1 hour' WHERE job_id = $1`, [
			j.jobId
		]);
		await waitFor(async () => (await exes(j.jobId)).length === 2);
		expect((await exes(j.jobId)).map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "node-shutdown"],
			["QUEUED", null]
		]);
		expect(await job(j.jobId)).toMatchObject({ status: "QUEUED", num_exes: 2, max_tries: 2 });
		// a node that is not draining loses it as node-lost, which counts (the job ends here)
		const other = await registerNode();
		await q(`UPDATE node SET is_active = false WHERE id = $1`, [node]);
		wake();
		await waitFor(() => agent.runs.length === 2);
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [
			other
		]);
		await q(
			`UPDATE job_exe SET started = now() - interval '1 hour' WHERE job_id = $1 AND status = 'RUNNING'`,
			[j.jobId]
		);
		await waitFor(async () => (await job(j.jobId)).status === "FAILED");
		expect((await exes(j.jobId)).map(e => [e.status, e.error_name])).toEqual([
			["FAILED", "node-shutdown"],
			["FAILED", "node-lost"]
		]);
	});
});

describe("leadership", () => {
	it("lets one scheduler lead at a time and hands over when the leader goes", async () => {
		const others = [
			await startBroker({ services: ["scheduler"], settings: FAST }),
			await startBroker({ services: ["scheduler"], settings: FAST })
		];
		const service = (s: Started) => s.broker.getLocalService("scheduler") as any;
		const leading = (list: Started[]) => list.filter(s => service(s)?.isLeader());
		const locks = async () =>
			Number(
				(
					await q<{ n: string }>(
						`SELECT count(*) AS n FROM pg_locks
						 WHERE locktype = 'advisory' AND granted AND objid = $1
							AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
						[0x5ca1e001]
					)
				)[0].n
			);
		const mainLock = service(main).lock;
		try {
			await sleep(600);
			expect(leading([main, ...others])).toEqual([main]);
			expect(await locks()).toBe(1);

			// The leader gives the lock up: another takes it.
			await mainLock.stop();
			const first = await waitFor(
				() => leading(others),
				l => l.length === 1,
				5000
			);
			await sleep(300);
			expect(leading([main, ...others])).toEqual(first);
			expect(await locks()).toBe(1);

			// The leader's lock connection dies: it stops leading and the last one takes over
			// (the dead one is made slow to try again, so the handover is the point here).
			service(first[0]).lock.retryMs = 60000;
			await q(
				`SELECT pg_terminate_backend(l.pid) FROM pg_locks l
				 WHERE l.locktype = 'advisory' AND l.granted AND l.objid = $1
					AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
				[0x5ca1e001]
			);
			const second = await waitFor(
				() => leading(others),
				l => l.length === 1 && l[0] !== first[0],
				5000
			);
			await sleep(300);
			expect(leading([main, ...others])).toEqual(second);

			// The new leader schedules.
			agent.behave = () => "hold";
			const type = await jobType();
			await registerNode();
			await queueJob(type);
			wake(second[0].broker);
			await waitFor(() => agent.runs.length === 1);
		} finally {
			for (const s of others) await s.stop().catch(() => undefined);
			await mainLock.start();
			await waitFor(() => service(main).isLeader(), undefined, 5000);
		}
	});
});
