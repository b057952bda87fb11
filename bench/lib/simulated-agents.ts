import { randomUUID } from "crypto";
import { connect, type NatsConnection } from "nats";
import { completedReport } from "./instant-agent";
import type {
	ExecutionSpec,
	NodeHeartbeatAnswer,
	Resources
} from "../../lib/documents/agent-protocol";
import { packetSubject, subscriptionSubjects } from "../../lib/transport/subjects";

/**
 * Many node agents in one process, for P6 (Nomad's C1M measured its scheduler against simulated
 * clients the same way). Each simulated agent is a Moleculer node as far as the cluster can tell:
 * it speaks Moleculer's transit protocol (version 5, the JSON serializer) on the cluster's NATS
 * subjects (lib/transport/subjects.ts), so a thousand agents cost the machine a process instead
 * of a thousand brokers. With `connectionPerAgent`, each agent has a NATS connection of its own,
 * as its own user, and nats-server holds it to that user's permissions (publish under its own node
 * ID and role only, subscribe to the control planes' and the operator's packets to it and
 * broadcast); without, all share one
 * connection as one user. Each one
 *   - announces a `node-agent` service (INFO, again on DISCOVER) and sends HEARTBEATs;
 *   - registers its node and sends `nodes.heartbeat` with the executions it holds, as the real
 *     agent does (lib/documents/agent-protocol.ts);
 *   - accepts `node-agent.run` at once and holds the execution until told to finish it
 *     (`finishAll`), then reports it COMPLETED with `scheduler.exeFinished`.
 * It does not ask the sender of a run whether it leads (the real agent does, once per sender):
 * the scheduler's side of a placement is what is measured. Each agent subscribes to what a real
 * agent does (`subscriptionSubjects`, role agent): the control planes' and the operator's packets
 * to it. Of the broadcasts it hears only DISCOVER, on the first agent's connection, answered by
 * every agent on its own (a real agent also reads the control planes' INFO and HEARTBEAT: a few
 * nodes' worth); the agents' periodic packets go from two timers.
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
	/** each agent's NATS user and password (the same for all where they share one user) */
	credentials: (agentId: string) => { user: string; pass: string };
	/**
	 * a NATS connection per agent, as its user (as real agents connect); false: one for all, as
	 * the first agent's user, which must then be allowed to publish as every agent
	 */
	connectionPerAgent: boolean;
	/** the CA of nats-server's certificate, when it requires TLS */
	tlsCaFile?: string;
	/** the broker's namespace (subjects are MOL-<namespace>.<packet type>.<role>.<sender>[.<target>]) */
	namespace: string;
	/** the agents' node IDs (simulatedAgentIds) */
	ids: string[];
	/** nodeID of the control-plane node that runs the nodes and scheduler services */
	controlPlane: string;
	resources: Resources;
	/** nodes.heartbeat period (the real agent's heartbeatMs) */
	heartbeatMs: number;
	/** Moleculer HEARTBEAT period (the broker's heartbeatInterval) */
	brokerHeartbeatMs: number;
	callTimeoutMs?: number;
}

/** `count` node IDs for simulated agents, unique to this run. */
export function simulatedAgentIds(count: number): string[] {
	const run = randomUUID().slice(0, 8);
	return Array.from({ length: count }, (_, i) => `sim-${run}-${i}`);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class SimulatedAgents {
	readonly ids: string[];
	/** every execution run requests carried, in arrival order */
	readonly runs: RunReceived[] = [];
	/** runs received for an execution an agent had been sent before */
	duplicateRuns = 0;
	/** subscriptions NATS refused (a permission the agent lacks) */
	subscriptionErrors = 0;
	/** `node-agent.run` requests received (each carries the executions placed together) */
	runCalls = 0;
	/** packets received and sent by all the agents */
	packetsIn = 0;
	packetsOut = 0;
	private readonly held = new Map<string, Set<number>>();
	private readonly slaveIds = new Map<string, string>();
	private readonly instanceIds = new Map<string, string>();
	private readonly pending = new Map<string, Pending>();
	private readonly seen = new Set<number>();
	private readonly timers: NodeJS.Timeout[] = [];
	/** each agent's connection (all the same one without `connectionPerAgent`) */
	private readonly conns = new Map<string, NatsConnection>();
	private readonly prefix: string;
	private runWaiters: { n: number; resolve(): void }[] = [];

	constructor(private readonly opts: SimulatedAgentsOptions) {
		this.prefix = `MOL-${opts.namespace}`;
		this.ids = opts.ids;
		for (const id of this.ids) {
			this.held.set(id, new Set());
			this.slaveIds.set(id, randomUUID());
			this.instanceIds.set(id, randomUUID());
		}
	}

	/** The NATS connections open (one, or one per agent). */
	get connections(): number {
		return new Set(this.conns.values()).size;
	}

	/**
	 * Connects (`concurrency` connections opening at a time), subscribes for every agent and
	 * announces them all.
	 */
	async start(concurrency = 50): Promise<void> {
		const open = (user?: string, pass?: string) =>
			connect({
				servers: this.opts.servers,
				user,
				pass,
				...(this.opts.tlsCaFile ? { tls: { caFile: this.opts.tlsCaFile } } : {}),
				// a loaded machine may hold a pong back for a while
				maxPingOut: 10
			});
		const credentials = this.opts.credentials;
		if (this.opts.connectionPerAgent) {
			let next = 0;
			const worker = async () => {
				while (next < this.ids.length) {
					const id = this.ids[next++];
					const { user, pass } = credentials(id);
					this.conns.set(id, await open(user, pass));
				}
			};
			await Promise.all(Array.from({ length: concurrency }, worker));
		} else {
			const { user, pass } = credentials(this.ids[0]);
			const shared = await open(user, pass);
			for (const id of this.ids) this.conns.set(id, shared);
		}
		for (const id of this.ids)
			for (const subject of subscriptionSubjects("*", "agent", id, true, this.prefix))
				this.subscribe(id, subject, (type, p) => {
					if (type === "REQ") this.onRequest(id, p);
					else if (type === "RES") this.onResponse(p);
					else if (type === "DISCOVER") this.sendInfo(id, p.sender);
					else if (type === "PING")
						this.publish("PONG", id, p.sender, {
							time: p.time,
							id: p.id,
							arrived: Date.now()
						});
				});
		for (const subject of subscriptionSubjects(
			"DISCOVER",
			"agent",
			this.ids[0],
			false,
			this.prefix
		))
			this.subscribe(this.ids[0], subject, (_, p) => {
				for (const id of this.ids) this.sendInfo(id, p.sender);
			});
		await Promise.all([...new Set(this.conns.values())].map(nc => nc.flush()));
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
		for (const id of this.ids) this.publish("DISCONNECT", id, null, {});
		const conns = [...new Set(this.conns.values())];
		this.conns.clear();
		await Promise.all(conns.map(nc => nc.drain().catch(() => undefined)));
	}

	// ---- the protocol ---------------------------------------------------------------------

	/** `handle` gets each packet's type (its subject's first token after the prefix). */
	private subscribe(
		id: string,
		subject: string,
		handle: (type: string, payload: any) => void
	): void {
		const from = this.prefix.length + 1;
		this.conns.get(id)!.subscribe(subject, {
			callback: (err, msg) => {
				if (err) {
					this.subscriptionErrors++;
					return;
				}
				let payload: any;
				try {
					payload = JSON.parse(decoder.decode(msg.data));
				} catch {
					return;
				}
				this.packetsIn++;
				handle(msg.subject.slice(from, msg.subject.indexOf(".", from)), payload);
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
		this.packetsOut++;
		this.conns
			.get(sender)
			?.publish(
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
			this.runCalls++;
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
