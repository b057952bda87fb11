import type {
	NodeDrain,
	NodeHeartbeat,
	NodeHeartbeatAnswer,
	NodeRegistration,
	NodeRegistrationAnswer,
	Resources
} from "../documents/agent-protocol";
import type { NodeAgent } from "./agent";
import type { DrainOutcome } from "./drain";

/** What a node's membership uses of the agent's process (services/node-agent.service.ts). */
export interface MembershipLink {
	/** this agent's Moleculer nodeID */
	agentId: string;
	hostname: string;
	/** the API port this process serves (0: none) */
	port: number;
	call<T>(action: string, params: object, timeoutMs: number): Promise<T>;
	/** waits up to `ms` for a `nodes` service; true once one runs */
	waitForNodes(ms: number): Promise<boolean>;
	/** whether a `nodes` service runs now */
	nodesRun(): boolean;
	/** the node's offer now */
	resources(): Promise<Resources>;
	/** the agent running the executions, and the node's slave id (both made at start) */
	agent(): NodeAgent | undefined;
	slaveId(): string;
	info(message: string): void;
	warn(message: string): void;
	warnWith(fields: Record<string, unknown>, message: string): void;
}

export interface MembershipSettings {
	heartbeatMs: number;
	registerRetryMs: number;
	callTimeoutMs: number;
	/** how long a drain gives executions to end (AGENT_DRAIN_S) */
	drainS: number;
	/** how long the reports of executions stopped by a drain may take, past the kill grace */
	drainReportMs: number;
	/**
	 * how long a drain that is over waits more for the control plane to know of it, and then
	 * for the reports of the runs handed back meanwhile
	 */
	drainAnnounceMs: number;
}

function isUnknownNode(answer: any): boolean {
	return !answer || answer.ok === false || answer.nodeId === null;
}

function isNotFound(error: any): boolean {
	return error?.type === "NOT_FOUND" || (error?.code === 404 && !error?.retryable);
}

/**
 * A node agent's membership of the cluster (services/node-agent.service.ts says the protocol):
 * its registration, retried until the `nodes` service answers; its heartbeats, whose answers
 * cancel executions ended on the control plane and start or end a user's drain; and the drain of
 * the process's shutdown, announced to the control plane until it answers.
 */
export class Membership {
	nodeId: number | null = null;
	/** the process stops: loops end, pauses end at once */
	stopping = false;
	/** the process is shutting down: the node drains, and no answer ends it */
	private leaving = false;
	/** the process's drain is over (the announcement is not retried any more) */
	private drained = false;
	private registered = false;
	private registering = false;
	private beating = false;
	private readonly warned = new Map<string, number>();
	private readonly pauses = new Set<() => void>();

	constructor(
		private readonly link: MembershipLink,
		private readonly settings: MembershipSettings
	) {}

	/** The agent, made at start: registrations and what their answers do come after it. */
	private agent(): NodeAgent {
		const agent = this.link.agent();
		if (!agent) throw new Error("the node agent has not started");
		return agent;
	}

	/** A warning, at most once a minute for the same kind of problem. */
	warnOnce(key: string, message: string): void {
		const now = Date.now();
		if ((this.warned.get(key) ?? 0) > now) return;
		this.warned.set(key, now + 60_000);
		this.link.warn(message);
	}

	/** Waits `ms`, or less when the process stops. */
	pause(ms: number): Promise<void> {
		return new Promise(resolve => {
			if (this.stopping) return resolve();
			const timer = setTimeout(() => {
				this.pauses.delete(wake);
				resolve();
			}, ms);
			const wake = () => {
				clearTimeout(timer);
				resolve();
			};
			this.pauses.add(wake);
		});
	}

	/** The process stops: every loop ends, every pause now. */
	stop(): void {
		this.stopping = true;
		for (const wake of this.pauses) wake();
		this.pauses.clear();
	}

	/** Registers the node, retrying until it answers (one loop at a time). */
	async register(): Promise<void> {
		if (this.registering) return;
		this.registering = true;
		const { registerRetryMs } = this.settings;
		try {
			while (!this.stopping) {
				// waiting for the service (rather than calling it) also covers the start of a
				// process running the control plane too, whose services may still be starting
				const available = await this.link.waitForNodes(registerRetryMs);
				if (this.stopping) return;
				if (!available) {
					this.warnOnce(
						"register",
						`no nodes service answers: registration retried every ${registerRetryMs / 1000} s`
					);
					continue;
				}
				try {
					const agent = this.agent();
					const registration: NodeRegistration = {
						agentId: this.link.agentId,
						slaveId: this.link.slaveId(),
						hostname: this.link.hostname,
						port: this.link.port,
						resources: await this.link.resources(),
						docker: await agent.containers.inventory()
					};
					if (this.leaving) registration.draining = true;
					const answer = await this.link.call<NodeRegistrationAnswer | undefined>(
						"nodes.register",
						registration,
						this.settings.callTimeoutMs
					);
					this.nodeId = answer?.nodeId ?? null;
					this.registered = true;
					this.warned.delete("register");
					this.link.info(
						`registered as node ${this.nodeId} (slave id ${this.link.slaveId()})`
					);
					this.followDrain(answer?.drain === true);
					return;
				} catch (error: any) {
					this.warnOnce(
						"register",
						`node registration failed (retrying every ${registerRetryMs / 1000} s): ${error?.message ?? error}`
					);
				}
				await this.pause(registerRetryMs);
			}
		} finally {
			this.registering = false;
		}
	}

	async heartbeat(): Promise<void> {
		if (!this.registered || this.stopping || this.beating) return;
		if (!this.link.nodesRun()) {
			this.warnOnce("heartbeat", "no nodes service answers: heartbeats wait for one");
			return;
		}
		this.beating = true;
		try {
			const agent = this.agent();
			const beat: NodeHeartbeat = {
				agentId: this.link.agentId,
				slaveId: this.link.slaveId(),
				resources: await this.link.resources(),
				running: agent.running(),
				docker: await agent.containers.inventory()
			};
			if (this.leaving) beat.draining = true;
			const answer = await this.link.call<NodeHeartbeatAnswer | { ok: false } | undefined>(
				"nodes.heartbeat",
				beat,
				// a beat lost in a NATS outage holds the next ones no longer than a beat
				Math.min(this.settings.callTimeoutMs, this.settings.heartbeatMs)
			);
			this.warned.delete("heartbeat");
			if (isUnknownNode(answer)) {
				this.link.info("the control plane does not know this node: registering again");
				this.registered = false;
				void this.register();
				return;
			}
			this.stopEnded((answer as NodeHeartbeatAnswer).cancel);
			this.followDrain((answer as NodeHeartbeatAnswer).drain === true);
		} catch (error: any) {
			if (isNotFound(error)) {
				this.registered = false;
				void this.register();
				return;
			}
			this.warnOnce("heartbeat", `heartbeat failed: ${error?.message ?? error}`);
		} finally {
			this.beating = false;
		}
	}

	/**
	 * Cancels the executions a heartbeat answer says have ended on the control plane (its
	 * record is the truth): a process started for one whose cancel never arrived, or came
	 * before the run and was forgotten, is killed and reported CANCELED.
	 */
	private stopEnded(ids: unknown): void {
		if (!Array.isArray(ids)) return;
		const stopped = this.agent().cancelEnded(ids.filter(Number.isInteger));
		if (stopped.length > 0)
			this.link.warn(
				`executions ${stopped.join(", ")} have ended on the control plane but ran here: canceled`
			);
	}

	/**
	 * The process is shutting down (lib/launch/launch.ts, on its first SIGTERM or SIGINT): the
	 * node drains and this resolves once it is over, the control plane told (or drainAnnounceMs
	 * more spent trying).
	 */
	async drainBeforeStop(why: string): Promise<void> {
		const agent = this.link.agent();
		if (!agent || this.stopping) return;
		this.leaving = true;
		const waitS = this.settings.drainS;
		this.link.warn(
			`${why}: the node drains: runs arriving now are handed back, running executions get ${waitS} s (AGENT_DRAIN_S) to end, then are stopped (node-shutdown); a second SIGTERM or SIGINT stops them at once`
		);
		const told = this.announceDrain();
		const outcome = await agent.drain({
			why,
			waitMs: waitS * 1000,
			reportMs: this.settings.drainReportMs
		});
		// the node must not take work once the process is gone: the control plane is given a
		// moment more to hear it, if one runs
		let timer: NodeJS.Timeout | undefined;
		const known = await Promise.race([
			told,
			new Promise<boolean>(resolve =>
				this.link.nodesRun()
					? (timer = setTimeout(resolve, this.settings.drainAnnounceMs, false))
					: resolve(false)
			)
		]);
		clearTimeout(timer);
		this.drained = true;
		if (!known)
			this.link.warn(
				"the control plane could not be told that this node drains: it will find the node gone"
			);
		// runs it placed before it knew, handed back meanwhile, are reported before the stop
		await agent.idle(this.settings.drainAnnounceMs);
		this.logDrain(agent.drainOutcome() ?? outcome, "the drain is over: the agent stops");
	}

	/** A second signal during the drain: what still runs is killed now and reported. */
	hurryDrain(why: string): void {
		const agent = this.link.agent();
		if (!agent) return;
		this.link.warn(`${why}: the executions still running are stopped at once`);
		agent.hurry(why);
	}

	/**
	 * Follows the control plane's word on whether the node drains (a user's drain), unless the
	 * process is shutting down (its own drain is not called off).
	 */
	private followDrain(drain: boolean): void {
		const agent = this.agent();
		if (this.leaving || drain === agent.draining) return;
		if (!drain) {
			agent.undrain();
			this.link.warn("the node's drain is over: runs are taken again");
			return;
		}
		const waitS = this.settings.drainS;
		this.link.warn(
			`the control plane drains this node: runs arriving now are handed back, running executions get ${waitS} s (AGENT_DRAIN_S) to end, then are stopped (node-shutdown); the agent keeps running`
		);
		void agent
			.drain({
				why: "a user drains the node",
				waitMs: waitS * 1000,
				reportMs: this.settings.drainReportMs
			})
			.then(outcome =>
				this.logDrain(
					outcome,
					outcome.undone
						? "the drain was called off"
						: "the drain is over: runs are handed back until it ends"
				)
			);
	}

	/**
	 * Tells the control plane that the node drains (nodes.drain), again every registerRetryMs
	 * until it answers, the drain is over or the process stops; a node it does not know is
	 * registered again (saying it drains). Resolves true once it answered.
	 */
	private async announceDrain(): Promise<boolean> {
		const { registerRetryMs } = this.settings;
		while (!this.stopping && !this.drained) {
			if (this.link.nodesRun())
				try {
					await this.link.call<unknown>(
						"nodes.drain",
						{ agentId: this.link.agentId, slaveId: this.link.slaveId() } as NodeDrain,
						this.settings.callTimeoutMs
					);
					this.link.info("the control plane knows that this node drains");
					return true;
				} catch (error: any) {
					if (isNotFound(error)) {
						this.registered = false;
						void this.register();
					}
					this.warnOnce(
						"drain",
						`the control plane could not be told that this node drains (retrying every ${registerRetryMs / 1000} s): ${error?.message ?? error}`
					);
				}
			else
				this.warnOnce(
					"drain",
					"no nodes service answers: the control plane is told that this node drains when one does"
				);
			await this.pause(registerRetryMs);
		}
		return false;
	}

	private logDrain(outcome: DrainOutcome, what: string): void {
		this.link.warnWith(
			{
				ended: outcome.ended,
				stopped: outcome.stopped,
				handedBack: outcome.handedBack,
				undelivered: outcome.undelivered
			},
			`${what}: ${outcome.ended} executions ended by themselves, ${outcome.stopped} were stopped (node-shutdown), ${outcome.handedBack} runs handed back${outcome.undelivered > 0 ? `, ${outcome.undelivered} reports not acknowledged` : ""}`
		);
	}
}
