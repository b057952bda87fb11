import { randomUUID } from "crypto";
import { connect, type NatsConnection } from "nats";
import { completedReport } from "./instant-agent";
import type { ExecutionSpec, NodeHeartbeatAnswer, Resources } from "../../lib/agent/protocol";
import { packetSubject, subscriptionSubject } from "../../lib/transport/subjects";

/**
 * Many node agents in one process, for P6 (Nomad's C1M measured its scheduler against simulated
 * clients the same way). Each simulated agent is a Moleculer node as far as the cluster can tell:
 * it speaks Moleculer's transit protocol (version 5, the JSON serializer) on the cluster's NATS
 * subjects (lib/transport/subjects.ts), over one connection shared by all of them, so a thousand agents cost the
 * machine a few megabytes instead of a thousand brokers. Each one
 *   - announces a `node-agent` service (INFO, again on DISCOVER) and sends HEARTBEATs;
 *   - registers its node and sends `nodes.heartbeat` with the executions it holds, as the real
 *     agent does (lib/agent/protocol.ts);
 *   - accepts `node-agent.run` at once and holds the execution until told to finish it
 *     (`finishAll`), then reports it COMPLETED with `scheduler.exeFinished`.
 * It does not ask the sender of a run whether it leads (the real agent does, once per sender):
 * the scheduler's side of a placement is what is measured.
 */

const PROTOCOL_VERSION = "5";

interface Pending {
	resolve(data: unknown): void;
	reject(error: Error): void;
	timer: NodeJS.Timeout;
}

export interface RunReceived {
	agentId: string;
	jobExeId: number;
	/** performance.now() when the request arrived */
	at: number;
}

export interface SimulatedAgentsOptions {
	servers: string;
	user?: string;
	pass?: string;
	/** the broker's namespace (subjects are MOL-<namespace>.<packet type>.<role>.<sender>[.<target>]) */
	namespace: string;
	count: number;
	/** nodeID of the control-plane node that runs the nodes and scheduler services */
	controlPlane: string;
	resources: Resources;
	/** nodes.heartbeat period (the real agent's heartbeatMs) */
	heartbeatMs: number;
	/** Moleculer HEARTBEAT period (the broker's heartbeatInterval) */
	brokerHeartbeatMs: number;
	callTimeoutMs?: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class SimulatedAgents {
	readonly ids: string[];
	/** every execution run requests carried, in arrival order */
	readonly runs: RunReceived[] = [];
	/** runs received for an execution an agent had been sent before */
	duplicateRuns = 0;
	private readonly held = new Map<string, Set<number>>();
	private readonly slaveIds = new Map<string, string>();
	private readonly instanceIds = new Map<string, string>();
	private readonly pending = new Map<string, Pending>();
	private readonly seen = new Set<number>();
	private readonly timers: NodeJS.Timeout[] = [];
	private nc: NatsConnection | null = null;
	private readonly prefix: string;
	private runWaiters: { n: number; resolve(): void }[] = [];

	constructor(private readonly opts: SimulatedAgentsOptions) {
		this.prefix = `MOL-${opts.namespace}`;
		const run = randomUUID().slice(0, 8);
		this.ids = Array.from({ length: opts.count }, (_, i) => `sim-${run}-${i}`);
		for (const id of this.ids) {
			this.held.set(id, new Set());
			this.slaveIds.set(id, randomUUID());
			this.instanceIds.set(id, randomUUID());
		}
	}

	/** Connects, subscribes for every agent and announces them all. */
	async start(): Promise<void> {
		this.nc = await connect({
			servers: this.opts.servers,
			user: this.opts.user,
			pass: this.opts.pass,
			// one connection carries a thousand nodes' traffic
			maxPingOut: 10
		});
		for (const id of this.ids) {
			this.subscribe(subscriptionSubject("REQ", id, this.prefix), p => this.onRequest(id, p));
			this.subscribe(subscriptionSubject("RES", id, this.prefix), p => this.onResponse(p));
			this.subscribe(subscriptionSubject("DISCOVER", id, this.prefix), p =>
				this.sendInfo(id, p.sender)
			);
			this.subscribe(subscriptionSubject("PING", id, this.prefix), p =>
				this.publish("PONG", id, p.sender, {
					time: p.time,
					id: p.id,
					arrived: Date.now()
				})
			);
		}
		this.subscribe(subscriptionSubject("DISCOVER", null, this.prefix), p => {
			for (const id of this.ids) this.sendInfo(id, p.sender);
		});
		await this.nc.flush();
		for (const id of this.ids) this.sendInfo(id, null);
		// Moleculer heartbeats, spread over the period as independent nodes' would be
		this.every(this.opts.brokerHeartbeatMs, id =>
			this.publish("HEARTBEAT", id, null, { cpu: 1 })
		);
	}

	/** Registers every agent's node (`concurrency` calls at a time), then keeps them heard from. */
	async register(concurrency = 50): Promise<void> {
		let next = 0;
		const worker = async () => {
			while (next < this.ids.length) {
				const id = this.ids[next++];
				await this.call(id, "nodes.register", {
					agentId: id,
					slaveId: this.slaveIds.get(id),
					hostname: id,
					port: 0,
					resources: this.opts.resources
				});
			}
		};
		await Promise.all(Array.from({ length: concurrency }, worker));
		this.every(this.opts.heartbeatMs, id => void this.heartbeat(id));
	}

	/** Resolves once `n` executions have arrived in run requests. */
	whenRuns(n: number): Promise<void> {
		if (this.runs.length >= n) return Promise.resolve();
		return new Promise(resolve => this.runWaiters.push({ n, resolve }));
	}

	/** Reports every held execution COMPLETED, `concurrency` reports in flight at a time. */
	async finishAll(concurrency = 200): Promise<number> {
		const work: [string, number][] = [];
		for (const [id, exes] of this.held) for (const exe of exes) work.push([id, exe]);
		let next = 0;
		const worker = async () => {
			while (next < work.length) {
				const [id, jobExeId] = work[next++];
				const report = completedReport(jobExeId, id);
				// the real agent retries a report until it is answered
				for (;;) {
					try {
						await this.call(id, "scheduler.exeFinished", report);
						break;
					} catch {
						await new Promise(r => setTimeout(r, 500));
					}
				}
				this.held.get(id)!.delete(jobExeId);
			}
		};
		await Promise.all(Array.from({ length: concurrency }, worker));
		return work.length;
	}

	async stop(): Promise<void> {
		for (const t of this.timers) clearInterval(t);
		if (!this.nc) return;
		for (const id of this.ids) this.publish("DISCONNECT", id, null, {});
		await this.nc.drain();
		this.nc = null;
	}

	// ---- the protocol ---------------------------------------------------------------------

	private subscribe(subject: string, handle: (payload: any) => void): void {
		this.nc!.subscribe(subject, {
			callback: (err, msg) => {
				if (err) return;
				let payload: any;
				try {
					payload = JSON.parse(decoder.decode(msg.data));
				} catch {
					return;
				}
				handle(payload);
			}
		});
	}

	/** A packet of `type` from agent `sender` to `target` (or to every node). */
	private publish(
		type: string,
		sender: string,
		target: string | null,
		payload: Record<string, unknown>
	): void {
		this.nc?.publish(
			packetSubject(type, "agent", sender, target, this.prefix),
			encoder.encode(JSON.stringify({ ...payload, ver: PROTOCOL_VERSION, sender }))
		);
	}

	/** The INFO a real agent's broker sends: its services, as the registry reads them. */
	private sendInfo(id: string, target: string | null): void {
		const action = (name: string) => ({ name: `node-agent.${name}`, rawName: name });
		this.publish("INFO", id, target, {
			services: [
				{
					name: "node-agent",
					fullName: "node-agent",
					settings: {},
					metadata: {},
					actions: {
						"node-agent.run": action("run"),
						"node-agent.cancel": action("cancel"),
						"node-agent.logs": action("logs")
					},
					events: {}
				}
			],
			ipList: ["127.0.0.1"],
			hostname: id,
			client: { type: "nodejs", version: "0.15.0", langVersion: process.version },
			config: {},
			instanceID: this.instanceIds.get(id),
			metadata: {},
			seq: 1
		});
	}

	private onRequest(id: string, p: any): void {
		let data: unknown;
		if (p.action === "node-agent.run") {
			// the executions placed on this agent together
			for (const spec of p.params.executions as ExecutionSpec[]) {
				if (this.seen.has(spec.jobExeId)) this.duplicateRuns++;
				this.seen.add(spec.jobExeId);
				this.held.get(id)!.add(spec.jobExeId);
				this.runs.push({ agentId: id, jobExeId: spec.jobExeId, at: performance.now() });
			}
			this.runWaiters = this.runWaiters.filter(w => {
				if (this.runs.length < w.n) return true;
				w.resolve();
				return false;
			});
			data = { accepted: true };
		} else if (p.action === "node-agent.cancel") {
			data = { found: this.held.get(id)!.delete(p.params?.jobExeId) };
		} else if (p.action === "node-agent.logs") {
			data = { stdout: "", stderr: "", is_finished: true };
		} else {
			this.publish("RES", id, p.sender, {
				id: p.id,
				meta: {},
				success: false,
				data: null,
				error: { name: "ServiceNotFoundError", message: p.action, code: 404 }
			});
			return;
		}
		this.publish("RES", id, p.sender, {
			id: p.id,
			meta: {},
			success: true,
			data
		});
	}

	private onResponse(p: any): void {
		const call = this.pending.get(p.id);
		if (!call) return;
		this.pending.delete(p.id);
		clearTimeout(call.timer);
		if (p.success) call.resolve(p.data);
		else call.reject(new Error(p.error?.message ?? "the call failed"));
	}

	private async heartbeat(id: string): Promise<void> {
		try {
			const answer = (await this.call(id, "nodes.heartbeat", {
				agentId: id,
				slaveId: this.slaveIds.get(id),
				resources: this.opts.resources,
				running: [...this.held.get(id)!]
			})) as NodeHeartbeatAnswer;
			for (const exe of answer.cancel ?? []) this.held.get(id)!.delete(exe);
		} catch {
			// the next beat tries again, as the real agent's does
		}
	}

	/** A call from agent `id` to the control plane, answered on that agent's RES subject. */
	private call(id: string, action: string, params: unknown): Promise<unknown> {
		const requestId = randomUUID();
		const timeout = this.opts.callTimeoutMs ?? 10000;
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(requestId);
				reject(new Error(`${action} from ${id}: no answer in ${timeout} ms`));
			}, timeout);
			this.pending.set(requestId, { resolve, reject, timer });
			this.publish("REQ", id, this.opts.controlPlane, {
				id: requestId,
				action,
				params,
				meta: {},
				headers: {},
				timeout,
				level: 1,
				tracing: null,
				parentID: null,
				requestID: requestId,
				caller: null,
				stream: false
			});
		});
	}

	/** Runs `fn` for each agent once per `periodMs`, the agents spread evenly over the period. */
	private every(periodMs: number, fn: (id: string) => void): void {
		const slices = 20;
		const perSlice = Math.ceil(this.ids.length / slices);
		let slice = 0;
		this.timers.push(
			setInterval(() => {
				const from = slice * perSlice;
				for (const id of this.ids.slice(from, from + perSlice)) fn(id);
				slice = (slice + 1) % slices;
			}, periodMs / slices)
		);
	}
}
