import type { Context, Service, ServiceSchema } from "moleculer";
import type { Client } from "pg";
import {
	type ExecutionFinished,
	type ExecutionStep,
	type RunAnswer
} from "../lib/documents/agent-protocol";
import { FINISHED_PARAMS, STEP_SCHEMA } from "../lib/documents/agent-protocol-schemas";
import { DbMixin } from "../mixins/db.mixin";
import { MicroBatcher, clientSql, poolSql, type Sql } from "../lib/db/run";
import { PassLoop } from "../lib/scheduling/passes";
import { ERRORS } from "../lib/executions/failure";
import {
	dispatchPlaced,
	type DispatchLink,
	buildSpecs,
	PlacedExecutions
} from "../lib/scheduling/dispatch";
import { ReportWriter } from "../lib/scheduling/report-writer";
import { ROOM_HOLD_MS, RoomHolds } from "../lib/scheduling/room-holds";
import type { FailureRequest, FinishResult, PlacedExe } from "../lib/executions/types";
import { announceReports, type ReportItem } from "../lib/executions/complete";
import { LeaderLock } from "../lib/db/leader";
import { intakeGateOf } from "../lib/recipes/intake-gate";
import { findExecutionsOfAgent, findLostExecutions } from "../lib/scheduling/lost";
import {
	getSchedulerSettings,
	parseSettingsEdit,
	updateSchedulerSettings
} from "../lib/scheduling/settings";
import { databaseUrlOf } from "../lib/db/broker-database";
import { AgentReachability } from "../lib/scheduling/reachability";
import { DEFAULT_LAUNCH_WINDOW, LaunchWindows } from "../lib/scheduling/launch-window";
import {
	JOB_OUTCOME_DEFINITIONS,
	METRICS,
	OUTCOME_NAMES,
	registerMetrics,
	SCHEDULER_DEFINITIONS
} from "../lib/observability/gauges";
import { JobMeter } from "../lib/observability/job-meter";
import { readWaiting, whyWaiting } from "../lib/scheduling/waiting";
import { jsonParams } from "../lib/validation/params";
import { bodyParams } from "../lib/validation/body";

export interface SchedulerSettings {
	/** s3 workspaces' credentials go in run specs (no transport, or NATS over TLS: launch) */
	s3CredentialsToAgents: boolean;
	/** an agent not heard from for this long has lost its node (its executions fail: node-lost) */
	leaseMs: number;
	/** the safety tick: lost agents are looked for, and a pass runs, this often */
	tickMs: number;
	/** how often a replica that does not lead tries to take the lock */
	leaderRetryMs: number;
	/** how soon it tries again when PostgreSQL could not be reached (or the lock was lost) */
	leaderReconnectMs: number;
	/** queue rows claimed per transaction */
	batchSize: number;
	/** queue rows read per pass at most (past rows that cannot be placed now) */
	maxScanRows: number;
	/** how long reports from agents are gathered before they are written together */
	flushMs: number;
	/** reports written together at most */
	flushMaxItems: number;
	/**
	 * report transactions at once at most: a report that arrives during one goes in a second
	 * beside it, instead of waiting for the first to end
	 */
	flushConcurrency: number;
	/**
	 * after taking the lead, how long nothing is failed for want of an agent: its heartbeat
	 * (agents kept running while no scheduler led; their reports are on their way) or its entry
	 * in this process's registry (which fills as the other nodes announce themselves)
	 */
	leadGraceMs: number;
	/** how long a node-agent.run call may take to be accepted */
	runTimeoutMs: number;
	/** how long nothing is placed on an agent after a run could not reach it */
	unreachableBackoffMs: number;
	/** after a NATS reconnect, how often the agents that have not answered a ping are pinged */
	reachProbeMs: number;
	/**
	 * an agent is given no more executions than it launches in this long (its launch window,
	 * lib/scheduling/launch-window.ts); 0: no window
	 */
	launchWindowMs: number;
	/**
	 * the recipe jobs that completions queue are placed, in the transaction recording them, in
	 * the room those completions free (lib/scheduling/handoff.ts); false: they wait for a pass
	 */
	handOff: boolean;
}

/** A "lease" any heartbeat recorded is within (the largest int4 of milliseconds: 24 days). */
const ANY_HEARTBEAT_MS = 2 ** 31 - 1;

/** What the action and event handlers use of the service: its methods and state (from `created`). */
interface SchedulerMethods {
	isLeader(): boolean;
	onHint(ctx: Context): void;
	wake(): void;
	wakeCluster(ended?: Iterable<number>): void;
	cutOffLately(): boolean;
	failAgentExecutions(agentId: string): Promise<void>;
}
/** Its state the handlers read (the rest is the methods' own, kept loosely typed). */
type SchedulerVars = Record<string, any> & {
	reports: MicroBatcher<ReportItem, boolean>;
	reach: AgentReachability;
	reconnectedAt: number;
	disconnectedAt: number;
	/** the leader's passes, and the last one's context for why jobs wait */
	passes: PassLoop;
};
type SchedulerThis = Service<SchedulerSettings> & SchedulerMethods & SchedulerVars;

/**
 * The scheduler. Any replica answers the REST settings and the agents' step and end reports
 * (gathered for a few milliseconds and written together); one replica at a time, the holder of a
 * PostgreSQL advisory lock, places queued executions on nodes and watches for lost agents.
 *
 * Wake-ups (events are hints; the database is the truth): `queue.changed` (new or requeued
 * jobs), `nodes.changed` (offers, un-pauses), `scheduler.wake` (resources freed), and a short
 * safety tick. `$node.disconnected` fails the executions of an agent that said goodbye, at once.
 */
const SchedulerService: ServiceSchema<SchedulerSettings, SchedulerMethods, SchedulerVars> = {
	name: "scheduler",
	mixins: [DbMixin()],

	settings: {
		s3CredentialsToAgents: false,
		leaseMs: 15000,
		tickMs: 1000,
		leaderRetryMs: 3000,
		leaderReconnectMs: 250,
		batchSize: 500,
		maxScanRows: 5000,
		flushMs: 2,
		flushMaxItems: 500,
		flushConcurrency: 2,
		leadGraceMs: 15000,
		runTimeoutMs: 10000,
		unreachableBackoffMs: 5000,
		reachProbeMs: 250,
		launchWindowMs: DEFAULT_LAUNCH_WINDOW.windowMs,
		handOff: true
	},

	actions: {
		/**
		 * Why queued jobs wait (lib/scheduling/waiting.ts), from the leader's last pass: these
		 * jobs, or the head of these job types' queues (of every job type's when neither is
		 * given). A replica that does not lead says so.
		 */
		waiting: {
			params: jsonParams({
				type: "object",
				properties: {
					jobIds: { type: "array", items: { type: "integer" }, maxItems: 1000 },
					jobTypeIds: { type: "array", items: { type: "integer" }, maxItems: 1000 }
				},
				additionalProperties: false
			}),
			async handler(
				this: SchedulerThis,
				ctx: Context<{ jobIds?: number[]; jobTypeIds?: number[] }>
			) {
				if (!this.isLeader()) return { leader: false, jobs: [] };
				const last = this.passes.lastPass;
				const { jobs, nodes } = await readWaiting(
					poolSql(this.db),
					ctx.params,
					this.settings.leaseMs
				);
				return {
					leader: true,
					jobs: jobs.map(job => ({
						job_id: job.job_id,
						job_type_id: job.job_type_id,
						...whyWaiting(last, job, nodes)
					}))
				};
			}
		},

		get: {
			rest: "GET /scheduler",
			params: jsonParams({ type: "object" }),
			async handler(this: SchedulerThis) {
				return getSchedulerSettings(poolSql(this.db));
			}
		},

		update: {
			rest: "PATCH /scheduler",
			// the fields are checked by parseSettingsEdit
			params: jsonParams(
				bodyParams({
					type: "object",
					properties: { is_paused: {}, node_error_period: {}, max_node_errors: {} }
				})
			),
			async handler(this: SchedulerThis, ctx: Context<Record<string, unknown>>) {
				const edit = parseSettingsEdit(ctx.params);
				const settings = await updateSchedulerSettings(poolSql(this.db), edit);
				if (!settings.is_paused) this.wakeCluster();
				return settings;
			}
		},

		/**
		 * Agent → control plane: steps of running executions started or completed. `ok` is false
		 * when one of them was not recorded (its execution is not running any more).
		 */
		exeSteps: {
			caller: { agentNamed: "a step report", each: "steps" },
			params: jsonParams({
				type: "object",
				required: ["steps"],
				properties: { steps: { type: "array", maxItems: 100000, items: STEP_SCHEMA } }
			}),
			async handler(this: SchedulerThis, ctx: Context<{ steps: ExecutionStep[] }>) {
				const recorded: boolean[] = await Promise.all(
					ctx.params.steps.map(step => this.reports.add({ kind: "step", step }))
				);
				return { ok: recorded.every(Boolean) };
			}
		},

		/** Agent → control plane: executions ended. Repeats are harmless. */
		exeFinished: {
			caller: { agentNamed: "a finish report", each: "reports" },
			params: jsonParams(FINISHED_PARAMS),
			async handler(
				this: SchedulerThis,
				ctx: Context<ExecutionFinished | { reports: ExecutionFinished[] }>
			) {
				const reports = "reports" in ctx.params ? ctx.params.reports : [ctx.params];
				await Promise.all(
					reports.map(finished => this.reports.add({ kind: "finished", finished }))
				);
				// recorded: the jobs they freed are queued, and take the room they held
				const ended = reports.map(r => r.jobExeId);
				if (this.windowed) this.windows.release(ended);
				this.roomHolds.settle(ended);
				return { ok: true };
			}
		}
	},

	events: {
		"queue.changed"(this: SchedulerThis, ctx: Context) {
			this.onHint(ctx);
		},
		"nodes.changed"(this: SchedulerThis, ctx: Context) {
			this.onHint(ctx);
		},
		/**
		 * A wake-up, from another replica or the nodes service; a replica that recorded
		 * executions' ends names them (`ended`): what they held here is free (room-holds.ts).
		 */
		"scheduler.wake"(this: SchedulerThis, ctx: Context<{ ended?: unknown } | undefined>) {
			const ended = ctx.params?.ended;
			if (Array.isArray(ended)) {
				const ids = ended.filter((id): id is number => Number.isInteger(id));
				if (this.windowed) this.windows.release(ids);
				this.roomHolds.settle(ids);
			}
			this.wake();
		},
		/**
		 * An agent that said goodbye (a DISCONNECT packet: it stopped) has its executions failed at
		 * once. One that fell silent (Moleculer's heartbeat timeout) is left to the lease: an
		 * agent restarted under its node ID is such a node for Moleculer until its first heartbeat,
		 * while it already runs what was placed on it (the soak saw those runs failed and run
		 * again); a dead one is lost a lease after it was last heard from (checkLost).
		 */
		"$node.disconnected"(
			this: SchedulerThis,
			ctx: Context<{ node: { id: string }; unexpected?: boolean }>
		) {
			const agentId = ctx.params?.node?.id;
			if (agentId) this.windows.forget(agentId);
			if (agentId && !ctx.params.unexpected && this.isLeader() && !this.cutOffLately())
				void this.failAgentExecutions(agentId);
		},
		/**
		 * This process lost NATS (lib/transport/bound-nats.ts tells it): nothing is placed until
		 * it is back, a run could reach no one.
		 */
		"$transporter.disconnected"(this: SchedulerThis, ctx: Context<{ graceFul: boolean }>) {
			if (ctx.params?.graceFul) return;
			this.disconnectedAt = Date.now();
			this.reach.down();
		},
		/**
		 * This process was cut off from NATS (a restart of the server, a partition): no agent
		 * could renew its lease or heartbeat meanwhile, so for a lease after the reconnect nothing
		 * is failed for want of them; an agent that really died is found when it is over. Work is
		 * placed on each agent again as soon as it answers a ping (lib/scheduling/reachability.ts).
		 */
		"$transporter.connected"(this: SchedulerThis, ctx: Context<{ wasReconnect: boolean }>) {
			if (!ctx.params?.wasReconnect) return;
			this.reconnectedAt = Date.now();
			this.reach.up();
		}
	},

	methods: {
		isLeader(): boolean {
			return this.leaderClient !== null;
		},

		/** Moleculer nodeIDs of the node agents registered in the cluster now. */
		listedAgents(): string[] {
			return this.broker.registry
				.getServiceList({ onlyAvailable: true })
				.filter((s: { name: string }) => s.name === "node-agent")
				.map((s: { nodeID?: string }) => s.nodeID as string);
		},

		/**
		 * The agents work is placed on: those registered, less those a run could not reach a
		 * moment ago (see setAside) and, around a NATS outage of this process, those not known
		 * to be back (lib/scheduling/reachability.ts).
		 */
		agentIds(): string[] {
			const now = Date.now();
			return this.reach
				.usable(this.listedAgents())
				.filter((id: string) => !((this.setAsideUntil.get(id) ?? 0) > now));
		},

		/**
		 * Places nothing on `agentId` for unreachableBackoffMs. An agent restarted under its
		 * nodeID is connected before its services run, and the registry still lists the old
		 * process's: a run there fails at once (SERVICE_NOT_FOUND), and without a pause the
		 * retries would go the same way and use up the job's tries in milliseconds.
		 */
		setAside(agentId: string) {
			if ((this.setAsideUntil.get(agentId) ?? 0) > Date.now()) return;
			this.setAsideUntil.set(agentId, Date.now() + this.settings.unreachableBackoffMs);
			this.logger.warn(
				`agent ${agentId} could not be reached: nothing is placed on it for ${this.settings.unreachableBackoffMs} ms`
			);
			setTimeout(() => {
				this.setAsideUntil.delete(agentId);
				this.wake();
			}, this.settings.unreachableBackoffMs).unref?.();
		},

		/** A wake-up hint: the leader wakes; another replica passes on a hint meant for one. */
		onHint(ctx: Context) {
			if (this.isLeader()) this.wake();
			else if (ctx.eventType === "emit") this.broker.broadcast("scheduler.wake");
		},

		/**
		 * Wakes the leader wherever it runs; `ended`: the executions whose ends this replica
		 * recorded, whose holds the leader lets go (its holds and windows are its own).
		 */
		wakeCluster(ended?: Iterable<number>) {
			if (this.isLeader()) this.wake();
			else
				this.broker.broadcast(
					"scheduler.wake",
					ended === undefined ? undefined : { ended: [...ended] }
				);
		},

		/** Runs work on the leader's connection one piece at a time (its transactions must not mix). */
		exclusive<T>(fn: () => Promise<T>): Promise<T> {
			const next = this.chain.then(fn, fn);
			this.chain = next.then(
				() => undefined,
				() => undefined
			);
			return next;
		},

		/** Starts the leader's scheduling passes (lib/scheduling/passes.ts). */
		wake() {
			this.passes.wake();
		},

		/**
		 * Hands placed executions to their agents (lib/scheduling/dispatch.ts); each agent's
		 * answer tells its launch window how it launches.
		 */
		dispatch(placed: PlacedExe[]) {
			this.placedExecutions.remember(placed);
			for (const p of placed)
				if (p.held)
					this.roomHolds.hold(p.id, p.node_id, {
						cpus: p.cpus * p.held,
						mem: p.mem * p.held,
						disk: p.disk_total * p.held
					});
			this.jobMeter?.placed(placed);
			// followers of their logs waiting for them to run (lib/http/execution-waits.ts)
			if (placed.length > 0)
				void this.broker.broadcast("job-exes.changed", { ids: placed.map(p => p.id) });
			if (!this.windowed) return dispatchPlaced(placed, this.dispatchLink);
			const tokens: Map<string, number> = this.windows.placedOn(placed.map(p => p.agent_id));
			for (const p of placed) this.windows.hold(p.agent_id, p.id, p.successors);
			return dispatchPlaced(placed, {
				...this.dispatchLink,
				run: (agentId: string, executions) =>
					this.dispatchLink.run(agentId, executions).then((answer: unknown) => {
						this.windows.told(
							agentId,
							(answer as RunAnswer | undefined)?.launch,
							tokens.get(agentId) ?? 0
						);
						return answer;
					})
			});
		},

		failExecution(failure: FailureRequest) {
			this.reports.add({ kind: "failure", failure }).catch((error: unknown) => {
				this.logger.error({ err: error, failure }, "cannot record a failure");
			});
		},

		cancelOnAgent(jobExeId: number, agentId: string) {
			this.broker
				.call("node-agent.cancel", { jobExeId }, { nodeID: agentId, retries: 0 })
				.catch(() => undefined);
		},

		/**
		 * Whether this process is cut off from NATS, or got its connection back less than a lease
		 * ago: no agent could reach it meanwhile.
		 */
		cutOffLately(): boolean {
			return (
				this.disconnectedAt > this.reconnectedAt ||
				Date.now() - this.reconnectedAt < this.settings.leaseMs
			);
		},

		/**
		 * How recent a node's heartbeat in the database must be for work to be placed on it: a
		 * lease, except for a lease after this replica took the lead or came back on NATS. Then
		 * heartbeats could not be recorded a moment ago (PostgreSQL or NATS was away: after 10 s
		 * of PostgreSQL down, placement waited up to a heartbeat more for want of them), and an
		 * agent is vouched for by the registry (and, after a NATS outage, by its answer to a
		 * ping: lib/scheduling/reachability.ts), as nothing is failed for want of them meanwhile.
		 */
		placementLeaseMs(): number {
			const grace =
				this.cutOffLately() || Date.now() - this.ledSince < this.settings.leadGraceMs;
			return grace ? ANY_HEARTBEAT_MS : this.settings.leaseMs;
		},

		/** Fails (node-lost) the executions whose agent is gone or out of its lease. */
		async checkLost() {
			if (!this.isLeader() || this.cutOffLately()) return;
			// A new leader gives every node a lease from the moment it took the lead: agents
			// kept running (and finishing) while no scheduler led, and their reports and
			// heartbeats are on their way; a lease before lost the ends of finished work.
			if (Date.now() - this.ledSince < this.settings.leadGraceMs) return;
			const lost: { id: number; agent_id: string | null }[] = await this.exclusive(() =>
				findLostExecutions(this.leaderSql, { leaseMs: this.settings.leaseMs })
			);
			const live = new Set<string>(this.listedAgents());
			const fresh = lost.filter(e => !this.lostPending.has(e.id));
			if (fresh.length > 0)
				this.logger.warn(
					{
						jobExeIds: fresh.map(e => e.id),
						agentIds: [...new Set(fresh.map(e => e.agent_id))]
					},
					"executions lost: their agent was not heard from for a lease, or left its node"
				);
			for (const exe of lost) {
				if (this.lostPending.has(exe.id)) continue;
				this.lostPending.add(exe.id);
				// An agent still there (a lease lapsed by a slow network) must stop it.
				if (exe.agent_id && live.has(exe.agent_id))
					this.cancelOnAgent(exe.id, exe.agent_id);
				this.reports
					.add({
						kind: "failure",
						failure: { jobExeId: exe.id, errorName: ERRORS.nodeLost }
					})
					.catch((error: unknown) =>
						this.logger.error({ err: error }, "cannot fail a lost execution")
					)
					.finally(() => this.lostPending.delete(exe.id));
			}
		},

		async failAgentExecutions(agentId: string) {
			try {
				const ids: number[] = await this.exclusive(() =>
					findExecutionsOfAgent(this.leaderSql, agentId)
				);
				if (ids.length > 0)
					this.logger.warn(
						{ jobExeIds: ids, agentId },
						"executions lost: their agent stopped (it said goodbye)"
					);
				for (const jobExeId of ids)
					this.failExecution({ jobExeId, errorName: ERRORS.nodeLost });
			} catch (error) {
				this.logger.warn(
					{ err: error, agentId },
					"cannot look up a lost agent's executions"
				);
			}
		},

		async tick() {
			if (!this.isLeader()) return;
			try {
				await this.checkLost();
			} catch (error) {
				this.logger.warn({ err: error }, "lost-agent check failed");
			}
			this.wake();
		},

		/** Logs and announces what the written reports changed (lib/executions/reports.ts). */
		afterWrite(result: FinishResult) {
			this.jobMeter?.ended(result);
			announceReports(result, {
				info: (fields, message) => this.logger.info(fields, message),
				warn: (fields, message) => this.logger.warn(fields, message),
				broadcast: (event, payload) => void this.broker.broadcast(event, payload),
				emit: (event, payload) => void this.broker.emit(event, payload),
				wakeScheduler: () => this.wakeCluster(result.ended)
			});
		}
	},

	created() {
		this.leaderClient = null as Client | null;
		this.leaderSql = null as Sql | null;
		this.placedExecutions = new PlacedExecutions();
		this.windowed = this.settings.launchWindowMs > 0;
		this.windows = new LaunchWindows({
			...DEFAULT_LAUNCH_WINDOW,
			windowMs: this.settings.launchWindowMs
		});
		this.roomHolds = new RoomHolds(ROOM_HOLD_MS);
		this.chain = Promise.resolve();
		this.lostPending = new Set<number>();
		this.setAsideUntil = new Map<string, number>();
		this.reconnectedAt = 0;
		this.disconnectedAt = 0;
		this.ledSince = 0;
		this.reach = new AgentReachability(
			{
				agents: () => this.listedAgents(),
				ping: async (ids, timeoutMs) => {
					const pongs = (await this.broker.ping(ids, timeoutMs)) as unknown as Record<
						string,
						unknown
					>;
					return ids.filter(id => pongs?.[id]);
				},
				wake: () => this.wake()
			},
			{ probeMs: this.settings.reachProbeMs, windowMs: this.settings.leaseMs }
		);
		this.dispatchLink = {
			buildSpecs: placed =>
				buildSpecs(poolSql(this.db), placed, this.settings.s3CredentialsToAgents),
			run: (agentId, executions) =>
				this.broker.call(
					"node-agent.run",
					{ executions },
					{ nodeID: agentId, retries: 0, timeout: this.settings.runTimeoutMs }
				),
			fail: failure => this.failExecution(failure),
			cancelOnAgent: (jobExeId, agentId) => this.cancelOnAgent(jobExeId, agentId),
			setAside: agentId => this.setAside(agentId),
			info: (fields, message) => this.logger.info(fields, message),
			warn: (fields, message) => this.logger.warn(fields, message),
			error: (fields, message) => this.logger.error(fields, message)
		} satisfies DispatchLink;
		this.metered = this.broker.isMetricsEnabled();
		this.jobMeter = null as JobMeter | null;
		if (this.metered) {
			registerMetrics(this.broker.metrics, [
				...SCHEDULER_DEFINITIONS,
				...JOB_OUTCOME_DEFINITIONS
			]);
			this.broker.metrics.set(METRICS.schedulerLeader, 0);
			this.jobMeter = new JobMeter(this.broker.metrics, {
				...OUTCOME_NAMES,
				queueWait: METRICS.queueWait,
				runTime: METRICS.runTime
			});
		}
		this.passes = new PassLoop(
			{
				isLeader: () => this.isLeader(),
				exclusive: fn => {
					const sql: Sql = this.leaderSql;
					return this.exclusive(() => fn(sql));
				},
				agentIds: () => this.agentIds(),
				placementLeaseMs: () => this.placementLeaseMs(),
				dispatch: placed => void this.dispatch(placed),
				gate: intakeGateOf(this.broker),
				passed: this.metered
					? seconds => {
							this.broker.metrics.increment(METRICS.schedulerPasses);
							this.broker.metrics.observe(METRICS.schedulerPassDuration, seconds);
						}
					: undefined,
				warn: (fields, message) => this.logger.warn(fields, message)
			},
			{ batchSize: this.settings.batchSize, maxScanRows: this.settings.maxScanRows },
			this.windowed ? this.windows : null,
			this.settings.handOff ? this.roomHolds : null
		);
		this.reportWriter = new ReportWriter(
			this.db,
			{
				handOff: this.settings.handOff,
				isLeader: () => this.isLeader(),
				agentIds: () => this.agentIds(),
				gate: intakeGateOf(this.broker),
				dispatch: placed => void this.dispatch(placed),
				announce: result => this.afterWrite(result),
				warn: (fields, message) => this.logger.warn(fields, message),
				error: (fields, message) => this.logger.error(fields, message)
			},
			this.roomHolds,
			this.placedExecutions
		);
		this.reports = new MicroBatcher<ReportItem, boolean>(
			items => this.reportWriter.flush(items),
			{
				delayMs: this.settings.flushMs,
				maxItems: this.settings.flushMaxItems,
				concurrency: this.settings.flushConcurrency
			}
		);
	},

	async started() {
		this.lock = new LeaderLock({
			url: databaseUrlOf(this.broker) as string,
			name: this.broker.nodeID,
			retryMs: this.settings.leaderRetryMs,
			reconnectMs: this.settings.leaderReconnectMs,
			onAcquired: (client: Client) => {
				this.leaderClient = client;
				this.leaderSql = clientSql(client);
				this.ledSince = Date.now();
				this.chain = Promise.resolve();
				this.logger.info("scheduler: leading");
				if (this.metered) this.broker.metrics.set(METRICS.schedulerLeader, 1);
				void this.tick();
			},
			onLost: (reason: string) => {
				this.leaderClient = null;
				this.leaderSql = null;
				this.passes.forget();
				this.logger.info({ reason }, "scheduler: no longer leading");
				if (this.metered) this.broker.metrics.set(METRICS.schedulerLeader, 0);
			},
			log: (message: string, error?: unknown) => this.logger.warn({ err: error }, message)
		});
		await this.lock.start();
		this.ticker = setInterval(() => void this.tick(), this.settings.tickMs);
		this.ticker.unref?.();
	},

	async stopped() {
		if (this.ticker) clearInterval(this.ticker);
		this.passes.stop();
		this.reach.stop();
		await this.lock?.stop();
		await this.chain;
		await this.reports.drain();
	}
};

export default SchedulerService;
