import { spawn, type ChildProcess } from "child_process";
import path from "path";
import readline from "readline";
import { PROJECT_ROOT } from "../paths";

const START_SCRIPT = path.join(PROJECT_ROOT, "dist", "bin", "start.js");

/**
 * Node's options for an agent-only process, as `npm run agent` gives them: a young generation
 * of 1 MiB semi-spaces, and no optimizing compiler. An agent's allocations are small and
 * short-lived (the cluster's heartbeats and INFO packets, its own reports); V8's default
 * semi-spaces grow to 16 MiB under that traffic and stay resident (bench:agents, P7: an idle
 * agent in a cluster of 1,002 nodes at 86–87 MiB without, 78 MiB with). An agent's own work
 * is little JavaScript (the jobs are other processes): without TurboFan (`--no-opt`; the
 * bytecode and baseline code stay, and WebAssembly, which `--lite-mode` and `--jitless` take
 * away and Node's fetch needs) an idle agent holds ~9 MiB less, one launching 1,000 jobs/s
 * ~11 MiB less, for ~0.04 ms more of its CPU per job and the same rate (bench:agent-jobs;
 * docs/decisions.md, "Cluster").
 */
export const AGENT_NODE_OPTIONS = ["--max-semi-space-size=1", "--no-opt"];

/**
 * Node's options for a control-plane process (and the all-in-one `npm start`): semi-spaces of at
 * most 8 MiB, and the old generation let grow to twice what it held after a collection rather
 * than V8's own factor (up to four times under load). Serving the lists at concurrency 32 on a
 * million rows, the process's RSS peaked at ~340 MiB without them and ~240 MiB with them, for
 * the same requests per second within the machine's noise; P1–P3 unchanged
 * (docs/decisions.md, "Lists").
 */
export const CONTROL_NODE_OPTIONS = ["--max-semi-space-size=8", "--heap-growing-percent=100"];

/**
 * glibc's malloc settings for a control-plane process (and `npm start`): blocks up to 4 MiB from
 * the heap, and up to 32 MiB of free heap kept rather than given back. A list's answer (a fresh
 * Buffer of 60–220 KB per request) was otherwise mapped anew and page-faulted in at every
 * request (~50 faults per `/products/updates/` page, ~40 µs of the kernel's time): under load
 * the service's page faults fell from ~15,000/s to ~400/s, and `/products/updates/` and
 * `/nodes/status/` answered 3–6% more requests per second (docs/decisions.md, "Lists").
 * Ignored by other C libraries.
 */
export const CONTROL_ENV: Readonly<Record<string, string>> = {
	MALLOC_MMAP_THRESHOLD_: "4194304",
	MALLOC_TRIM_THRESHOLD_: "33554432"
};

export interface NodeProcessOptions {
	/** what its output lines are prefixed with, and its NODE_ID */
	name: string;
	/** the whole environment of the process (nothing else is inherited) */
	env: Record<string, string>;
	/** options for node itself, before the script */
	nodeOptions?: string[];
	/** where its output lines go, prefixed */
	write: (line: string) => void;
	/** called when it exits without having been asked to */
	onUnexpectedExit?: (name: string, code: number | null, signal: string | null) => void;
}

/**
 * One `node dist/bin/start.js` of a cluster run on one machine: started, killed and started
 * again with the same identity (NODE_ID, work directory), its output prefixed by its name.
 */
export class NodeProcess {
	proc: ChildProcess | null = null;
	private stopping = false;
	private exited: Promise<void> = Promise.resolve();

	constructor(readonly opts: NodeProcessOptions) {}

	get name(): string {
		return this.opts.name;
	}

	get pid(): number | undefined {
		return this.proc?.pid;
	}

	get running(): boolean {
		return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
	}

	start(): void {
		if (this.running) return;
		this.stopping = false;
		const proc = spawn(process.execPath, [...(this.opts.nodeOptions ?? []), START_SCRIPT], {
			env: this.opts.env,
			stdio: ["ignore", "pipe", "pipe"],
			// its own process group: a Ctrl-C at the terminal reaches the cluster script alone,
			// which stops the processes in order (agents first, PostgreSQL last)
			detached: true
		});
		this.proc = proc;
		for (const stream of [proc.stdout!, proc.stderr!])
			readline
				.createInterface({ input: stream })
				.on("line", line => this.opts.write(`[${this.name}] ${line}`));
		this.exited = new Promise(resolve =>
			proc.once("exit", (code, signal) => {
				if (!this.stopping && this.proc === proc)
					this.opts.onUnexpectedExit?.(this.name, code, signal);
				resolve();
			})
		);
	}

	/** Sends `signal` and waits for the exit; SIGKILL after `graceMs` if it lingers. */
	async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 15000): Promise<void> {
		if (!this.running) return;
		this.stopping = true;
		this.proc!.kill(signal);
		const timer = setTimeout(() => this.proc?.kill("SIGKILL"), graceMs);
		await this.exited;
		clearTimeout(timer);
	}

	/** SIGKILL, as a crash would; an expected exit (not reported). */
	kill(): Promise<void> {
		return this.stop("SIGKILL");
	}

	async restart(): Promise<void> {
		await this.stop();
		this.start();
	}
}
