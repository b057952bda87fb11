import fs from "fs";
import path from "path";
import type { ResultsManifest } from "../documents/results";
import type { ContainerExit, Containers } from "./containers";
import { ExecutionFailure } from "./execution-failure";
import { openAgentFile, readTail } from "./files";
import { commandOf, prepareTaskDir, readResults, storeProducts } from "./steps";
import { stageInputs, planProducts, removeProducts, workspaceOf, type TaskDirs } from "./task";
import { LaunchError, type Launched, type Launcher, type TaskIdentity } from "./launcher";
import type { LaunchOrder } from "./launch-order";
import type { TaskIdentities } from "./task-identities";
import type {
	ExecutionFinished,
	ExecutionLogs,
	ExecutionSpec,
	ExecutionStep,
	ProducedFile,
	Step
} from "../documents/agent-protocol";

/** What every execution of one agent shares. */
export interface ExecutionContext {
	agentId: string;
	/** task directories are `<workDir>/tasks/<jobExeId>/` */
	workDir: string;
	launcher: Launcher;
	/** whether the launcher contains each task in a PID namespace of its own */
	contained: boolean;
	/** who tasks run as (null: the agent's own user) */
	identities: TaskIdentities | null;
	/** the node's Docker engine, for job types with an image */
	containers: Containers;
	/** SIGTERM → SIGKILL delay on a timeout or a cancel */
	killGraceMs: number;
	/** how much of stdout and of stderr the final report and the live logs carry (the tail) */
	logCapBytes: number;
	/** PATH given to tasks */
	taskPath: string;
	/** emptied task directories to reuse (none: each is made anew) */
	taskDirs?: TaskDirs;
	/** told of each step's start and end, in order; must not throw */
	onStep?: (step: ExecutionStep) => void;
	/** told once its process (or container) has been launched; must not throw */
	onLaunched?: (jobExeId: number) => void;
	/** the order processes are handed to the launcher in (rank first; absent: as they come) */
	launchOrder?: LaunchOrder;
	/** starts what the agent runs itself for a spec with a `task` (a strike's monitor) */
	launchBuiltin?: (spec: ExecutionSpec) => Launched;
}

export const DEFAULT_TASK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The task directory of an execution. */
export function taskDirOf(workDir: string, jobExeId: number): string {
	return path.join(workDir, "tasks", String(jobExeId));
}

type Phase = "new" | Step | "finished";

/**
 * One execution on this node: pre (stage inputs, make the output directory, substitute the
 * command arguments), main (the process, or the container, with the timeout) and post (results
 * manifest and ARTIFACT lines, products copied into their workspaces). `run()` answers the
 * report for `scheduler.exeFinished` and never throws.
 *
 * Outcomes:
 * - COMPLETED: main exited 0 and post found every required output.
 * - FAILED, errorName set: a SYSTEM problem the agent diagnosed — `task-launch` (bad spec,
 *   substitution, spawn error, launcher lost), `docker-task-launch` (no engine, no image, a
 *   privileged container this agent does not allow), `filesystem-io` (staging inputs or copying
 *   products failed), `timeout`, `node-shutdown` (`shutdown()`: the node drained and the
 *   execution had not ended in time), `unknown` (a bug); or `memory-limit` (ALGORITHM): the
 *   engine killed the container at the job type's mem_required.
 * - FAILED, errorName null, exitCode ≠ 0: the algorithm failed; the control plane maps the code.
 * - FAILED, errorName null, exitCode null: killed by a signal nobody here sent (OOM killer...).
 * - FAILED, errorName null, exitCode 0: the algorithm exited 0 but its results are unusable
 *   (invalid results manifest, a required output missing, a `file` output with several files,
 *   a path outside the task directory). These are the algorithm's fault, not the node's, so no
 *   SYSTEM error: retrying on another node would fail the same way. The control plane records
 *   them as an ALGORITHM error; errorDetail says which, and so does the last line of stderr.
 * - CANCELED: `cancel()` was called before the report was made.
 */
export class Execution {
	readonly taskDir: string;
	readonly inputsDir: string;
	/** input files read in place in an s3 bucket's mount (stageInputs) */
	private readonly mounted: string[] = [];
	readonly outputDir: string;
	readonly stdoutPath: string;
	readonly stderrPath: string;

	private phase: Phase = "new";
	private canceled = false;
	private timedOut = false;
	private stopped = false;
	/** why the node's drain stopped it (shutdown()), for its failure's detail */
	private shutdownDetail: string | null = null;
	private launched: Launched | null = null;
	private killTimer: NodeJS.Timeout | null = null;
	private readonly steps: ExecutionFinished["steps"] = {};
	private result: Promise<ExecutionFinished> | null = null;
	private finishedLogs: ExecutionLogs | null = null;
	/** the task directory is a recycled one (its log files exist, empty) */
	private recycled = false;
	/** after pre: the substituted command line, for the report */
	private commandArguments: string | undefined;
	/** how main ended, in words, for a non-zero exit */
	private exitDetail = "";
	/** the user and group the execution's processes run as (null: the agent's own) */
	identity: TaskIdentity | null = null;
	/** a line for stderr when a container ended well though the engine killed one of its processes */
	private oomNote = "";

	constructor(
		readonly spec: ExecutionSpec,
		private readonly ctx: ExecutionContext
	) {
		this.taskDir = taskDirOf(ctx.workDir, spec.jobExeId);
		this.inputsDir = path.join(this.taskDir, "inputs");
		this.outputDir = path.join(this.taskDir, "outputs");
		this.stdoutPath = path.join(this.taskDir, "stdout");
		this.stderrPath = path.join(this.taskDir, "stderr");
	}

	get isFinished(): boolean {
		return this.phase === "finished";
	}

	/** Runs the execution once (later calls answer the same promise). */
	run(): Promise<ExecutionFinished> {
		this.result ??= this.execute();
		return this.result;
	}

	/**
	 * Cancels: a running process gets SIGTERM, then SIGKILL after the grace period; an execution
	 * still in pre never starts its process. Answers false when it has already finished.
	 */
	cancel(): boolean {
		if (this.phase === "finished") return false;
		this.canceled = true;
		this.kill();
		return true;
	}

	/** The agent is stopping: SIGTERM (SIGKILL after the grace period); no process starts. */
	stop(): void {
		this.stopped = true;
		this.kill();
	}

	/**
	 * The node drains and this execution is not to end by itself: it fails as `node-shutdown`
	 * with `detail` (and the step it was stopped in), its process killed (SIGTERM, then SIGKILL
	 * after the grace period; SIGKILL at once with `now`); one still in pre never starts its
	 * process. Answers false, and does nothing, once its process has ended (post: its outputs
	 * are being stored, which is not to be thrown away) or it has finished.
	 */
	shutdown(detail: string, now = false): boolean {
		if (this.phase === "post" || this.phase === "finished") return false;
		this.shutdownDetail ??= detail;
		if (now && this.launched) this.launched.kill("SIGKILL");
		else this.kill();
		return true;
	}

	/** Whether its process runs, or is still to start (shutdown() would stop it). */
	get isStoppable(): boolean {
		return this.phase !== "post" && this.phase !== "finished";
	}

	/** stdout and stderr so far (their last logCapBytes each), read from the task's files. */
	async logs(): Promise<ExecutionLogs> {
		if (this.finishedLogs) return this.finishedLogs;
		const [stdout, stderr] = await Promise.all([
			readTail(this.stdoutPath, this.ctx.logCapBytes),
			readTail(this.stderrPath, this.ctx.logCapBytes)
		]);
		return { stdout, stderr, is_finished: this.phase === "finished" };
	}

	private checkCanceled(when: string): void {
		if (this.canceled) throw new ExecutionFailure(null, `canceled ${when}`);
		if (this.shutdownDetail !== null)
			throw new ExecutionFailure("node-shutdown", `${this.shutdownDetail}: stopped ${when}`);
		if (this.stopped) throw new ExecutionFailure(null, `the agent stopped ${when}`);
	}

	/** Whether it is to stop: canceled, shut down (the node drains) or the agent stopping. */
	private get halted(): boolean {
		return this.canceled || this.stopped || this.shutdownDetail !== null;
	}

	private now(): string {
		return new Date().toISOString();
	}

	private stepStarted(step: Step): void {
		this.phase = step;
		const at = this.now();
		this.steps[step] = { started: at };
		this.ctx.onStep?.({
			jobExeId: this.spec.jobExeId,
			agentId: this.ctx.agentId,
			step,
			event: "started",
			at
		});
	}

	private stepCompleted(step: Step, exitCode: number | null, commandArguments?: string): void {
		const at = this.now();
		this.steps[step] = { ...this.steps[step], completed: at, exitCode };
		const event: ExecutionStep = {
			jobExeId: this.spec.jobExeId,
			agentId: this.ctx.agentId,
			step,
			event: "completed",
			at,
			exitCode
		};
		if (commandArguments !== undefined)
			event.commandArguments = this.commandArguments = commandArguments;
		this.ctx.onStep?.(event);
	}

	/** SIGTERM now, SIGKILL after the grace period (and the container removed, for docker). */
	private kill(): void {
		const launched = this.launched;
		if (!launched || this.killTimer) return;
		launched.kill("SIGTERM");
		this.killTimer = setTimeout(() => launched.kill("SIGKILL"), this.ctx.killGraceMs);
		this.killTimer.unref();
	}

	private async execute(): Promise<ExecutionFinished> {
		let exitCode: number | null = null;
		let status: ExecutionFinished["status"] = "FAILED";
		let errorName: string | null = null;
		let errorDetail: string | null = null;
		let products: ProducedFile[] = [];
		let manifest: ResultsManifest | null = null;
		try {
			const launch = await this.pre();
			this.checkCanceled("before its process started");
			exitCode = await this.main(launch);
			this.checkCanceled("while its process ran");
			if (this.timedOut)
				throw new ExecutionFailure(
					"timeout",
					`the process ran longer than its timeout of ${this.spec.timeout} s and was killed`
				);
			if (exitCode !== 0) throw new ExecutionFailure(null, this.exitDetail);
			({ products, manifest } = await this.post());
			if (this.canceled || this.stopped) {
				await removeProducts(this.spec, products);
				products = [];
				this.checkCanceled("while its outputs were stored");
			}
			status = "COMPLETED";
		} catch (error) {
			const failure =
				error instanceof ExecutionFailure
					? error
					: new ExecutionFailure(
							"unknown",
							`the agent failed: ${(error as Error)?.stack ?? error}`
						);
			errorName = failure.errorName;
			errorDetail = failure.detail;
			if (this.phase !== "new" && this.phase !== "finished") {
				const step = this.phase;
				// a launch that failed: its step ends where it began
				if (this.steps[step] === undefined) this.stepStarted(step);
				if (this.steps[step]?.completed === undefined)
					this.stepCompleted(step, step === "main" ? exitCode : 1);
			}
			if (this.canceled) {
				status = "CANCELED";
				errorName = null;
			}
		}
		const note =
			status === "FAILED" && errorDetail
				? await this.noteInStderr(errorDetail)
				: this.oomNote && (await this.noteInStderr(this.oomNote));
		const [stdout, stderr] = await Promise.all([
			readTail(this.stdoutPath, this.ctx.logCapBytes).catch(() => ""),
			readTail(this.stderrPath, this.ctx.logCapBytes)
				.catch(() => "")
				.then(tail => tail + note)
		]);
		this.finishedLogs = { stdout, stderr, is_finished: true };
		this.phase = "finished";
		const report: ExecutionFinished = {
			jobExeId: this.spec.jobExeId,
			agentId: this.ctx.agentId,
			status,
			exitCode,
			errorName,
			errorDetail,
			products,
			resultsManifest: manifest,
			parseResults: manifest?.parse_results ?? [],
			stdout,
			stderr,
			steps: this.steps
		};
		if (this.commandArguments !== undefined) report.commandArguments = this.commandArguments;
		return report;
	}

	/**
	 * Why the execution failed, as the last line of its stderr: the logs are where a user looks
	 * (`/job-executions/{id}/logs/`), as Scale's own pre and post steps wrote theirs there. The
	 * line goes into the file, so the live logs show it too; answered only when the file could
	 * not take it (a task directory never made), to be added to what was read.
	 */
	private async noteInStderr(detail: string): Promise<string> {
		const line = `scale: ${detail}\n`;
		try {
			const fd = openAgentFile(
				this.stderrPath,
				fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT
			);
			if (fd === null) return line;
			try {
				fs.writeSync(fd, line);
			} finally {
				fs.closeSync(fd);
			}
			return "";
		} catch {
			return line;
		}
	}

	// ---------------------------------------------------------------- pre

	/** Stages the inputs, makes the directories, and answers what main is to run. */
	private async pre(): Promise<{ command: string; args: string[]; display: string }> {
		this.stepStarted("pre");
		const spec = this.spec;
		if (this.ctx.identities) {
			this.identity = this.ctx.identities.take();
			if (!this.identity)
				throw new ExecutionFailure(
					"task-launch",
					`every task identity of this agent is in use (${this.ctx.identities.description})`
				);
		}
		// a container of the image's own user, whoever that is, must write its outputs
		this.recycled = await prepareTaskDir(
			this.taskDir,
			this.outputDir,
			this.ctx.taskDirs,
			this.identity,
			this.writer() === undefined && spec.jobType.usesDocker
		);
		const values = await stageInputs(
			this.spec,
			this.inputsDir,
			() => this.halted,
			this.identity ?? undefined,
			this.mounted
		);
		// a required output will need its workspace: better to fail before running than after
		for (const output of spec.interface.output_data)
			if (output.required) workspaceOf(this.spec, output.name);
		const launch = commandOf(spec, values, this.outputDir);
		this.stepCompleted("pre", 0, launch.display);
		return launch;
	}

	/** The uid the job's files are written by, when known (see resolveConfined). */
	private writer(): number | undefined {
		if (!this.identity) return undefined;
		const jobType = this.spec.jobType;
		if (
			jobType.usesDocker &&
			(jobType.dockerPrivileged || this.ctx.containers.settings.imageUser)
		)
			return undefined;
		return this.identity.uid;
	}

	private taskEnv(): Record<string, string> {
		return { HOME: this.taskDir, SCALE_JOB_EXE_ID: String(this.spec.jobExeId) };
	}

	// ---------------------------------------------------------------- main

	/** Runs the process; answers its exit code (null when killed by a signal). */
	private async main(launch: { command: string; args: string[] }): Promise<number | null> {
		// a launch that fails is this step's failure; its start is the process's (below), not
		// the request's, which may wait behind other launches
		this.phase = "main";
		const spec = this.spec;
		if (spec.task && !this.ctx.launchBuiltin)
			throw new ExecutionFailure(
				"task-launch",
				`this agent cannot run a ${spec.task.kind} task`
			);
		if (spec.jobType.usesDocker) {
			const problem = await this.ctx.containers.problem();
			if (problem) throw new ExecutionFailure("docker-task-launch", problem);
			this.launched = await this.ctx.containers.launch({
				jobExeId: spec.jobExeId,
				image: spec.jobType.dockerImage!,
				privileged: spec.jobType.dockerPrivileged,
				taskDir: this.taskDir,
				readOnly: this.mounted,
				cpus: spec.resources.cpus,
				memMiB: spec.resources.mem,
				env: this.taskEnv(),
				command: launch.command,
				args: launch.args,
				identity: this.identity ?? undefined,
				stdoutPath: this.stdoutPath,
				stderrPath: this.stderrPath,
				outputFilesEmpty: this.recycled
			});
		} else {
			// a process waits for its turn among the agent's launches: rank order (LaunchOrder)
			const endTurn = spec.task ? undefined : await this.ctx.launchOrder?.turn(spec.rank);
			try {
				if (endTurn) this.checkCanceled("before its process started");
				this.launched = await this.launchProcess(launch);
			} finally {
				endTurn?.();
			}
		}
		this.stepStarted("main");
		this.ctx.onLaunched?.(spec.jobExeId);
		if (this.halted) this.kill();
		let timer: NodeJS.Timeout | null = null;
		if (spec.timeout > 0 && !spec.jobType.isLongRunning) {
			timer = setTimeout(() => {
				this.timedOut = true;
				this.kill();
			}, spec.timeout * 1000);
		}
		const status = await this.launched.exited;
		if (timer) clearTimeout(timer);
		if (this.killTimer) clearTimeout(this.killTimer);
		// what the task left running in its process group goes with it (the native launcher
		// has done so already: here it would cost a failing system call and an exception)
		if (!status.groupKilled && this.launched.pid > 0)
			try {
				process.kill(-this.launched.pid, "SIGKILL");
			} catch {
				// nothing left
			}
		this.stepCompleted("main", status.code);
		if (status.failed) throw new ExecutionFailure("task-launch", status.failed);
		if (status.lost)
			throw new ExecutionFailure(
				spec.jobType.usesDocker ? "docker-task-launch" : "task-launch",
				`the process was lost: ${status.lost}`
			);
		if ((status as ContainerExit).oomKilled) {
			const limit = `its memory limit of ${Math.ceil(spec.resources.mem)} MiB (mem_required)`;
			if (status.code !== 0 && !this.timedOut && !this.halted)
				throw new ExecutionFailure(
					"memory-limit",
					`the container was killed at ${limit} (exit code ${status.code})`
				);
			this.oomNote = `a process of the container was killed at ${limit}`;
		}
		this.exitDetail =
			status.code === null
				? `the process was killed by ${status.signal}`
				: `the process exited with code ${status.code}`;
		return status.code;
	}

	/** Starts the process (or the agent's own task); a launch that fails is `task-launch`. */
	private async launchProcess(launch: { command: string; args: string[] }): Promise<Launched> {
		const spec = this.spec;
		try {
			return spec.task && this.ctx.launchBuiltin
				? this.ctx.launchBuiltin(spec)
				: await this.ctx.launcher.launch({
						command: launch.command,
						args: launch.args,
						cwd: this.taskDir,
						env: { PATH: this.ctx.taskPath, ...this.taskEnv() },
						stdoutPath: this.stdoutPath,
						stderrPath: this.stderrPath,
						outputFilesEmpty: this.recycled,
						identity: spec.task ? undefined : (this.identity ?? undefined),
						contained: !spec.task && this.ctx.contained
					});
		} catch (error) {
			const detail =
				error instanceof LaunchError && error.code === "ENOENT"
					? `"${launch.command}" was not found`
					: `"${launch.command}" could not be started: ${(error as Error).message}`;
			throw new ExecutionFailure("task-launch", detail);
		}
	}

	// ---------------------------------------------------------------- post

	private async post(): Promise<{ products: ProducedFile[]; manifest: ResultsManifest | null }> {
		this.stepStarted("post");
		const merged = await readResults(this.outputDir, this.stdoutPath);
		const planned = await planProducts(this.spec, merged, {
			outputDir: this.outputDir,
			taskDir: this.taskDir,
			owner: this.writer()
		});
		const products = await storeProducts(
			this.spec,
			planned,
			() => this.canceled || this.stopped
		);
		this.stepCompleted("post", 0);
		return { products, manifest: merged };
	}
}
