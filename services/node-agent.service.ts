import os from "os";
import path from "path";
import type { Context, Service, ServiceBroker, ServiceSchema } from "moleculer";
import { DEFAULT_DRAIN_S, type AgentConfig } from "../lib/launch/config";
import { NotFoundError } from "../lib/errors";
import { LeaderView } from "../lib/agent/callers";
import { NodeAgent } from "../lib/agent/agent";
import { Membership } from "../lib/agent/membership";
import { DEFAULT_CONTAINER_SETTINGS } from "../lib/agent/containers";
import { DEFAULT_TASK_UIDS } from "../lib/agent/task-identities";
import { ExecutionReporter } from "../lib/agent/reporter";
import { measureResources, readSlaveId } from "../lib/agent/resources";
import {
	RUN_PARAMS,
	JOB_EXE_ID_SCHEMA,
	STRIKE_ID_SCHEMA
} from "../lib/documents/agent-protocol-schemas";
import {
	LOG_TAIL_BYTES,
	type ExecutionFinished,
	type ExecutionSpec,
	type ExecutionStep,
	type RunAnswer
} from "../lib/documents/agent-protocol";
import { launchStrikeMonitor, StrikeMonitor } from "../lib/ingest/monitor";
import { jsonParams } from "../lib/validation/params";

/**
 * The node agent: one per machine, no database. Registers its node and heartbeats to the
 * `nodes` service, runs the executions the scheduler hands it (lib/agent/agent.ts), and reports
 * their steps and results to the `scheduler` service. See lib/documents/agent-protocol.ts for the messages.
 *
 * Towards the control plane (registration, heartbeats and drains: lib/agent/membership.ts):
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
	resources(): ReturnType<typeof measureResources>;
	runOne(spec: ExecutionSpec): void;
	drainBeforeStop(why: string): Promise<void>;
	hurryDrain(why: string): void;
}

/** The service's state: set in `created` (and the agent, slave id and timers in `started`). */
interface AgentVars {
	agent: NodeAgent;
	slaveId: string;
	/** registration, heartbeats and drains (lib/agent/membership.ts) */
	membership: Membership;
	leaders: LeaderView;
	monitors: Map<number, StrikeMonitor>;
	reporter: ExecutionReporter;
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
			if (ctx.params?.wasReconnect) void this.membership.heartbeat();
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

		/** The node's offer now: what its machine has, within the configured caps. */
		async resources(this: AgentThis) {
			const agent: AgentConfig = this.settings.agent;
			return measureResources(agent.workDir, {
				cpus: agent.cpus,
				memMiB: agent.memMiB,
				diskMiB: agent.diskMiB
			});
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
		 * The process is shutting down (lib/launch/launch.ts, on its first SIGTERM or SIGINT): the
		 * node drains (see the service's comment); resolves once it is over.
		 */
		drainBeforeStop(this: AgentThis, why: string) {
			return this.membership.drainBeforeStop(why);
		},

		/** A second signal during the drain: what still runs is killed now and reported. */
		hurryDrain(this: AgentThis, why: string) {
			this.membership.hurryDrain(why);
		}
	},

	created(this: AgentThis) {
		this.settings.agent = { ...DEFAULT_AGENT, ...this.settings.agent };
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
		const settings: Settings = this.settings;
		this.membership = new Membership(
			{
				agentId: this.broker.nodeID,
				hostname: os.hostname(),
				port: settings.port,
				call: (action, params, timeoutMs) =>
					this.broker.call(action, params, { timeout: timeoutMs }),
				waitForNodes: ms =>
					this.broker.waitForServices(["nodes"], ms, 50).then(
						() => true,
						() => false
					),
				nodesRun: () => serviceRuns(this.broker, "nodes"),
				resources: () => this.resources(),
				agent: () => this.agent,
				slaveId: () => this.slaveId,
				info: message => this.logger.info(message),
				warn: message => this.logger.warn(message),
				warnWith: (fields, message) => this.logger.warn(fields, message)
			},
			{
				heartbeatMs: settings.heartbeatMs,
				registerRetryMs: settings.registerRetryMs,
				callTimeoutMs: settings.callTimeoutMs,
				drainS: settings.agent.drainS,
				drainReportMs: settings.drainReportMs,
				drainAnnounceMs: settings.drainAnnounceMs
			}
		);
		this.monitors = new Map<number, StrikeMonitor>();
		this.reporter = new ExecutionReporter({
			call: (action, params) =>
				this.broker.call(action, params, { timeout: this.settings.callTimeoutMs }),
			serviceRuns: name => serviceRuns(this.broker, name),
			warnOnce: (key, message) => this.membership.warnOnce(key, message),
			info: (fields, message) => this.logger.info(fields, message),
			error: message => this.logger.error(message),
			pause: ms => this.membership.pause(ms),
			stopping: () => this.membership.stopping,
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
		this.beatTimer = setInterval(() => void this.membership.heartbeat(), settings.heartbeatMs);
		void this.membership.register();
	},

	async stopped(this: AgentThis) {
		this.membership.stop();
		clearInterval(this.beatTimer);
		clearInterval(this.pruneTimer);
		await this.agent?.stop();
	}
};

export default NodeAgentService;
