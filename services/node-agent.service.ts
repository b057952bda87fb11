import os from "os";
import path from "path";
import type { Context, Service, ServiceBroker, ServiceSchema } from "moleculer";
import { DEFAULT_DRAIN_S, type AgentConfig } from "../lib/launch/config";
import { NotFoundError } from "../lib/errors";
import { LeaderView } from "../lib/agent/callers";
import { NodeAgent, type DrainOutcome } from "../lib/agent/agent";
import { DEFAULT_CONTAINER_SETTINGS } from "../lib/agent/containers";
import { DEFAULT_TASK_UIDS } from "../lib/agent/task-identities";
import { ExecutionReporter } from "../lib/agent/reporter";
import { measureResources, readSlaveId } from "../lib/agent/resources";
import {
	RUN_PARAMS,
	JOB_EXE_ID_SCHEMA,
	STRIKE_ID_SCHEMA,
	LOG_TAIL_BYTES,
	type ExecutionFinished,
	type ExecutionSpec,
	type ExecutionStep,
	type NodeDrain,
	type NodeHeartbeat,
	type NodeHeartbeatAnswer,
	type NodeRegistration,
	type NodeRegistrationAnswer,
	type RunAnswer
} from "../lib/documents/agent-protocol";
import { launchStrikeMonitor, StrikeMonitor } from "../lib/ingest/monitor";
import { jsonParams } from "../lib/validation/params";

/**
 * The node agent: one per machine, no database. Registers its node and heartbeats to the
 * `nodes` service, runs the executions the scheduler hands it (lib/agent/agent.ts), and reports
 * their steps and results to the `scheduler` service. See lib/documents/agent-protocol.ts for the messages.
 *
 * Towards the control plane:
 * - `nodes.register` at start, retried every registerRetryMs until it answers, and again when a
 *   heartbeat answer does not know the node (`ok: false`, no nodeId, or a NOT_FOUND error).
 * - `nodes.heartbeat` every heartbeatMs with the current offer and the executions held here
 *   (running, or finished with the report not yet acknowledged). The answer lists those of them
 *   that have ended on the control plane (canceled while their run was on its way, say): they are
 *   canceled here. A failed call is logged and the next beat tries again.
 * - `scheduler.exeSteps` with the steps of running executions, gathered for stepDelayMs, best
 *   effort, in order (a short execution's steps come only with its report).
 * - `scheduler.exeFinished` with the reports of the executions that ended in one turn of the
 *   event loop, after their steps, retried every finishRetryMs while the call fails for want of
 *   a peer (no service, timeout, server error), so a result survives a control-plane restart.
 *   An answer of any kind ends the retries (a 4xx refusal of several reports sends each again
 *   alone; of one, it is logged as an error: retrying would not change it). Both through
 *   lib/agent/reporter.ts.
 *
 * Draining (docs/decisions.md, "Drain"): on the process's first SIGTERM or SIGINT, lib/launch/launch.ts
 * calls `drainBeforeStop` before it stops the broker. The agent calls `nodes.drain` (retried
 * until answered; registrations and heartbeats say `draining` too), hands back any run that
 * still arrives, gives its executions AGENT_DRAIN_S to end, stops the rest as `node-shutdown`
 * and waits (bounded) for their reports; then the broker stops. A second signal calls
 * `hurryDrain`: what still runs is killed at once. A heartbeat (or registration) answer with
 * `drain` drains the node the same way for a user (PATCH /nodes/{id}/ is_draining), but the
 * agent keeps running, handing runs back, until an answer without it.
 */

interface Settings {
	agent: AgentConfig;
	port: number;
	heartbeatMs: number;
	registerRetryMs: number;
	finishRetryMs: number;
	stepDelayMs: number;
	killGraceMs: number;
	/** how often a strike's monitor lists its directory again */
	strikeRescanMs: number;
	logCapBytes: number;
	keepFailedMs: number;
	cancelMemoryMs: number;
	callTimeoutMs: number;
	/** how long the reports of executions stopped by a drain may take, past the kill grace */
	drainReportMs: number;
	/**
	 * how long a drain that is over waits more for the control plane to know of it, and then
	 * for the reports of the runs handed back meanwhile
	 */
	drainAnnounceMs: number;
}

/** The service's methods, as its handlers and lifecycle call them. */
interface AgentMethods {
	launchBuiltin(spec: ExecutionSpec): ReturnType<typeof launchStrikeMonitor>;
	warnOnce(key: string, message: string): void;
	pause(ms: number): Promise<void>;
	resources(): ReturnType<typeof measureResources>;
	register(): Promise<void>;
	heartbeat(): Promise<void>;
	stopEnded(ids: unknown): void;
	runOne(spec: ExecutionSpec): void;
	drainBeforeStop(why: string): Promise<void>;
	hurryDrain(why: string): void;
	followDrain(drain: boolean): void;
	announceDrain(): Promise<boolean>;
	logDrain(outcome: DrainOutcome, what: string): void;
}

/** The service's state: set in `created` (and the agent, slave id and timers in `started`). */
interface AgentVars {
	agent: NodeAgent;
	slaveId: string;
	nodeId: number | null;
	leaders: LeaderView;
	warned: Map<string, number>;
	pauses: Set<() => void>;
	monitors: Map<number, StrikeMonitor>;
	reporter: ExecutionReporter;
	stopping: boolean;
	/** the process is shutting down: the node drains, and no answer ends it */
	leaving: boolean;
	/** the process's drain is over (the announcement is not retried any more) */
	drained: boolean;
	registered: boolean;
	registering: boolean;
	beating: boolean;
	beatTimer: NodeJS.Timeout;
	pruneTimer: NodeJS.Timeout;
}

type AgentThis = Service<Settings> & AgentMethods & AgentVars;

const DEFAULT_AGENT: AgentConfig = {
	workDir: path.resolve("./data/agent"),
	cpus: null,
	memMiB: null,
	diskMiB: null,
	launchers: 2,
	launcher: "auto",
	taskUser: null,
	taskUids: DEFAULT_TASK_UIDS,
	docker: DEFAULT_CONTAINER_SETTINGS,
	drainS: DEFAULT_DRAIN_S
};

/** how long the question "who leads the scheduler?" may take before a run is refused */
const LEADER_QUESTION_TIMEOUT_MS = 5000;

/** Whether any node runs the service now (Moleculer's typings ask for a node; it is optional). */
function serviceRuns(broker: ServiceBroker, name: string): boolean {
	return broker.registry.hasService(name, undefined as unknown as string);
}

function isUnknownNode(answer: any): boolean {
	return !answer || answer.ok === false || answer.nodeId === null;
}

const NodeAgentService: ServiceSchema<Settings, AgentMethods, AgentVars> = {
	name: "node-agent",

	settings: {
		agent: DEFAULT_AGENT,
		// the API port this process serves (lib/launch/services.ts); an agent alone serves none
		port: 0,
		heartbeatMs: 5000,
		registerRetryMs: 2000,
		finishRetryMs: 2000,
		// step events are gathered this long: a short execution's ride with its report instead
		stepDelayMs: 200,
		killGraceMs: 5000,
		strikeRescanMs: 5000,
		logCapBytes: LOG_TAIL_BYTES,
		keepFailedMs: 24 * 3600 * 1000,
		// a cancel that overtakes its run (sent at most runTimeoutMs, 10 s, before the run gives up)
		cancelMemoryMs: 60 * 1000,
		// a call to a control plane that died is retried after this (the registry keeps a dead
		// node until its heartbeats have been missed for 15 s)
		callTimeoutMs: 10 * 1000,
		// AGENT_DRAIN_S (60) + the kill grace (5) + this + drainAnnounceMs twice (the drain told,
		// the runs handed back meanwhile reported): at most 79 s, inside systemd's 90 s
		drainReportMs: 10 * 1000,
		drainAnnounceMs: 2000
	},

	actions: {
		/**
		 * Accepts executions (one spec, or `{ executions }`: what the scheduler sends, the ones
		 * placed here together) and runs them in the background; a repeat is accepted and ignored.
		 */
		run: {
			caller: "scheduler-leader",
			params: jsonParams(RUN_PARAMS),
			async handler(
				this: AgentThis,
				ctx: Context<ExecutionSpec | { executions: ExecutionSpec[] }>
			) {
				const specs = "executions" in ctx.params ? ctx.params.executions : [ctx.params];
				for (const spec of specs) this.runOne(spec);
				return { accepted: true, launch: this.agent.launchState() } satisfies RunAnswer;
			}
		},

		/** SIGTERM, then SIGKILL after killGraceMs; the execution ends CANCELED. */
		cancel: {
			caller: "stop-confirmed",
			params: jsonParams(JOB_EXE_ID_SCHEMA),
			async handler(this: AgentThis, ctx: Context<{ jobExeId: number }>) {
				return { found: this.agent.cancel(ctx.params.jobExeId) };
			}
		},

		/**
		 * A stream of the execution's stdout and stderr as they are written (frames of
		 * lib/documents/log-frames.ts), ending when it ends; NOT_FOUND when it is not held here.
		 */
		followLogs: {
			caller: "execution-reader",
			params: jsonParams(JOB_EXE_ID_SCHEMA),
			handler(this: AgentThis, ctx: Context<{ jobExeId: number }>) {
				const stream = this.agent.followLogs(ctx.params.jobExeId, ctx.nodeID ?? "");
				if (!stream)
					throw new NotFoundError(
						`execution ${ctx.params.jobExeId} is not held by the agent ${this.broker.nodeID}`
					);
				return stream;
			}
		},

		/** The caller's last follower left: its stream of the execution's logs ends. */
		unfollowLogs: {
			caller: "execution-reader",
			params: jsonParams(JOB_EXE_ID_SCHEMA),
			handler(this: AgentThis, ctx: Context<{ jobExeId: number }>) {
				return { stopped: this.agent.unfollowLogs(ctx.params.jobExeId, ctx.nodeID ?? "") };
			}
		},

		/** Live stdout/stderr (their tails); NOT_FOUND when the execution is not held here. */
		logs: {
			caller: "execution-reader",
			params: jsonParams(JOB_EXE_ID_SCHEMA),
			async handler(this: AgentThis, ctx: Context<{ jobExeId: number }>) {
				const logs = await this.agent.logs(ctx.params.jobExeId);
				if (!logs)
					throw new NotFoundError(
						`execution ${ctx.params.jobExeId} is not held by the agent ${this.broker.nodeID}`
					);
				return logs;
			}
		}
	},

	events: {
		/**
		 * Back on NATS after losing it: the lease is renewed at once rather than at the next beat,
		 * so an outage near the lease does not cost the executions held here.
		 */
		"$transporter.connected"(this: AgentThis, ctx: Context<{ wasReconnect: boolean }>) {
			if (ctx.params?.wasReconnect) void this.heartbeat();
		},

		/**
		 * A node left: if it led the scheduler, the next run's sender is asked about again; the
		 * logs it followed are sent no more.
		 */
		"$node.disconnected"(this: AgentThis, ctx: Context<{ node: { id: string } }>) {
			const nodeId = ctx.params?.node?.id;
			if (!nodeId) return;
			this.leaders.forget(nodeId);
			this.agent.readerGone(nodeId);
		},

		/** A strike's configuration changed: its monitor, if it runs here, reads it again. */
		"strike.changed": {
			params: jsonParams(STRIKE_ID_SCHEMA),
			handler(this: AgentThis, ctx: Context<{ strikeId: number }>) {
				const monitor: StrikeMonitor | undefined = this.monitors.get(ctx.params.strikeId);
				if (monitor) void monitor.reload();
			}
		}
	},

	methods: {
		/**
		 * Starts a strike's monitor for an execution of `scale-strike`; it calls the `ingest`
		 * service as this agent, and is known by its strike until it ends.
		 */
		launchBuiltin(this: AgentThis, spec: ExecutionSpec) {
			const strikeId = spec.task!.strikeId;
			const monitor = new StrikeMonitor(
				{ strikeId, jobExeId: spec.jobExeId },
				{
					call: (action, params) =>
						this.broker.call(action, params, { timeout: this.settings.callTimeoutMs }),
					info: message =>
						this.logger.info({ strikeId, jobExeId: spec.jobExeId }, message),
					warn: message =>
						this.logger.warn({ strikeId, jobExeId: spec.jobExeId }, message)
				},
				{ rescanMs: this.settings.strikeRescanMs }
			);
			this.monitors.set(strikeId, monitor);
			const launched = launchStrikeMonitor(monitor);
			void launched.exited.finally(() => {
				if (this.monitors.get(strikeId) === monitor) this.monitors.delete(strikeId);
			});
			return launched;
		},

		/** A warning, at most once a minute for the same kind of problem. */
		warnOnce(this: AgentThis, key: string, message: string) {
			const now = Date.now();
			if ((this.warned.get(key) ?? 0) > now) return;
			this.warned.set(key, now + 60_000);
			this.logger.warn(message);
		},

		/** Waits `ms`, or less when the service stops. */
		pause(this: AgentThis, ms: number): Promise<void> {
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
		},

		async resources(this: AgentThis) {
			const agent: AgentConfig = this.settings.agent;
			return measureResources(agent.workDir, {
				cpus: agent.cpus,
				memMiB: agent.memMiB,
				diskMiB: agent.diskMiB
			});
		},

		/** Registers the node, retrying until it answers (one loop at a time). */
		async register(this: AgentThis) {
			if (this.registering) return;
			this.registering = true;
			try {
				while (!this.stopping) {
					// waiting for the service (rather than calling it) also covers the start of a
					// process running the control plane too, whose services may still be starting
					const available = await this.broker
						.waitForServices(["nodes"], this.settings.registerRetryMs, 50)
						.then(
							() => true,
							() => false
						);
					if (this.stopping) return;
					if (!available) {
						this.warnOnce(
							"register",
							`no nodes service answers: registration retried every ${this.settings.registerRetryMs / 1000} s`
						);
						continue;
					}
					try {
						const registration: NodeRegistration = {
							agentId: this.broker.nodeID,
							slaveId: this.slaveId,
							hostname: os.hostname(),
							port: this.settings.port,
							resources: await this.resources(),
							docker: await this.agent.containers.inventory()
						};
						if (this.leaving) registration.draining = true;
						const answer = await this.broker.call<
							NodeRegistrationAnswer | undefined,
							NodeRegistration
						>("nodes.register", registration, {
							timeout: this.settings.callTimeoutMs
						});
						this.nodeId = answer?.nodeId ?? null;
						this.registered = true;
						this.warned.delete("register");
						this.logger.info(
							`registered as node ${this.nodeId} (slave id ${this.slaveId})`
						);
						this.followDrain(answer?.drain === true);
						return;
					} catch (error: any) {
						this.warnOnce(
							"register",
							`node registration failed (retrying every ${this.settings.registerRetryMs / 1000} s): ${error?.message ?? error}`
						);
					}
					await this.pause(this.settings.registerRetryMs);
				}
			} finally {
				this.registering = false;
			}
		},

		async heartbeat(this: AgentThis) {
			if (!this.registered || this.stopping || this.beating) return;
			if (!serviceRuns(this.broker, "nodes")) {
				this.warnOnce("heartbeat", "no nodes service answers: heartbeats wait for one");
				return;
			}
			this.beating = true;
			try {
				const beat: NodeHeartbeat = {
					agentId: this.broker.nodeID,
					slaveId: this.slaveId,
					resources: await this.resources(),
					running: this.agent.running(),
					docker: await this.agent.containers.inventory()
				};
				if (this.leaving) beat.draining = true;
				const answer = await this.broker.call<
					NodeHeartbeatAnswer | { ok: false } | undefined,
					NodeHeartbeat
				>("nodes.heartbeat", beat, {
					// a beat lost in a NATS outage holds the next ones no longer than a beat
					timeout: Math.min(this.settings.callTimeoutMs, this.settings.heartbeatMs)
				});
				this.warned.delete("heartbeat");
				if (isUnknownNode(answer)) {
					this.logger.info(
						"the control plane does not know this node: registering again"
					);
					this.registered = false;
					void this.register();
					return;
				}
				this.stopEnded((answer as NodeHeartbeatAnswer).cancel);
				this.followDrain((answer as NodeHeartbeatAnswer).drain === true);
			} catch (error: any) {
				if (error?.type === "NOT_FOUND" || (error?.code === 404 && !error?.retryable)) {
					this.registered = false;
					void this.register();
					return;
				}
				this.warnOnce("heartbeat", `heartbeat failed: ${error?.message ?? error}`);
			} finally {
				this.beating = false;
			}
		},

		/**
		 * Cancels the executions a heartbeat answer says have ended on the control plane (its
		 * record is the truth): a process started for one whose cancel never arrived, or came
		 * before the run and was forgotten, is killed and reported CANCELED.
		 */
		stopEnded(this: AgentThis, ids: unknown) {
			if (!Array.isArray(ids)) return;
			const stopped: number[] = this.agent.cancelEnded(ids.filter(Number.isInteger));
			if (stopped.length > 0)
				this.logger.warn(
					`executions ${stopped.join(", ")} have ended on the control plane but ran here: canceled`
				);
		},

		runOne(this: AgentThis, spec: ExecutionSpec) {
			const outcome = this.agent.run(spec);
			if (outcome === "started")
				this.logger.info(
					{ jobId: spec.jobId, jobExeId: spec.jobExeId },
					"execution started"
				);
			else if (outcome === "known")
				this.logger.info(`execution ${spec.jobExeId} is already known here: not run again`);
			else if (outcome === "canceled")
				this.logger.info(
					`execution ${spec.jobExeId} was canceled before it arrived: not run, reported CANCELED`
				);
			else if (outcome === "handed back")
				this.logger.warn(
					`execution ${spec.jobExeId} arrived while the node drains: handed back (FAILED node-shutdown, queued again without counting a try)`
				);
			else if (outcome === "stopping")
				this.logger.warn(
					`execution ${spec.jobExeId} arrived while the agent stops: not run (the control plane will find it lost)`
				);
		},

		/**
		 * The process is shutting down (lib/launch/launch.ts, on its first SIGTERM or SIGINT): the node
		 * drains (see the service's comment) and this resolves once it is over, the control plane
		 * told (or drainAnnounceMs more spent trying).
		 */
		async drainBeforeStop(this: AgentThis, why: string) {
			if (!this.agent || this.stopping) return;
			this.leaving = true;
			const waitS = this.settings.agent.drainS;
			this.logger.warn(
				`${why}: the node drains: runs arriving now are handed back, running executions get ${waitS} s (AGENT_DRAIN_S) to end, then are stopped (node-shutdown); a second SIGTERM or SIGINT stops them at once`
			);
			const told = this.announceDrain();
			const outcome = await this.agent.drain({
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
					serviceRuns(this.broker, "nodes")
						? (timer = setTimeout(resolve, this.settings.drainAnnounceMs, false))
						: resolve(false)
				)
			]);
			clearTimeout(timer);
			this.drained = true;
			if (!known)
				this.logger.warn(
					"the control plane could not be told that this node drains: it will find the node gone"
				);
			// runs it placed before it knew, handed back meanwhile, are reported before the stop
			await this.agent.idle(this.settings.drainAnnounceMs);
			this.logDrain(
				this.agent.drainOutcome() ?? outcome,
				"the drain is over: the agent stops"
			);
		},

		/** A second signal during the drain: what still runs is killed now and reported. */
		hurryDrain(this: AgentThis, why: string) {
			if (!this.agent) return;
			this.logger.warn(`${why}: the executions still running are stopped at once`);
			this.agent.hurry(why);
		},

		/**
		 * Follows the control plane's word on whether the node drains (a user's drain), unless the
		 * process is shutting down (its own drain is not called off).
		 */
		followDrain(this: AgentThis, drain: boolean) {
			if (this.leaving || drain === this.agent.draining) return;
			if (!drain) {
				this.agent.undrain();
				this.logger.warn("the node's drain is over: runs are taken again");
				return;
			}
			const waitS = this.settings.agent.drainS;
			this.logger.warn(
				`the control plane drains this node: runs arriving now are handed back, running executions get ${waitS} s (AGENT_DRAIN_S) to end, then are stopped (node-shutdown); the agent keeps running`
			);
			void this.agent
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
		},

		/**
		 * Tells the control plane that the node drains (nodes.drain), again every registerRetryMs
		 * until it answers, the drain is over or the service stops; a node it does not know is
		 * registered again (saying it drains). Resolves true once it answered.
		 */
		async announceDrain(this: AgentThis): Promise<boolean> {
			while (!this.stopping && !this.drained) {
				if (serviceRuns(this.broker, "nodes"))
					try {
						await this.broker.call<unknown, NodeDrain>(
							"nodes.drain",
							{ agentId: this.broker.nodeID, slaveId: this.slaveId },
							{ timeout: this.settings.callTimeoutMs }
						);
						this.logger.info("the control plane knows that this node drains");
						return true;
					} catch (error: any) {
						if (
							error?.type === "NOT_FOUND" ||
							(error?.code === 404 && !error?.retryable)
						) {
							this.registered = false;
							void this.register();
						}
						this.warnOnce(
							"drain",
							`the control plane could not be told that this node drains (retrying every ${this.settings.registerRetryMs / 1000} s): ${error?.message ?? error}`
						);
					}
				else
					this.warnOnce(
						"drain",
						"no nodes service answers: the control plane is told that this node drains when one does"
					);
				await this.pause(this.settings.registerRetryMs);
			}
			return false;
		},

		logDrain(this: AgentThis, outcome: DrainOutcome, what: string) {
			this.logger.warn(
				{
					ended: outcome.ended,
					stopped: outcome.stopped,
					handedBack: outcome.handedBack,
					undelivered: outcome.undelivered
				},
				`${what}: ${outcome.ended} executions ended by themselves, ${outcome.stopped} were stopped (node-shutdown), ${outcome.handedBack} runs handed back${outcome.undelivered > 0 ? `, ${outcome.undelivered} reports not acknowledged` : ""}`
			);
		}
	},

	created(this: AgentThis) {
		this.settings.agent = { ...DEFAULT_AGENT, ...this.settings.agent };
		this.warned = new Map<string, number>();
		this.leaders = new LeaderView(async (sender: string) => {
			const senderHasNodes = this.broker.registry
				.getServiceList({ onlyAvailable: true })
				.some(svc => svc.name === "nodes" && svc.nodeID === sender);
			const answer = await this.broker.call<{ leader: string | null } | undefined, unknown>(
				"nodes.leader",
				{},
				{
					timeout: LEADER_QUESTION_TIMEOUT_MS,
					...(senderHasNodes ? { nodeID: sender } : {})
				}
			);
			return (answer?.leader as string | null) ?? null;
		});
		this.pauses = new Set<() => void>();
		this.stopping = false;
		this.leaving = false;
		this.drained = false;
		this.registered = false;
		this.registering = false;
		this.beating = false;
		this.nodeId = null;
		this.monitors = new Map<number, StrikeMonitor>();
		this.reporter = new ExecutionReporter({
			call: (action, params) =>
				this.broker.call(action, params, { timeout: this.settings.callTimeoutMs }),
			serviceRuns: name => serviceRuns(this.broker, name),
			warnOnce: (key, message) => this.warnOnce(key, message),
			info: (fields, message) => this.logger.info(fields, message),
			error: message => this.logger.error(message),
			pause: ms => this.pause(ms),
			stopping: () => this.stopping,
			finishRetryMs: this.settings.finishRetryMs
		});
	},

	async started(this: AgentThis) {
		const settings: Settings = this.settings;
		this.slaveId = await readSlaveId(settings.agent.workDir);
		this.agent = new NodeAgent({
			agentId: this.broker.nodeID,
			workDir: settings.agent.workDir,
			launchers: settings.agent.launchers,
			launcher: settings.agent.launcher,
			slowLaunchMs: settings.agent.slowLaunchMs,
			killGraceMs: settings.killGraceMs,
			node: this.slaveId,
			containers: settings.agent.docker,
			taskUser: settings.agent.taskUser,
			taskUids: settings.agent.taskUids,
			logCapBytes: settings.logCapBytes,
			keepFailedMs: settings.keepFailedMs,
			cancelMemoryMs: settings.cancelMemoryMs,
			sendSteps: (steps: ExecutionStep[]) => this.reporter.sendSteps(steps),
			stepDelayMs: settings.stepDelayMs,
			deliver: (report: ExecutionFinished) => this.reporter.finish(report),
			warn: (message: string) => this.logger.warn(message),
			launchBuiltin: (spec: ExecutionSpec) => this.launchBuiltin(spec)
		});
		this.logger.info(
			{
				workDir: settings.agent.workDir,
				launcher: this.agent.launcherDescription,
				tasks: this.agent.isolationDescription
			},
			"node agent started"
		);
		await this.agent.containers.removeLeftovers().then(
			removed => {
				if (removed > 0)
					this.logger.warn(
						`removed ${removed} containers an earlier run of this agent left behind`
					);
			},
			// no engine on this node: nothing was left
			() => undefined
		);
		await this.agent.prune();
		this.pruneTimer = setInterval(() => void this.agent.prune(), 3600 * 1000);
		this.pruneTimer.unref();
		this.beatTimer = setInterval(() => void this.heartbeat(), settings.heartbeatMs);
		void this.register();
	},

	async stopped(this: AgentThis) {
		this.stopping = true;
		clearInterval(this.beatTimer);
		clearInterval(this.pruneTimer);
		for (const wake of this.pauses) wake();
		this.pauses.clear();
		await this.agent?.stop();
	}
};

export default NodeAgentService;
