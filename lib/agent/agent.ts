import crypto from "crypto";
import fs from "fs";
import path from "path";
import type { Readable } from "stream";
import { Containers, DEFAULT_CONTAINER_SETTINGS, type ContainerSettings } from "./containers";
import { Drains, type DrainOptions, type DrainOutcome } from "./drain";
import { DEFAULT_TASK_PATH, Execution, taskDirOf } from "./execution";
import {
	createLauncher,
	PacedLauncher,
	type Launched,
	type Launcher,
	type LauncherChoice
} from "./launcher";
import { LaunchMeter } from "./launch-meter";
import { LaunchOrder } from "./launch-order";
import { LogTails } from "./log-tails";
import { ExecutionMemory } from "./execution-memory";
import { TaskDirs } from "./task";
import { DEFAULT_TASK_UIDS, taskIdentities, type TaskIdentities } from "./task-identities";
import {
	LOG_TAIL_BYTES,
	type ExecutionFinished,
	type ExecutionLogs,
	type ExecutionSpec,
	type ExecutionStep,
	type LaunchState
} from "../documents/agent-protocol";

export interface AgentOptions {
	/** the agent's Moleculer nodeID */
	agentId: string;
	workDir: string;
	/** launcher processes (0: spawn from this process) */
	launchers: number;
	/**
	 * benches only: each launch takes at least this long, one at a time (a machine whose
	 * process spawning is slow); 0 or absent: as fast as the launchers go
	 */
	slowLaunchMs?: number;
	/** which launcher processes; default "auto" (native where it can be compiled) */
	launcher?: LauncherChoice;
	/** SIGTERM → SIGKILL delay on a timeout, a cancel or a stop; default 5 s */
	killGraceMs?: number;
	/** the node's stable id (its slave id): the label of its containers */
	node: string;
	/** the Docker engine and what its containers may do; default DEFAULT_CONTAINER_SETTINGS */
	containers?: ContainerSettings;
	/** one user every task runs as (AGENT_TASK_USER); default: a uid of its own per execution */
	taskUser?: string | null;
	/** the uids executions get, when the agent is root and no taskUser is named */
	taskUids?: { first: number; count: number };
	/** tail of stdout and of stderr carried by reports and live logs; default LOG_TAIL_BYTES */
	logCapBytes?: number;
	/** PATH given to tasks; default the agent's own PATH, else a standard one */
	taskPath?: string;
	/** how long the task directory of a FAILED or CANCELED execution is kept; default 24 h */
	keepFailedMs?: number;
	/** how long a cancel of an execution not held here keeps its run from starting; default 60 s */
	cancelMemoryMs?: number;
	/**
	 * Sends step events of running executions, gathered for stepDelayMs (best effort: a
	 * rejection is ignored). One call at a time, in order; an execution's report waits for the
	 * call carrying its steps. Steps of an execution that ends before they are sent are not sent:
	 * its report carries them.
	 */
	sendSteps(steps: ExecutionStep[]): Promise<unknown>;
	/** how long step events are gathered before they are sent; default 200 ms */
	stepDelayMs?: number;
	/**
	 * Delivers the report of a finished execution; resolves once the control plane has
	 * acknowledged it (the caller retries as long as it takes) or the agent stops.
	 */
	deliver(finished: ExecutionFinished): Promise<void>;
	/** told of problems worth a log line */
	warn?(message: string): void;
	/** starts what the agent runs itself for a spec with a `task` (a strike's monitor) */
	launchBuiltin?: (spec: ExecutionSpec) => Launched;
}

/** Where task directories go when tasks cannot reach the work directory (openTaskRoot). */
const MOVED_TASK_ROOT = "/var/lib/scale-agent";

/** The nearest folder above `dir` that users other than its owner cannot pass through, if any. */
function closedAncestor(dir: string): string | null {
	for (let at = path.dirname(dir); ; at = path.dirname(at)) {
		if ((fs.statSync(at).mode & 0o001) === 0) return at;
		if (path.dirname(at) === at) return null;
	}
}

/**
 * The executions of one node, without Moleculer: starts them (once per id), cancels them,
 * serves their logs, reports their steps and results through the given functions, and cleans
 * their task directories up.
 *
 * Task directories: removed once a COMPLETED report is acknowledged (the products are in their
 * workspaces). A FAILED or CANCELED one is kept for debugging, minus its `inputs/` (copies of
 * workspace files), and removed by `prune()` once older than keepFailedMs.
 */
export class NodeAgent {
	private readonly launcher: Launcher;
	/** the backlog and rate of launches, for the scheduler's launch window */
	private readonly meter = new LaunchMeter();
	/**
	 * processes go to the launchers in rank order, ~16 ms of launches at their best rate at a time
	 * (at least 16): more would launch in the order they came, fewer leave the launchers idle
	 * while the event loop is busy (docs/decisions.md, "The agent launches in rank order")
	 */
	private readonly launchOrder = new LaunchOrder(() =>
		Math.max(16, Math.round(this.meter.state().rate * 0.016))
	);
	/** the launcher chosen, for the start log */
	readonly launcherDescription: string;
	private readonly taskDirs: TaskDirs;
	/** the folder of `tasks/` and `spare/`: the work directory, unless tasks cannot reach it */
	readonly taskRoot: string;
	readonly containers: Containers;
	/** who tasks run as (null: the agent's own user), and whether each is in a PID namespace */
	private readonly identities: TaskIdentities | null;
	private readonly contained: boolean;
	/** running, or finished with the report not yet acknowledged */
	private readonly executions = new Map<number, Execution>();
	/** canceled before they arrived, not started: their CANCELED report not yet acknowledged */
	private readonly refused = new Set<number>();
	/** finished here, and cancels that came before their run */
	private readonly memory: ExecutionMemory;
	/** executions held here whose cancel has been asked for */
	private readonly cancelAsked = new Set<number>();
	/** the executions whose logs are followed, and each reader's stream of them */
	private readonly tails: LogTails;
	/** step events not sent yet */
	/** by execution: one that ends drops its own at once, whatever else waits */
	private outbox = new Map<number, ExecutionStep[]>();
	private outboxTimer: NodeJS.Timeout | null = null;
	/** the step calls made so far, settled in order */
	private sending: Promise<void> = Promise.resolve();
	private readonly work = new Set<Promise<void>>();
	private stopping = false;
	/** the node drains: runs are handed back (see drain()) */
	private readonly drains = new Drains({
		executions: this.executions,
		work: this.work,
		killGraceMs: () => this.killGraceMs
	});

	constructor(private readonly options: AgentOptions) {
		this.tails = new LogTails(options.logCapBytes ?? LOG_TAIL_BYTES);
		this.memory = new ExecutionMemory(options.cancelMemoryMs ?? 60_000);
		const chosen = createLauncher(options.launchers, options.launcher ?? "auto");
		const slowMs = options.slowLaunchMs ?? 0;
		this.launcher = slowMs > 0 ? new PacedLauncher(chosen.launcher, slowMs) : chosen.launcher;
		this.launcherDescription =
			slowMs > 0
				? `${chosen.description}, slowed to one launch per ${slowMs} ms (a bench's option)`
				: chosen.description;
		if (chosen.fallback) options.warn?.(`${chosen.fallback}; Node launchers are used instead`);
		this.containers = new Containers(
			options.containers ?? DEFAULT_CONTAINER_SETTINGS,
			options.node
		);
		const isRoot = process.geteuid?.() === 0;
		this.identities = taskIdentities({
			user: options.taskUser ?? null,
			uids: options.taskUids ?? DEFAULT_TASK_UIDS,
			isRoot
		});
		this.contained = isRoot && chosen.contains;
		this.taskRoot = this.identities ? this.openTaskRoot() : options.workDir;
		this.taskDirs = new TaskDirs(this.taskRoot);
		if (!isRoot)
			options.warn?.(
				"the agent does not run as root: its tasks run as its own user, can read what it can, and are not contained in PID namespaces"
			);
		else if (!chosen.contains)
			options.warn?.(
				"the launchers cannot contain tasks in PID namespaces (the native launcher is needed): a task's processes are killed by process group only"
			);
	}

	/**
	 * Where task directories live (`tasks/`, `spare/`). Tasks run as users of their own, who must
	 * pass through the folders above their directories: these may be passed through by anyone and
	 * listed by the agent only. When a folder above the work directory is closed to others (a
	 * clone under root's home, mode 700), task directories are kept under MOVED_TASK_ROOT instead,
	 * as the embedded PostgreSQL's data is, and the agent says so.
	 */
	private openTaskRoot(): string {
		const workDir = path.resolve(this.options.workDir);
		fs.mkdirSync(workDir, { recursive: true });
		let root = workDir;
		const closed = closedAncestor(workDir);
		if (closed) {
			const hash = crypto.createHash("sha1").update(workDir).digest("hex").slice(0, 12);
			root = path.join(MOVED_TASK_ROOT, hash);
			this.options.warn?.(
				`${closed} cannot be passed through by other users, so tasks (which run as users of their own) could not reach directories under ${workDir}: task directories are kept under ${root} instead`
			);
			fs.mkdirSync(MOVED_TASK_ROOT, { recursive: true });
			fs.chmodSync(MOVED_TASK_ROOT, 0o711);
		}
		const tasks = path.join(root, "tasks");
		fs.mkdirSync(tasks, { recursive: true });
		fs.chmodSync(root, 0o711);
		fs.chmodSync(tasks, 0o711);
		return root;
	}

	/** Who tasks run as and how they are contained, for the start log. */
	get isolationDescription(): string {
		const who = this.identities?.description ?? "the agent's own user";
		return `${who}; ${this.contained ? "a PID namespace per execution" : "no PID namespace"}`;
	}

	private get killGraceMs(): number {
		return this.options.killGraceMs ?? 5000;
	}

	/**
	 * Starts an execution in the background ("started"). Does nothing when this id is already
	 * running or finished here ("known": a repeated `node-agent.run`) or the agent is stopping.
	 * One whose cancel came first ("canceled": the control plane canceled it after placing it,
	 * and the cancel overtook the run) is not started; it is reported CANCELED all the same, so
	 * that the control plane hears of its end as of any other. One that arrives while the node
	 * drains ("handed back": placed before the control plane knew) is not started either: it is
	 * reported FAILED as `node-shutdown`, which queues its job again without counting a try.
	 */
	run(spec: ExecutionSpec): "started" | "known" | "canceled" | "handed back" | "stopping" {
		const id = spec.jobExeId;
		if (this.stopping) return "stopping";
		if (this.executions.has(id) || this.refused.has(id) || this.memory.finished(id))
			return "known";
		if (this.memory.takeEarlyCancel(id)) {
			this.refuse(spec);
			return "canceled";
		}
		const draining = this.drains.handBack();
		if (draining !== null) {
			this.refuse(spec, `the node is draining (${draining}): handed back before it started`);
			return "handed back";
		}
		const execution = new Execution(spec, {
			agentId: this.options.agentId,
			workDir: this.taskRoot,
			launcher: this.launcher,
			contained: this.contained,
			identities: this.identities,
			containers: this.containers,
			killGraceMs: this.killGraceMs,
			logCapBytes: this.options.logCapBytes ?? LOG_TAIL_BYTES,
			taskPath: this.options.taskPath ?? process.env.PATH ?? DEFAULT_TASK_PATH,
			taskDirs: this.taskDirs,
			onStep: step => this.step(step),
			onLaunched: launchedId => this.meter.launched(launchedId),
			launchOrder: this.launchOrder,
			launchBuiltin: this.options.launchBuiltin
		});
		this.executions.set(id, execution);
		this.meter.accepted(id);
		const work = this.complete(execution).catch(error =>
			this.options.warn?.(`execution ${id}: ${error?.stack ?? error}`)
		);
		this.work.add(work);
		void work.finally(() => this.work.delete(work));
		return "started";
	}

	/** The launch pipeline now: executions not launched yet, and the rate while busy. */
	launchState(): LaunchState {
		return this.meter.state();
	}

	/**
	 * Queues a step event. Short executions (most) end before the outbox is sent and their steps
	 * ride with the report; a long one's show up on the control plane within stepDelayMs.
	 */
	private step(step: ExecutionStep): void {
		const steps = this.outbox.get(step.jobExeId);
		if (steps) steps.push(step);
		else this.outbox.set(step.jobExeId, [step]);
		this.outboxTimer ??= setTimeout(() => this.sendOutbox(), this.options.stepDelayMs ?? 200);
	}

	private sendOutbox(): void {
		this.outboxTimer = null;
		const batch = [...this.outbox.values()].flat();
		this.outbox.clear();
		if (batch.length === 0) return;
		this.sending = this.sending.then(() =>
			this.options.sendSteps(batch).then(
				() => undefined,
				error =>
					this.options.warn?.(
						`${batch.length} step events of executions ${[...new Set(batch.map(s => s.jobExeId))].join(", ")} were not reported: ${error?.message ?? error}`
					)
			)
		);
	}

	private async complete(execution: Execution): Promise<void> {
		const id = execution.spec.jobExeId;
		let report: ExecutionFinished;
		try {
			report = await execution.run();
			// the report carries every step: the ones not sent yet need not be
			this.outbox.delete(id);
			await this.sending;
			if (this.stopping) return;
			await this.options.deliver(report);
			if (this.stopping) return;
		} finally {
			this.meter.dropped(id);
			this.executions.delete(id);
			this.cancelAsked.delete(id);
			this.memory.finish(id);
		}
		await this.cleanUp(execution, report.status).catch(error =>
			this.options.warn?.(
				`execution ${id}: its task directory was not cleaned up: ${error?.message ?? error}`
			)
		);
		// only now: nothing the execution's identity owns is within its reach any more
		if (execution.identity) this.identities?.give(execution.identity);
	}

	/**
	 * Reports an execution not started here, held (listed as running) until acknowledged:
	 * CANCELED, its cancel having come first; or, with `shutdown`, FAILED as `node-shutdown` (the
	 * node drains), that detail the last line of its stderr as of any failure the agent diagnoses.
	 */
	private refuse(spec: ExecutionSpec, shutdown?: string): void {
		const id = spec.jobExeId;
		this.refused.add(id);
		const report: ExecutionFinished = {
			jobExeId: id,
			agentId: this.options.agentId,
			status: shutdown ? "FAILED" : "CANCELED",
			exitCode: null,
			errorName: shutdown ? "node-shutdown" : null,
			errorDetail: shutdown ?? "canceled before it reached the agent: not started",
			products: [],
			resultsManifest: null,
			parseResults: [],
			stdout: "",
			stderr: shutdown ? `scale: ${shutdown}\n` : "",
			steps: {}
		};
		const work = (async () => {
			try {
				await this.options.deliver(report);
			} finally {
				this.refused.delete(id);
				this.memory.finish(id);
			}
		})().catch(error => this.options.warn?.(`execution ${id}: ${error?.stack ?? error}`));
		this.work.add(work);
		void work.finally(() => this.work.delete(work));
	}

	private async cleanUp(execution: Execution, status: ExecutionFinished["status"]) {
		if (status !== "COMPLETED") {
			await fs.promises.rm(execution.inputsDir, { recursive: true, force: true });
			// kept for the operator; a later execution given the same uid cannot enter it
			if (execution.identity)
				await fs.promises.chown(execution.taskDir, process.geteuid!(), process.getegid!());
			return;
		}
		// a task that left only its logs and an empty output directory (the common case) is kept
		// for the next execution; anything else goes
		const kept = await this.taskDirs.give(execution.taskDir, [
			execution.stdoutPath,
			execution.stderrPath
		]);
		if (!kept) await fs.promises.rm(execution.taskDir, { recursive: true, force: true });
	}

	/**
	 * Cancels an execution running here; false when there is none (unknown or finished). An id
	 * this agent has never had is remembered for cancelMemoryMs: the scheduler hands an execution
	 * over after committing its placement, so a cancel committed just after may arrive first, and
	 * the run that follows must not start a process nobody would stop.
	 */
	cancel(jobExeId: number): boolean {
		const execution = this.executions.get(jobExeId);
		if (execution) {
			const found = execution.cancel();
			if (found) this.cancelAsked.add(jobExeId);
			return found;
		}
		if (!this.refused.has(jobExeId) && !this.memory.finished(jobExeId))
			this.memory.rememberCancel(jobExeId);
		return false;
	}

	/**
	 * Cancels executions the control plane has ended (a heartbeat answer); answers those whose
	 * cancel is news here (a process that ran though it should not), not the ones canceled already.
	 */
	cancelEnded(jobExeIds: readonly number[]): number[] {
		return jobExeIds.filter(id => !this.cancelAsked.has(id) && this.cancel(id));
	}

	/**
	 * A follower of an execution's logs as they are written (frames, lib/agent/log-tail.ts),
	 * ending when the execution ends; null when this agent does not run it.
	 */
	followLogs(jobExeId: number, reader = ""): Readable | null {
		const execution = this.executions.get(jobExeId);
		return execution ? this.tails.follow(jobExeId, execution, reader) : null;
	}

	/** Ends `reader`'s stream of an execution's logs; false when it had none. */
	unfollowLogs(jobExeId: number, reader = ""): boolean {
		return this.tails.unfollow(jobExeId, reader);
	}

	/** A reader gone (its node left the cluster): its streams end. */
	readerGone(reader: string): void {
		this.tails.readerGone(reader);
	}

	/** The streams of followed logs this agent sends (one per reader and execution). */
	get logStreams(): number {
		return this.tails.streams;
	}

	/** Live logs of an execution here, or null when this agent does not have it (any more). */
	async logs(jobExeId: number): Promise<ExecutionLogs | null> {
		const execution = this.executions.get(jobExeId);
		return execution ? execution.logs() : null;
	}

	/**
	 * The executions this node has: running, and finished with the report not yet acknowledged
	 * (so the control plane does not fail as lost an execution whose result is on its way).
	 */
	running(): number[] {
		return [...this.executions.keys(), ...this.refused];
	}

	/** Removes kept task directories (of failed and canceled executions) older than keepFailedMs. */
	async prune(): Promise<void> {
		const tasks = path.join(this.taskRoot, "tasks");
		const keepMs = this.options.keepFailedMs ?? 24 * 3600 * 1000;
		let names: string[];
		try {
			names = await fs.promises.readdir(tasks);
		} catch {
			return;
		}
		const now = Date.now();
		for (const name of names) {
			if (this.executions.has(Number(name))) continue;
			const dir = taskDirOf(this.taskRoot, Number(name));
			if (dir !== path.join(tasks, name)) continue;
			try {
				const stat = await fs.promises.stat(dir);
				if (now - stat.mtimeMs > keepMs)
					await fs.promises.rm(dir, { recursive: true, force: true });
			} catch {
				// gone meanwhile
			}
		}
	}

	/** Whether the node drains (drain() called, not undone). */
	get draining(): boolean {
		return this.drains.active;
	}

	/** Drains the node (lib/agent/drain.ts, Drains.start). */
	drain(options: DrainOptions): Promise<DrainOutcome> {
		return this.drains.start(options);
	}

	/** What the drain under way (or over, the node still drained) has come to so far. */
	drainOutcome(): DrainOutcome | null {
		return this.drains.outcome();
	}

	/** Resolves true once nothing is held here, false after `ms` (Drains.idle). */
	idle(ms: number): Promise<boolean> {
		return this.drains.idle(ms);
	}

	/** Cuts a drain short (a second SIGTERM or SIGINT): Drains.hurry. */
	hurry(why: string): void {
		this.drains.hurry(why);
	}

	/** Calls a drain off (a user's drain ended): runs are taken again. */
	undrain(): void {
		this.drains.undo();
	}

	/**
	 * Stops: running processes get SIGTERM (SIGKILL after the grace period), no further reports
	 * are made (the control plane fails these executions as node-lost), the launchers exit.
	 */
	async stop(): Promise<void> {
		if (this.stopping) return;
		this.stopping = true;
		if (this.outboxTimer) clearTimeout(this.outboxTimer);
		this.outboxTimer = null;
		this.outbox.clear();
		for (const execution of this.executions.values()) execution.stop();
		const ended = Promise.all([...this.work]);
		let timer: NodeJS.Timeout | undefined;
		await Promise.race([
			ended,
			new Promise(resolve => (timer = setTimeout(resolve, this.killGraceMs + 1000)))
		]);
		clearTimeout(timer);
		await this.launcher.stop();
	}
}
