import fs from "fs";
import os from "os";
import path from "path";
import { Errors, ServiceBroker, type ServiceSchema } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { loadServiceSchemas } from "../../lib/launch/services";
import type {
	ExecutionFinished,
	ExecutionStep,
	NodeHeartbeat,
	NodeRegistration
} from "../../lib/documents/agent-protocol";
import { startServices, type TestApi } from "../helpers/broker";
import {
	job,
	makeJobsExecutable,
	removeTempDirs,
	spec,
	stagedFile,
	tempDir,
	processesIn,
	sharedDir
} from "../fixtures/agent";

/**
 * The agent's protocol peer: `nodes` and `scheduler` services that record what the agent sends
 * and answer as lib/documents/agent-protocol.ts says (with switches to misbehave).
 */
class ControlPlane {
	registrations: NodeRegistration[] = [];
	heartbeats: NodeHeartbeat[] = [];
	steps: ExecutionStep[] = [];
	finished: ExecutionFinished[] = [];
	/** exeFinished calls refused with a server error before one is accepted */
	failFinished = 0;
	finishedAttempts = 0;
	/** exeFinished calls with more than one report are refused (422) */
	refuseBatches = false;
	/** how many reports each accepted exeFinished call carried */
	reportsPerCall: number[] = [];
	/** register calls refused before one is accepted */
	failRegister = 0;
	/** the next heartbeat is answered "unknown node" */
	forgetNode = false;
	/** executions the control plane has ended: heartbeat answers list those the agent holds */
	ended = new Set<number>();
	/** nodes.drain calls (an agent shutting down) */
	drains: { agentId: string; slaveId: string }[] = [];
	/** the node drains (a user's drain, or the agent's own once it said so) */
	draining = false;
	/** how long nodes.drain takes to answer */
	drainDelayMs = 0;

	nodes(): ServiceSchema {
		return {
			name: "nodes",
			actions: {
				register: (ctx: any) => {
					if (this.failRegister > 0) {
						this.failRegister--;
						throw new Errors.MoleculerError("the database is down", 500);
					}
					this.registrations.push(ctx.params);
					if (ctx.params.draining) this.draining = true;
					return this.draining ? { nodeId: 17, drain: true } : { nodeId: 17 };
				},
				drain: async (ctx: any) => {
					this.drains.push(ctx.params);
					this.draining = true;
					await new Promise(r => setTimeout(r, this.drainDelayMs));
					return { ok: true, nodeId: 17 };
				},
				heartbeat: (ctx: any) => {
					this.heartbeats.push(ctx.params);
					if (this.forgetNode) {
						this.forgetNode = false;
						return { ok: false, nodeId: null };
					}
					const held: number[] = ctx.params.running ?? [];
					if (ctx.params.draining) this.draining = true;
					const cancel = held.filter(id => this.ended.has(id));
					return this.draining
						? { ok: true, nodeId: 17, cancel, drain: true }
						: { ok: true, nodeId: 17, cancel };
				}
			}
		};
	}

	scheduler(): ServiceSchema {
		return {
			name: "scheduler",
			actions: {
				exeSteps: (ctx: any) => {
					this.steps.push(...ctx.params.steps);
					return { ok: true };
				},
				exeFinished: (ctx: any) => {
					this.finishedAttempts++;
					if (this.failFinished > 0) {
						this.failFinished--;
						throw new Errors.MoleculerError("the database is down", 500);
					}
					// the agent sends the reports of executions that ended together
					if (this.refuseBatches && ctx.params.reports.length > 1)
						throw new Errors.MoleculerClientError("one of them is refused", 422);
					this.finished.push(...ctx.params.reports);
					this.reportsPerCall.push(ctx.params.reports.length);
					return { ok: true };
				}
			}
		};
	}

	finishedOf(id: number): ExecutionFinished | undefined {
		return this.finished.find(f => f.jobExeId === id);
	}

	stepsOf(id: number): string[] {
		return this.steps.filter(s => s.jobExeId === id).map(s => `${s.step} ${s.event}`);
	}
}

interface Agent {
	broker: ServiceBroker;
	plane: ControlPlane;
	workDir: string;
	call<T = any>(action: string, params: unknown): Promise<T>;
}

const running: ServiceBroker[] = [];

/** A broker running the node-agent service as `SERVICES=node-agent` would, plus the peer. */
async function startAgent(
	settings: Record<string, unknown> = {},
	env: Record<string, string> = {},
	withPeer = true
): Promise<Agent> {
	const workDir = tempDir("agent");
	const config = loadConfig({
		LOG_LEVEL: "fatal",
		SERVICES: "node-agent",
		AGENT_WORK_DIR: workDir,
		...env
	});
	const broker = new ServiceBroker({
		...brokerOptions(config, null),
		nodeID: `agent-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
	});
	const [schema] = loadServiceSchemas({ ...config, port: 4567 });
	broker.createService({
		...schema,
		settings: {
			...schema.settings,
			heartbeatMs: 150,
			registerRetryMs: 150,
			finishRetryMs: 150,
			stepDelayMs: 20,
			killGraceMs: 300,
			...settings
		}
	});
	const plane = new ControlPlane();
	if (withPeer) {
		broker.createService(plane.nodes());
		broker.createService(plane.scheduler());
	}
	await broker.start();
	running.push(broker);
	return {
		broker,
		plane,
		workDir,
		call: (action, params) => broker.call(action, params, { nodeID: broker.nodeID })
	};
}

async function until(check: () => boolean, ms = 10000): Promise<void> {
	const deadline = Date.now() + ms;
	while (!check()) {
		if (Date.now() > deadline) throw new Error("timed out waiting");
		await new Promise(r => setTimeout(r, 20));
	}
}

beforeAll(() => makeJobsExecutable());

afterAll(async () => {
	for (const broker of running) await broker.stop();
	removeTempDirs();
});

describe("registration and heartbeats", () => {
	it("registers the node and heartbeats with the running executions", async () => {
		const a = await startAgent(
			{},
			{ AGENT_CPUS: "1.5", AGENT_MEM_MIB: "300", AGENT_DISK_MIB: "2" }
		);
		await until(() => a.plane.registrations.length === 1);
		const slaveId = fs.readFileSync(path.join(a.workDir, "slave_id"), "utf8").trim();
		expect(a.plane.registrations[0]).toEqual({
			agentId: a.broker.nodeID,
			slaveId,
			hostname: os.hostname(),
			// an agent alone serves no port: it claims none
			port: 0,
			resources: { cpus: Math.min(1.5, os.cpus().length), mem: 300, disk: 2 },
			docker: expect.objectContaining({ pull: false, privileged: false })
		});
		await until(() => a.plane.heartbeats.length >= 2);
		expect(a.plane.heartbeats[0]).toEqual({
			agentId: a.broker.nodeID,
			slaveId,
			resources: { cpus: Math.min(1.5, os.cpus().length), mem: 300, disk: 2 },
			running: [],
			docker: expect.objectContaining({ pull: false, privileged: false })
		});

		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", s);
		const before = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > before + 1);
		expect(a.plane.heartbeats.at(-1)!.running).toEqual([s.jobExeId]);
		await a.call("node-agent.cancel", { jobExeId: s.jobExeId });
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		const after = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > after + 1);
		expect(a.plane.heartbeats.at(-1)!.running).toEqual([]);
	});

	it("cancels an execution a heartbeat answer says has ended on the control plane", async () => {
		const a = await startAgent();
		await until(() => a.plane.registrations.length === 1);
		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		const kept = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", s);
		await a.call("node-agent.run", kept);
		await until(() => a.plane.stepsOf(s.jobExeId).includes("main started"));
		// canceled on the control plane after the cancel call was lost, say
		a.plane.ended.add(s.jobExeId);
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)).toMatchObject({
			status: "CANCELED",
			stdout: expect.stringMatching(/^pid \d+\nsleeping 30\n$/)
		});
		const beats = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > beats + 1);
		expect(a.plane.heartbeats.at(-1)!.running).toEqual([kept.jobExeId]);
		expect(a.plane.finishedOf(kept.jobExeId)).toBeUndefined();
		await a.call("node-agent.cancel", { jobExeId: kept.jobExeId });
	});

	it("keeps its slave id across restarts", async () => {
		const a = await startAgent();
		await until(() => a.plane.registrations.length === 1);
		await a.broker.stop();
		const b = await startAgent({}, { AGENT_WORK_DIR: a.workDir });
		await until(() => b.plane.registrations.length === 1);
		expect(b.plane.registrations[0].slaveId).toBe(a.plane.registrations[0].slaveId);
		expect(b.plane.registrations[0].agentId).not.toBe(a.plane.registrations[0].agentId);
	});

	it("registers again when a heartbeat answer does not know the node", async () => {
		const a = await startAgent();
		await until(() => a.plane.heartbeats.length >= 1);
		a.plane.forgetNode = true;
		await until(() => a.plane.registrations.length === 2);
		const beats = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > beats);
	});

	it("waits for the nodes service, and keeps heartbeating through failures", async () => {
		const a = await startAgent({}, {}, false);
		await new Promise(r => setTimeout(r, 400));
		a.plane.failRegister = 2;
		a.broker.createService(a.plane.nodes());
		await until(() => a.plane.registrations.length === 1);
		expect(a.plane.failRegister).toBe(0);
		await until(() => a.plane.heartbeats.length >= 1);
		// the control plane goes away and comes back: the agent carries on
		await a.broker.destroyService(a.broker.getLocalService("nodes")!);
		await new Promise(r => setTimeout(r, 400));
		const beats = a.plane.heartbeats.length;
		a.broker.createService(a.plane.nodes());
		await until(() => a.plane.heartbeats.length > beats);
		expect(a.plane.registrations).toHaveLength(1);
	});

	it("retries a failed registration every 2 s by default (npm start's settings)", async () => {
		const workDir = tempDir("agent");
		const app: TestApi = await startServices("", ["node-agent"], {
			AGENT_WORK_DIR: workDir,
			LOG_LEVEL: "fatal"
		});
		try {
			const plane = new ControlPlane();
			plane.failRegister = 1;
			const started = Date.now();
			app.broker.createService(plane.nodes());
			await until(() => plane.registrations.length === 1, 8000);
			const took = Date.now() - started;
			expect(took).toBeGreaterThanOrEqual(1900);
			expect(took).toBeLessThan(5000);
			expect(plane.registrations[0].agentId).toBe(app.broker.nodeID);
		} finally {
			await app.stop();
		}
	});
});

describe("running executions", () => {
	let a: Agent;
	beforeAll(async () => {
		a = await startAgent();
	});

	it("runs, reports its steps, then its result with the products", async () => {
		const ws = tempDir("ws");
		const input = stagedFile(tempDir("src"), "input.txt", "abc\n", 5);
		const s = spec({
			command: job("write-output.sh"),
			commandArguments: "${input_file} ${job_output_dir}",
			inputData: [{ name: "input_file", type: "file" }],
			outputData: [{ name: "result", type: "file" }],
			inputs: { input_file: { files: [input] } },
			workspaceDir: ws
		});
		expect(await a.call("node-agent.run", s)).toMatchObject({ accepted: true });
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		const finished = a.plane.finishedOf(s.jobExeId)!;
		expect(finished).toMatchObject({
			jobExeId: s.jobExeId,
			agentId: a.broker.nodeID,
			status: "COMPLETED",
			exitCode: 0,
			errorName: null,
			products: [
				{
					outputName: "result",
					workspaceId: 7,
					filePath: "my-job/1.0.0/42/result.txt",
					fileName: "result.txt",
					mediaType: "text/plain",
					size: 4
				}
			],
			parseResults: [{ filename: "input.txt", data_types: ["parsed"] }],
			stderr: "a warning\n"
		});
		expect(Object.keys(finished.steps).sort()).toEqual(["main", "post", "pre"]);
		// the steps sent while it ran come first and in order; the report carries them all
		const sent = a.plane.stepsOf(s.jobExeId);
		const all = [
			"pre started",
			"pre completed",
			"main started",
			"main completed",
			"post started",
			"post completed"
		];
		expect(sent).toEqual(all.slice(0, sent.length));
		expect(finished.commandArguments).toMatch(/inputs\/input_file\/input.txt .*\/outputs$/);
		expect(fs.readFileSync(path.join(ws, "my-job/1.0.0/42/result.txt"), "utf8")).toBe("ABC\n");
		// the task directory goes once the result is acknowledged
		await until(() => !fs.existsSync(path.join(a.workDir, "tasks", String(s.jobExeId))));
	});

	it("reports a failure with its exit code", async () => {
		const s = spec({ command: job("exit-3.sh"), commandArguments: "" });
		await a.call("node-agent.run", s);
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)).toMatchObject({
			status: "FAILED",
			exitCode: 3,
			errorName: null,
			stdout: "about to fail\n"
		});
	});

	it("refuses a malformed execution spec", async () => {
		const s: any = spec({ command: "/bin/true", commandArguments: "" });
		delete s.interface;
		await expect(a.call("node-agent.run", s)).rejects.toMatchObject({
			type: "VALIDATION_ERROR"
		});
		await expect(
			a.call("node-agent.run", {
				...spec({ command: "/bin/true", commandArguments: "" }),
				jobExeId: "x"
			})
		).rejects.toMatchObject({ type: "VALIDATION_ERROR" });
	});

	it("runs every execution of a batch, and refuses a batch with a malformed one whole", async () => {
		const batch = [
			spec({ command: "/bin/true", commandArguments: "" }),
			spec({ command: job("exit-3.sh"), commandArguments: "" })
		];
		// the answer tells the scheduler's launch window the agent's backlog: both, not launched
		expect(await a.call("node-agent.run", { executions: batch })).toEqual({
			accepted: true,
			launch: { rate: expect.any(Number), backlog: 2 }
		});
		await until(() => batch.every(s => a.plane.finishedOf(s.jobExeId) !== undefined));
		expect(batch.map(s => a.plane.finishedOf(s.jobExeId)!.status)).toEqual([
			"COMPLETED",
			"FAILED"
		]);

		const good = spec({ command: "/bin/true", commandArguments: "" });
		const bad: any = spec({ command: "/bin/true", commandArguments: "" });
		delete bad.interface;
		await expect(a.call("node-agent.run", { executions: [good, bad] })).rejects.toMatchObject({
			type: "VALIDATION_ERROR"
		});
		await expect(a.call("node-agent.run", { executions: [] })).rejects.toMatchObject({
			type: "VALIDATION_ERROR"
		});
		await new Promise(r => setTimeout(r, 300));
		expect(a.plane.finishedOf(good.jobExeId)).toBeUndefined();
		expect(a.plane.stepsOf(good.jobExeId)).toEqual([]);
	});

	/** A completed execution's report in this agent's name, for an execution it never ran. */
	const completed = (stdout = ""): ExecutionFinished => ({
		jobExeId: spec({ command: "/bin/true", commandArguments: "" }).jobExeId,
		agentId: a.broker.nodeID,
		status: "COMPLETED",
		exitCode: 0,
		products: [],
		resultsManifest: null,
		parseResults: [],
		stdout,
		stderr: "",
		steps: {}
	});

	it("sends the reports of a refused batch again one by one", async () => {
		const reports = [completed(), completed()];
		const ids = reports.map(r => r.jobExeId);
		const attempts = a.plane.finishedAttempts;
		a.plane.refuseBatches = true;
		try {
			// ending in one turn of the event loop, the two go in one call
			const { reporter } = a.broker.getLocalService("node-agent") as any;
			await Promise.all(reports.map(r => reporter.finish(r)));
		} finally {
			a.plane.refuseBatches = false;
		}
		// the batch refused, then each alone, accepted
		expect(a.plane.finishedAttempts - attempts).toBe(3);
		expect(ids.map(id => a.plane.finishedOf(id)?.status)).toEqual(["COMPLETED", "COMPLETED"]);
	});

	it("sends reports ending together in one call, unless their logs make it too large", async () => {
		const { reporter } = a.broker.getLocalService("node-agent") as any;
		const before = a.plane.reportsPerCall.length;
		// in one turn of the event loop: three small reports, then two with 200 KB of logs each
		await Promise.all([
			reporter.finish(completed("a")),
			reporter.finish(completed("b")),
			reporter.finish(completed("c"))
		]);
		const big = [completed("x".repeat(200 * 1024)), completed("y".repeat(200 * 1024))];
		await Promise.all(big.map(r => reporter.finish(r)));
		expect(a.plane.reportsPerCall.slice(before)).toEqual([3, 1, 1]);
		expect(big.map(r => a.plane.finishedOf(r.jobExeId)?.stdout.length)).toEqual([
			200 * 1024,
			200 * 1024
		]);
	});

	it("runs a repeated execution id once", async () => {
		const counter = path.join(sharedDir("count"), "runs");
		const s = spec({ command: "/bin/sh", commandArguments: `-c 'echo run >> ${counter}'` });
		const answers = await Promise.all([
			a.call("node-agent.run", s),
			a.call("node-agent.run", s)
		]);
		expect(answers).toMatchObject([{ accepted: true }, { accepted: true }]);
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(await a.call("node-agent.run", s)).toMatchObject({ accepted: true });
		await new Promise(r => setTimeout(r, 300));
		expect(a.plane.finished.filter(f => f.jobExeId === s.jobExeId)).toHaveLength(1);
		expect(a.plane.stepsOf(s.jobExeId).length).toBeLessThanOrEqual(6);
		expect(fs.readFileSync(counter, "utf8")).toBe("run\n");
	});

	it("serves logs while running, and cancels", async () => {
		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", s);
		await until(() => a.plane.stepsOf(s.jobExeId).includes("main started"));
		let logs: any;
		const deadline = Date.now() + 5000;
		do {
			logs = await a.call("node-agent.logs", { jobExeId: s.jobExeId });
		} while (!logs.stdout.includes("sleeping") && Date.now() < deadline);
		expect(logs).toEqual({
			stdout: expect.stringMatching(/^pid \d+\nsleeping 30\n$/),
			stderr: "",
			is_finished: false
		});
		expect(await a.call("node-agent.cancel", { jobExeId: s.jobExeId })).toEqual({
			found: true
		});
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)).toMatchObject({
			status: "CANCELED",
			exitCode: null,
			stdout: logs.stdout
		});
		expect(await a.call("node-agent.cancel", { jobExeId: s.jobExeId })).toEqual({
			found: false
		});
	});

	it("does not run an execution whose cancel overtook its run, and reports it CANCELED", async () => {
		const counter = path.join(sharedDir("count"), "runs");
		const s = spec({ command: "/bin/sh", commandArguments: `-c 'echo run >> ${counter}'` });
		expect(await a.call("node-agent.cancel", { jobExeId: s.jobExeId })).toEqual({
			found: false
		});
		expect(await a.call("node-agent.run", s)).toMatchObject({ accepted: true });
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)).toMatchObject({
			status: "CANCELED",
			exitCode: null,
			stdout: "",
			products: []
		});
		expect(a.plane.stepsOf(s.jobExeId)).toEqual([]);
		await new Promise(r => setTimeout(r, 200));
		expect(fs.existsSync(counter)).toBe(false);
		expect(a.plane.finished.filter(f => f.jobExeId === s.jobExeId)).toHaveLength(1);
	});

	it("answers NOT_FOUND for the logs of an execution it does not hold", async () => {
		await expect(a.call("node-agent.logs", { jobExeId: 987654 })).rejects.toMatchObject({
			code: 404,
			type: "NOT_FOUND"
		});
		expect(await a.call("node-agent.cancel", { jobExeId: 987654 })).toEqual({ found: false });
	});

	it("fails a docker job type cleanly when no Docker engine runs here", async () => {
		const s = spec({
			command: "echo",
			commandArguments: "hi",
			jobType: { usesDocker: true, dockerImage: "alpine:3" }
		});
		await a.call("node-agent.run", s);
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)).toMatchObject({
			status: "FAILED",
			errorName: "docker-task-launch",
			errorDetail: expect.stringMatching(/no Docker engine answers on this node/)
		});
	});

	it("retries exeFinished until the scheduler answers", async () => {
		a.plane.failFinished = 3;
		const attempts = a.plane.finishedAttempts;
		const s = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", s);
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedAttempts - attempts).toBe(4);
	});

	it("keeps a result through a restart of the scheduler service", async () => {
		await a.broker.destroyService(a.broker.getLocalService("scheduler")!);
		const s = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", s);
		await new Promise(r => setTimeout(r, 500));
		// held, and listed as running in heartbeats meanwhile
		const beats = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > beats);
		expect(a.plane.heartbeats.at(-1)!.running).toContain(s.jobExeId);
		a.broker.createService(a.plane.scheduler());
		await until(() => a.plane.finishedOf(s.jobExeId) !== undefined);
		expect(a.plane.finishedOf(s.jobExeId)!.status).toBe("COMPLETED");
		// steps sent while the scheduler was away were lost (best effort), the result was not
		expect(a.plane.finishedOf(s.jobExeId)!.steps.main!.exitCode).toBe(0);
	});
});

describe("stopping the agent", () => {
	it("terminates running tasks and reports nothing for them", async () => {
		const a = await startAgent();
		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", s);
		const stdout = path.join(a.workDir, "tasks", String(s.jobExeId), "stdout");
		await until(() => fs.existsSync(stdout) && /pid \d+/.test(fs.readFileSync(stdout, "utf8")));
		const taskDir = path.dirname(stdout);
		expect(processesIn(taskDir)).not.toEqual([]);
		await a.broker.stop();
		expect(processesIn(taskDir)).toEqual([]);
		expect(a.plane.finished).toEqual([]);
	});
});

describe("draining", () => {
	it("on its shutdown, says so first, hands runs back, lets what ends in time end and stops the rest", async () => {
		const a = await startAgent({ drainReportMs: 1000 }, { AGENT_DRAIN_S: "1" });
		await until(() => a.plane.registrations.length === 1);
		const short = spec({ command: job("sleep.sh"), commandArguments: "0.3" });
		const long = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", { executions: [short, long] });
		await until(() => a.plane.stepsOf(long.jobExeId).includes("main started"));
		const service = a.broker.getLocalService("node-agent") as any;
		const started = Date.now();
		const drained = service.drainBeforeStop("the agent received SIGTERM");
		await until(() => a.plane.drains.length === 1);
		expect(a.plane.drains[0]).toEqual({
			agentId: a.broker.nodeID,
			slaveId: a.plane.registrations[0].slaveId
		});
		// a run placed before the control plane knew is handed back, not started
		const late = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", late);
		await drained;
		expect(Date.now() - started).toBeGreaterThanOrEqual(950);
		expect(Date.now() - started).toBeLessThan(3000);
		expect(a.plane.finishedOf(short.jobExeId)?.status).toBe("COMPLETED");
		expect(a.plane.finishedOf(late.jobExeId)).toMatchObject({
			status: "FAILED",
			errorName: "node-shutdown",
			stderr: "scale: the node is draining (the agent received SIGTERM): handed back before it started\n"
		});
		const stopped = a.plane.finishedOf(long.jobExeId)!;
		expect(stopped).toMatchObject({ status: "FAILED", errorName: "node-shutdown" });
		expect(stopped.stderr).toMatch(
			/(^|\n)scale: the node was shut down \(the agent received SIGTERM\) and the execution had not ended within the drain time of 1 s: stopped while its process ran\n$/
		);
		// its heartbeats say it drains, and an answer without the drain does not call it off
		a.plane.draining = false;
		const beats = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > beats + 1);
		expect(a.plane.heartbeats.at(-1)!.draining).toBe(true);
		const after = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", after);
		await until(() => a.plane.finishedOf(after.jobExeId) !== undefined);
		expect(a.plane.finishedOf(after.jobExeId)!.errorName).toBe("node-shutdown");
	});

	it("reports the runs handed back while the control plane was being told, before it stops", async () => {
		const a = await startAgent();
		await until(() => a.plane.registrations.length === 1);
		a.plane.drainDelayMs = 300;
		const service = a.broker.getLocalService("node-agent") as any;
		const drained = service.drainBeforeStop("the agent received SIGTERM");
		await new Promise(r => setTimeout(r, 100));
		// placed before the control plane knew (its drain call not answered yet)
		const late = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", late);
		await drained;
		expect(a.plane.drains).toHaveLength(1);
		expect(a.plane.finishedOf(late.jobExeId)).toMatchObject({
			status: "FAILED",
			errorName: "node-shutdown"
		});
	});

	it("stops at once when nothing runs, even with no control plane to tell", async () => {
		const a = await startAgent({ drainAnnounceMs: 300 }, {}, false);
		const service = a.broker.getLocalService("node-agent") as any;
		const started = Date.now();
		await service.drainBeforeStop("the agent received SIGTERM");
		expect(Date.now() - started).toBeLessThan(250);
	});

	it("drains for a user when a heartbeat answer says so, keeps running, and takes runs again after", async () => {
		const a = await startAgent({}, { AGENT_DRAIN_S: "0.5" });
		await until(() => a.plane.registrations.length === 1);
		const long = spec({ command: job("sleep.sh"), commandArguments: "30" });
		await a.call("node-agent.run", long);
		await until(() => a.plane.stepsOf(long.jobExeId).includes("main started"));
		a.plane.draining = true;
		await until(() => a.plane.finishedOf(long.jobExeId) !== undefined, 5000);
		expect(a.plane.finishedOf(long.jobExeId)).toMatchObject({
			status: "FAILED",
			errorName: "node-shutdown",
			errorDetail:
				"the node was shut down (a user drains the node) and the execution had not ended within the drain time of 0.5 s: stopped while its process ran"
		});
		const refused = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", refused);
		await until(() => a.plane.finishedOf(refused.jobExeId) !== undefined);
		expect(a.plane.finishedOf(refused.jobExeId)!.errorName).toBe("node-shutdown");
		expect(a.plane.drains).toEqual([]);
		// the drain ends: the next heartbeat answer says so
		a.plane.draining = false;
		const beats = a.plane.heartbeats.length;
		await until(() => a.plane.heartbeats.length > beats + 1);
		const taken = spec({ command: "/bin/true", commandArguments: "" });
		await a.call("node-agent.run", taken);
		await until(() => a.plane.finishedOf(taken.jobExeId) !== undefined);
		expect(a.plane.finishedOf(taken.jobExeId)!.status).toBe("COMPLETED");
		expect(a.plane.heartbeats.every(h => h.draining === undefined)).toBe(true);
	});
});
