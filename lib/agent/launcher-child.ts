/**
 * A launcher process: a small Node process, forked by the agent (lib/agent/launcher.ts), that
 * spawns task processes on the agent's behalf. Node's spawn slows with the size of the spawning
 * process's heap (fork/exec copies its page tables), so the agent, whose heap grows with its
 * work, never spawns from itself: this process stays a few MB of heap whatever the agent holds.
 *
 * It imports nothing but Node's built-ins (tests run it transpiled on the fly, see
 * launcherScript in launcher.ts). Messages over the IPC channel, all JSON:
 *
 *   agent → launcher  { t: "spawn", id, command, args, cwd, env, stdout, stderr, empty }
 *                     { t: "kill", id, signal }
 *   launcher → agent  { t: "spawned", id, pid }
 *                     { t: "failed", id, code, message }   (never started: ENOENT, EACCES...)
 *                     { t: "exit", id, code, signal }
 *
 * The task's stdout and stderr go straight to the files named in the request (opened here and
 * handed to the task as its descriptors 1 and 2): no byte of output passes through this process
 * or the agent, and the agent serves live logs by reading those files. Each task leads its own
 * process group, so a kill reaches what the task started too (a shell script's `sleep`). When the
 * agent goes away (the IPC channel closes), the launcher terminates its tasks and exits: their
 * executions are failed by the control plane as node-lost.
 */
import { spawn, type ChildProcess } from "child_process";
import fs from "fs";

export interface SpawnMessage {
	t: "spawn";
	id: number;
	command: string;
	args: string[];
	cwd: string;
	env: Record<string, string>;
	/** files the task's stdout and stderr are written to (created or truncated) */
	stdout: string;
	stderr: string;
	/**
	 * the files exist and are empty (a recycled task directory): opened for appending, which
	 * spares the file system the inode update a truncation costs
	 */
	empty?: boolean;
	/** the user and group the task runs as (absent: the launcher's own) */
	uid?: number;
	gid?: number;
	/** in a PID namespace of its own: only native launchers can (refused here) */
	contained?: boolean;
}

export interface KillMessage {
	t: "kill";
	id: number;
	signal: NodeJS.Signals;
}

export type ToLauncher = SpawnMessage | KillMessage;

export type FromLauncher =
	| { t: "spawned"; id: number; pid: number }
	| { t: "failed"; id: number; code: string | null; message: string }
	| {
			t: "exit";
			id: number;
			code: number | null;
			signal: string | null;
			/** the rest of the task's process group was sent SIGKILL (by the native launcher) */
			groupKilled?: boolean;
	  };

/** Signals the process group of `child` (falling back to the child alone). */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
	try {
		process.kill(-pid, signal);
	} catch {
		try {
			process.kill(pid, signal);
		} catch {
			// already gone
		}
	}
}

/**
 * Spawns one task with its output in files and reports on it through `send`. Answers the child
 * (undefined when the output files could not be opened). Shared with the in-process launcher.
 */
export function spawnTask(
	msg: SpawnMessage,
	send: (reply: FromLauncher) => void
): ChildProcess | undefined {
	if (msg.contained) {
		send({
			t: "failed",
			id: msg.id,
			code: "ENOTSUP",
			message: "a Node launcher cannot contain a task in a PID namespace"
		});
		return undefined;
	}
	let out: number;
	let err: number;
	try {
		out = fs.openSync(msg.stdout, msg.empty ? "a" : "w");
	} catch (e: any) {
		send({ t: "failed", id: msg.id, code: e?.code ?? null, message: String(e?.message) });
		return undefined;
	}
	try {
		err = msg.stderr === msg.stdout ? out : fs.openSync(msg.stderr, msg.empty ? "a" : "w");
	} catch (e: any) {
		fs.closeSync(out);
		send({ t: "failed", id: msg.id, code: e?.code ?? null, message: String(e?.message) });
		return undefined;
	}
	let child: ChildProcess;
	try {
		child = spawn(msg.command, msg.args, {
			cwd: msg.cwd,
			env: msg.env,
			stdio: ["ignore", out, err],
			detached: true,
			uid: msg.uid,
			gid: msg.gid
		});
	} catch (e: any) {
		// spawn throws synchronously for bad arguments (a NUL byte, a bad cwd type...)
		send({ t: "failed", id: msg.id, code: e?.code ?? null, message: String(e?.message) });
		return undefined;
	} finally {
		// the task holds its own copies of the descriptors
		fs.closeSync(out);
		if (err !== out) fs.closeSync(err);
	}
	let started = false;
	child.once("spawn", () => {
		started = true;
		send({ t: "spawned", id: msg.id, pid: child.pid! });
	});
	child.once("error", (e: any) => {
		// before "spawn": the process never started; after it, a failed kill (ignored)
		if (!started)
			send({ t: "failed", id: msg.id, code: e?.code ?? null, message: String(e?.message) });
	});
	child.once("exit", (code, signal) => {
		if (started) send({ t: "exit", id: msg.id, code, signal });
	});
	return child;
}

function main(): void {
	const children = new Map<number, ChildProcess>();
	const send = (reply: FromLauncher) => {
		if (reply.t !== "spawned") children.delete(reply.id);
		if (process.connected) process.send!(reply);
	};
	process.on("message", (msg: ToLauncher) => {
		if (msg.t === "spawn") {
			const child = spawnTask(msg, send);
			if (child) children.set(msg.id, child);
		} else if (msg.t === "kill") {
			const child = children.get(msg.id);
			if (child?.pid !== undefined) signalGroup(child.pid, msg.signal);
		}
	});
	process.on("disconnect", () => {
		for (const child of children.values())
			if (child.pid !== undefined) signalGroup(child.pid, "SIGTERM");
		process.exit(0);
	});
	// the agent decides when launchers stop; a terminal's Ctrl-C reaches the agent itself
	process.on("SIGINT", () => undefined);
}

if (require.main === module && process.send) main();
