import { execFileSync, spawn, type ChildProcess } from "child_process";
import crypto from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import type { FromLauncher, ToLauncher } from "./launcher-child";

/**
 * The native launcher (native/launcher.c): a small C program that starts tasks with posix_spawn,
 * spoken to over its stdin and stdout (the protocol is described in the C file). It is compiled
 * from source with the machine's C compiler the first time an agent needs it, into
 * native/build/, named by a hash of the source (an edited source is compiled again).
 */

const SOURCE = path.join("native", "launcher.c");

/** The project folder: the nearest folder above this module that holds native/launcher.c. */
function projectRoot(): string | null {
	for (let dir = __dirname; ; dir = path.dirname(dir)) {
		if (fs.existsSync(path.join(dir, SOURCE))) return dir;
		if (path.dirname(dir) === dir) return null;
	}
}

export type NativeBinary = { path: string } | { problem: string };

/**
 * Compiles `source` into `buildDir`, named by a hash of the source, unless that is done already;
 * answers the binary, or why there is none (no C compiler, a folder that cannot be written, a
 * compiler error).
 */
export function compileNativeLauncher(
	source: string,
	buildDir: string,
	cc = process.env.CC || "cc"
): NativeBinary {
	const hash = crypto
		.createHash("sha1")
		.update(fs.readFileSync(source))
		.digest("hex")
		.slice(0, 12);
	const binary = path.join(buildDir, `scale-launcher-${hash}`);
	if (fs.existsSync(binary)) return { path: binary };
	const temp = `${binary}.${process.pid}.tmp`;
	try {
		fs.mkdirSync(buildDir, { recursive: true });
		execFileSync(cc, ["-O2", "-std=gnu11", "-Wall", "-o", temp, source], {
			stdio: ["ignore", "ignore", "pipe"]
		});
		// renamed into place whole: agents compiling at the same time never run a partial file
		fs.renameSync(temp, binary);
		for (const old of fs.readdirSync(buildDir))
			if (/^scale-launcher-[0-9a-f]{12}$/.test(old) && old !== path.basename(binary))
				fs.rmSync(path.join(buildDir, old), { force: true });
		return { path: binary };
	} catch (error: any) {
		fs.rmSync(temp, { force: true });
		const said = String(error?.stderr ?? "").trim() || String(error?.message ?? error);
		return { problem: `the native launcher could not be compiled: ${said}` };
	}
}

let found: NativeBinary | undefined;

/** The project's native launcher (native/build/), compiled once per process if need be. */
export function nativeLauncherBinary(): NativeBinary {
	if (found) return found;
	const root = projectRoot();
	found = root
		? compileNativeLauncher(path.join(root, SOURCE), path.join(root, "native", "build"))
		: { problem: `${SOURCE} was not found beside the code` };
	return found;
}

const signalNumbers = os.constants.signals as Record<string, number>;
/** by number; the first name listed wins (SIGABRT over SIGIOT, SIGIO over SIGPOLL) */
const signalNames = new Map<number, string>();
for (const [name, number] of Object.entries(signalNumbers))
	if (!signalNames.has(number)) signalNames.set(number, name);
const errnoNames = new Map<number, string>();
for (const [name, number] of Object.entries(os.constants.errno as Record<string, number>))
	if (!errnoNames.has(number)) errnoNames.set(number, name);

/** The whole environment of a launcher process. */
export const LAUNCHER_ENV = {
	PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
};

/** A request frame: its length (4 bytes, little-endian), then its fields, each ended by NUL. */
function frame(fields: string[]): Buffer {
	const body = `${fields.join("\0")}\0`;
	const length = Buffer.byteLength(body);
	const buffer = Buffer.allocUnsafe(4 + length);
	buffer.writeUInt32LE(length, 0);
	buffer.write(body, 4);
	return buffer;
}

/**
 * Calls `gone` once, when a launcher process exits or could not be started at all (a spawn
 * that fails emits "error", and maybe no "exit"); later errors (a failed kill) are no loss.
 */
export function watchLauncher(child: ChildProcess, gone: (why: string) => void): void {
	let over = false;
	const end = (why: string) => {
		if (!over) gone(why);
		over = true;
	};
	child.once("exit", (code, signal) =>
		end(`the launcher process exited (code ${code}, signal ${signal})`)
	);
	child.on("error", error => {
		if (child.pid === undefined)
			end(`the launcher process could not be started: ${error.message}`);
	});
}

/** One running native launcher, seen through the same messages as a Node launcher process. */
export class NativeLauncherProcess {
	readonly child: ChildProcess;
	alive = true;
	/** commands of tasks not yet started or failed, for the failure's message */
	private readonly starting = new Map<number, string>();
	private partial = "";

	constructor(
		binary: string,
		onGone: (why: string) => void,
		private readonly onMessage: (msg: FromLauncher) => void
	) {
		// the launcher's environment is within every task's reach (/proc/<ppid>/environ): the
		// agent's own (credentials) is not handed down
		this.child = spawn(binary, [], {
			stdio: ["pipe", "pipe", "inherit"],
			env: LAUNCHER_ENV
		});
		// no streams when the process could not be started (watchLauncher reports it)
		this.child.stdout?.setEncoding("latin1");
		this.child.stdout?.on("data", (chunk: string) => this.read(chunk));
		this.child.stdin?.on("error", () => undefined);
		watchLauncher(this.child, why => {
			this.alive = false;
			onGone(why);
		});
	}

	send(msg: ToLauncher): boolean {
		if (!this.alive || !this.child.stdin?.writable) return false;
		if (msg.t === "kill") {
			this.child.stdin!.write(
				frame(["k", String(msg.id), String(signalNumbers[msg.signal])])
			);
			return true;
		}
		const env = Object.entries(msg.env).map(([name, value]) => `${name}=${value}`);
		const all = [msg.command, msg.cwd, msg.stdout, msg.stderr, ...msg.args, ...env];
		if (all.some(field => field.includes("\0"))) {
			// what Node's spawn refuses too: C strings end at the first NUL
			process.nextTick(() =>
				this.onMessage({
					t: "failed",
					id: msg.id,
					code: "ERR_INVALID_ARG_VALUE",
					message: "a command, argument or environment value holds a NUL byte"
				})
			);
			return true;
		}
		this.starting.set(msg.id, msg.command);
		this.child.stdin!.write(
			frame([
				"s",
				String(msg.id),
				String((msg.empty ? 1 : 0) | (msg.contained ? 2 : 0)),
				msg.command,
				// the task's files are opened before it changes directory: paths made absolute here
				msg.cwd,
				path.resolve(msg.stdout),
				path.resolve(msg.stderr),
				String(msg.uid ?? -1),
				String(msg.gid ?? -1),
				String(msg.args.length),
				...msg.args,
				String(env.length),
				...env
			])
		);
		return true;
	}

	/** Closes the launcher's stdin: it terminates its tasks (SIGTERM) and exits. */
	close(): void {
		this.child.stdin?.end();
	}

	private read(chunk: string): void {
		const lines = (this.partial + chunk).split("\n");
		this.partial = lines.pop()!;
		for (const line of lines) {
			const [kind, idText, a, b] = line.split(" ");
			const id = Number(idText);
			if (kind === "p") {
				this.starting.delete(id);
				this.onMessage({ t: "spawned", id, pid: Number(a) });
			} else if (kind === "f") {
				const code = errnoNames.get(Number(a)) ?? `errno ${a}`;
				const command = this.starting.get(id) ?? "";
				this.starting.delete(id);
				this.onMessage({ t: "failed", id, code, message: `spawn ${command} ${code}` });
			} else if (kind === "x") {
				const signal = Number(b);
				this.onMessage({
					t: "exit",
					id,
					code: signal === 0 ? Number(a) : null,
					signal: signal === 0 ? null : (signalNames.get(signal) ?? `signal ${signal}`),
					groupKilled: true
				});
			}
		}
	}
}
