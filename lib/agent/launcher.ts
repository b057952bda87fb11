import { fork, type ChildProcess } from "child_process";
import crypto from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import {
	LAUNCHER_ENV,
	NativeLauncherProcess,
	nativeLauncherBinary,
	watchLauncher,
	type NativeBinary
} from "./native-launcher";
import {
	signalGroup,
	spawnTask,
	type FromLauncher,
	type SpawnMessage,
	type ToLauncher
} from "./launcher-child";

/**
 * How the agent starts task processes: through a pool of small launcher processes, native ones
 * (native/launcher.c, posix_spawn, compiled at the first start where a C compiler is found) or
 * forked Node ones (lib/agent/launcher-child.ts) otherwise, with each task's stdout and stderr
 * going straight to files in its task directory.
 *
 * Measured with lib/agent/launch-bench.ts (`node dist/lib/agent/launch-bench.js 3000 32`: 3,000
 * `/bin/true` tasks, 32 in flight, output to files; 2 vCPU VM, Node 20; CPU counts the launchers
 * and the tasks):
 *
 *   agent heap   direct spawn from the agent   pool of 2 Node launchers   pool of 2 native ones
 *   ~10 MB       1142/s, 1.34 ms CPU each      1501/s, 1.33 ms            3086/s, 0.62 ms
 *   ~230 MB       486/s, 2.63 ms               1451/s, 1.40 ms            3025/s, 0.64 ms
 *   ~950 MB       190/s, 5.86 ms               1486/s, 1.36 ms            2883/s, 0.67 ms
 *
 * Direct spawning falls with the agent's heap (fork copies the parent's page tables), a pool
 * does not; the native launcher spawns without copying page tables at all (clone with
 * CLONE_VM|CLONE_VFORK) and does none of Node's work around a spawn, at half the CPU.
 * `launchers: 0` (AGENT_LAUNCHERS cannot say 0; only code can) selects direct spawning, kept to
 * measure against.
 *
 * Output to files rather than pipes: the same pool with the task's stdout/stderr piped back to
 * the launcher (and not even forwarded to the agent) ran 544-661 launches/s against 559-1068
 * with files, and pipes would have to carry every byte through the launcher and over IPC. With
 * files, no output passes through any Node process: live logs are read from the files on
 * request (the spec asks that they be polled rarely), and ARTIFACT lines are scanned from the
 * stdout file once the task has ended.
 */

export interface LaunchRequest {
	command: string;
	args: string[];
	cwd: string;
	env: Record<string, string>;
	/** the files the task's stdout and stderr go to */
	stdoutPath: string;
	stderrPath: string;
	/** the output files exist and are empty: opened without truncating (see SpawnMessage) */
	outputFilesEmpty?: boolean;
	/** the user and group the task runs as (absent: the launcher's own) */
	identity?: TaskIdentity;
	/**
	 * in a PID namespace of its own, so that nothing it starts outlives it (native launchers
	 * only: the others refuse such a request)
	 */
	contained?: boolean;
}

export interface TaskIdentity {
	uid: number;
	gid: number;
}

export interface ExitStatus {
	/** null when killed by a signal or lost */
	code: number | null;
	signal: string | null;
	/** set when the launcher died under the task: its outcome is unknown */
	lost?: string;
	/** set when a built-in task (a strike's monitor) could not do its work: why, for the job */
	failed?: string;
	/** the rest of the task's process group has been sent SIGKILL already */
	groupKilled?: boolean;
}

/** A started task. */
export interface Launched {
	pid: number;
	/** settles once, when the task is gone */
	exited: Promise<ExitStatus>;
	/** signals the task's process group */
	kill(signal: NodeJS.Signals): void;
}

/** Raised when the task could not be started; `code` is the errno name (ENOENT, EACCES...). */
export class LaunchError extends Error {
	constructor(
		message: string,
		readonly code: string | null
	) {
		super(message);
	}
}

export interface Launcher {
	/** Starts a task; rejects with LaunchError when it cannot be started. */
	launch(request: LaunchRequest): Promise<Launched>;
	/** Terminates the tasks still running (SIGTERM) and the launcher processes. */
	stop(): Promise<void>;
}

interface Pending {
	resolveStart(launched: Launched): void;
	rejectStart(error: LaunchError): void;
	resolveExit(status: ExitStatus): void;
	pid?: number;
}

/** The message that asks a launcher (or spawnTask) to start `request` as task `id`. */
function spawnMessage(id: number, request: LaunchRequest): SpawnMessage {
	return {
		t: "spawn",
		id,
		command: request.command,
		args: request.args,
		cwd: request.cwd,
		env: request.env,
		stdout: request.stdoutPath,
		stderr: request.stderrPath,
		empty: request.outputFilesEmpty === true,
		uid: request.identity?.uid,
		gid: request.identity?.gid,
		contained: request.contained === true
	};
}

function deferredExit() {
	let resolve!: (status: ExitStatus) => void;
	const promise = new Promise<ExitStatus>(r => (resolve = r));
	return { promise, resolve };
}

/**
 * The launcher script to fork: the compiled `launcher-child.js` beside this module, or, when this
 * module runs from TypeScript source (tests through @swc/jest), the source transpiled once into
 * the temp directory (typescript is a dev dependency, present wherever the sources are).
 */
export function launcherScript(): string {
	const compiled = path.join(__dirname, "launcher-child.js");
	if (fs.existsSync(compiled)) return compiled;
	const source = fs.readFileSync(path.join(__dirname, "launcher-child.ts"), "utf8");
	const hash = crypto.createHash("sha1").update(source).digest("hex").slice(0, 12);
	const target = path.join(os.tmpdir(), `scale-launcher-child-${hash}.js`);
	if (!fs.existsSync(target)) {
		const ts = require("typescript") as typeof import("typescript");
		const js = ts.transpileModule(source, {
			compilerOptions: {
				module: ts.ModuleKind.CommonJS,
				target: ts.ScriptTarget.ES2022,
				esModuleInterop: true
			}
		}).outputText;
		const temp = `${target}.${process.pid}.tmp`;
		fs.writeFileSync(temp, js);
		fs.renameSync(temp, target);
	}
	return target;
}

/** A launcher process as the pool sees it: Node (launcher-child.ts) or native (launcher.c). */
interface LauncherChannel {
	readonly child: ChildProcess;
	readonly alive: boolean;
	send(msg: ToLauncher): boolean;
	/** makes the launcher terminate its tasks (SIGTERM) and exit */
	close(): void;
}

/** A forked Node launcher (lib/agent/launcher-child.ts), spoken to over Node's IPC channel. */
class NodeLauncherProcess implements LauncherChannel {
	readonly child: ChildProcess;
	alive = true;

	constructor(
		script: string,
		onGone: (why: string) => void,
		onMessage: (msg: FromLauncher) => void
	) {
		this.child = fork(script, [], {
			execArgv: [],
			serialization: "json",
			stdio: ["ignore", "inherit", "inherit", "ipc"],
			env: LAUNCHER_ENV
		});
		this.child.on("message", onMessage);
		watchLauncher(this.child, why => {
			this.alive = false;
			onGone(why);
		});
	}

	send(msg: ToLauncher): boolean {
		if (!this.alive || !this.child.connected) return false;
		this.child.send(msg);
		return true;
	}

	close(): void {
		this.child.disconnect();
	}
}

/** What starts one launcher process: a Node one, or the native one at `binary`. */
export type LauncherKind = { kind: "node" } | { kind: "native"; binary: string };

interface Member {
	channel: LauncherChannel;
	tasks: Map<number, Pending>;
	startedAt: number;
}

/**
 * A launcher that dies younger than this is replaced only this long after: one that cannot start
 * (its binary removed, the machine out of processes) is not restarted in a tight loop, and tasks
 * meanwhile fail to launch (SYSTEM errors, retried by the scheduler).
 */
const RESTART_GAP_MS = 1000;

/**
 * Spawns tasks through a pool of launcher processes, each task going to the launcher with the
 * fewest tasks in flight. A launcher that dies is replaced; the tasks it ran are killed (by
 * process group, from here) and reported lost.
 */
export class LauncherPool implements Launcher {
	private readonly pool: Member[] = [];
	private readonly script: string | null;
	private nextId = 1;
	private stopping = false;

	constructor(
		size: number,
		private readonly kind: LauncherKind = { kind: "node" }
	) {
		this.script = kind.kind === "node" ? launcherScript() : null;
		for (let i = 0; i < size; i++) this.pool.push(this.startOne());
	}

	private startOne(): Member {
		const member: Member = {
			channel: undefined as unknown as LauncherChannel,
			tasks: new Map(),
			startedAt: Date.now()
		};
		const onGone = (why: string) => this.gone(member, why);
		const onMessage = (msg: FromLauncher) => this.message(member, msg);
		member.channel =
			this.kind.kind === "native"
				? new NativeLauncherProcess(this.kind.binary, onGone, onMessage)
				: new NodeLauncherProcess(this.script!, onGone, onMessage);
		return member;
	}

	private gone(member: Member, why: string): void {
		for (const task of member.tasks.values()) {
			if (task.pid === undefined) task.rejectStart(new LaunchError(why, null));
			else {
				signalGroup(task.pid, "SIGKILL");
				task.resolveExit({ code: null, signal: null, lost: why });
			}
		}
		member.tasks.clear();
		const at = this.pool.indexOf(member);
		if (at < 0) return;
		if (this.stopping) this.pool.splice(at, 1);
		else if (Date.now() - member.startedAt >= RESTART_GAP_MS) this.pool[at] = this.startOne();
		else
			setTimeout(() => {
				const still = this.pool.indexOf(member);
				if (!this.stopping && still >= 0) this.pool[still] = this.startOne();
			}, RESTART_GAP_MS).unref();
	}

	private message(member: Member, msg: FromLauncher): void {
		const task = member.tasks.get(msg.id);
		if (!task) return;
		if (msg.t === "spawned") {
			task.pid = msg.pid;
			const id = msg.id;
			task.resolveStart({
				pid: msg.pid,
				exited: undefined as unknown as Promise<ExitStatus>,
				kill: signal => {
					if (!member.channel.send({ t: "kill", id, signal }))
						signalGroup(msg.pid, signal);
				}
			});
		} else if (msg.t === "failed") {
			member.tasks.delete(msg.id);
			task.rejectStart(new LaunchError(msg.message, msg.code));
		} else {
			member.tasks.delete(msg.id);
			const status: ExitStatus = { code: msg.code, signal: msg.signal };
			if (msg.groupKilled) status.groupKilled = true;
			task.resolveExit(status);
		}
	}

	launch(request: LaunchRequest): Promise<Launched> {
		if (this.stopping) return Promise.reject(new LaunchError("the agent is stopping", null));
		let member = this.pool[0];
		for (const candidate of this.pool)
			if (
				candidate.channel.alive &&
				(!member.channel.alive || candidate.tasks.size < member.tasks.size)
			)
				member = candidate;
		const id = this.nextId++;
		const exit = deferredExit();
		return new Promise<Launched>((resolve, reject) => {
			const pending: Pending = {
				resolveStart: launched => resolve({ ...launched, exited: exit.promise }),
				rejectStart: reject,
				resolveExit: exit.resolve
			};
			const msg = spawnMessage(id, request);
			if (!member || !member.channel.send(msg)) {
				reject(new LaunchError("no launcher process is available", null));
				return;
			}
			member.tasks.set(id, pending);
		});
	}

	async stop(): Promise<void> {
		this.stopping = true;
		await Promise.all(
			[...this.pool].map(
				({ channel }) =>
					new Promise<void>(resolve => {
						if (!channel.alive) return resolve();
						channel.child.once("exit", () => resolve());
						channel.close();
					})
			)
		);
	}
}

/** Spawns tasks from the agent's own process (kept to measure against, see above). */
export class DirectLauncher implements Launcher {
	private readonly running = new Map<number, number>();
	private nextId = 1;

	launch(request: LaunchRequest): Promise<Launched> {
		const id = this.nextId++;
		const exit = deferredExit();
		return new Promise<Launched>((resolve, reject) => {
			const send = (msg: FromLauncher) => {
				if (msg.t === "spawned") {
					this.running.set(id, msg.pid);
					resolve({
						pid: msg.pid,
						exited: exit.promise,
						kill: signal => signalGroup(msg.pid, signal)
					});
				} else if (msg.t === "failed") reject(new LaunchError(msg.message, msg.code));
				else {
					this.running.delete(id);
					exit.resolve({ code: msg.code, signal: msg.signal });
				}
			};
			spawnTask(spawnMessage(id, request), send);
		});
	}

	async stop(): Promise<void> {
		for (const pid of this.running.values()) signalGroup(pid, "SIGTERM");
	}
}

/** Which launcher processes an agent uses: "auto" is native where it can be compiled. */
export type LauncherChoice = "auto" | "native" | "node";

export interface ChosenLauncher {
	launcher: Launcher;
	/** whether it can start a task in a PID namespace of its own (LaunchRequest.contained) */
	contains: boolean;
	/** what was chosen, for the agent's start log */
	description: string;
	/** why "auto" fell back to Node launchers */
	fallback?: string;
}

/**
 * The launcher the agent uses: a pool of `launchers` processes, native ones
 * (native/launcher.c) unless Node ones are asked for or the native one cannot be compiled
 * here; direct spawning for 0. Throws when native ones are asked for and cannot be had.
 */
export function createLauncher(
	launchers: number,
	choice: LauncherChoice = "auto",
	findNative: () => NativeBinary = nativeLauncherBinary
): ChosenLauncher {
	if (launchers <= 0)
		return {
			launcher: new DirectLauncher(),
			contains: false,
			description: "direct spawning from the agent"
		};
	const native = choice === "node" ? null : findNative();
	if (native && "path" in native)
		return {
			launcher: new LauncherPool(launchers, { kind: "native", binary: native.path }),
			contains: true,
			description: `${launchers} native launcher processes (${native.path})`
		};
	if (choice === "native") throw new Error((native as { problem: string }).problem);
	return {
		launcher: new LauncherPool(launchers),
		contains: false,
		description: `${launchers} Node launcher processes`,
		fallback: native ? (native as { problem: string }).problem : undefined
	};
}
