/**
 * Measures how fast the agent can start trivial tasks (`/bin/true`, output to files) spawning
 * directly from its own process, through a pool of Node launchers and through a pool of native
 * launchers, the last also contained as the agent runs tasks as root (a uid of their own, a PID
 * namespace each: "contained"), with a small and a large agent heap, and the CPU each launch
 * costs. Prints one line per case. Run after `npm run build` (as root for "contained"):
 *
 *   node dist/lib/agent/launch-bench.js [count=2000] [inFlight=32]
 *
 * Each case runs in its own fresh process (so heaps do not mix): the parent re-runs this script
 * with `--case <direct|pool> <heapMB>`.
 */
import { execFileSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { DirectLauncher, LauncherPool, type Launcher } from "./launcher";
import { nativeLauncherBinary } from "./native-launcher";

/** CPU seconds of this process and of its children that have ended (launchers, tasks). */
function cpuWithChildren(): number {
	const stat = fs.readFileSync("/proc/self/stat", "utf8");
	const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	const ticks = fields.slice(11, 15).reduce((sum, field) => sum + Number(field), 0);
	return ticks / 100;
}

function launcherFor(mode: string): Launcher {
	if (mode === "direct") return new DirectLauncher();
	if (mode === "pool") return new LauncherPool(2);
	const binary = nativeLauncherBinary();
	if ("problem" in binary) throw new Error(binary.problem);
	return new LauncherPool(2, { kind: "native", binary: binary.path });
}

/** Keeps about `mb` MB of small live objects on the heap, as a busy agent would. */
function ballast(mb: number): unknown[] {
	const keep: unknown[] = [];
	const perObject = 100; // bytes, roughly, for { a, b, c: string }
	for (let i = 0; i < (mb * 1024 * 1024) / perObject; i++)
		keep.push({ a: i, b: i * 2, c: `x${i}` });
	return keep;
}

async function runCase(mode: string, heapMB: number, count: number, inFlight: number) {
	const keep = ballast(heapMB);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "launch-bench-"));
	const launcher = launcherFor(mode);
	const cpuBefore = cpuWithChildren();
	const one = async (i: number) => {
		const slot = i % inFlight;
		const launched = await launcher.launch({
			command: "/bin/true",
			args: [],
			cwd: dir,
			env: { PATH: "/usr/bin:/bin" },
			stdoutPath: path.join(dir, `out${slot}`),
			stderrPath: path.join(dir, `err${slot}`),
			...(mode === "contained"
				? {
						identity: { uid: 1_900_000_000 + slot, gid: 1_900_000_000 + slot },
						contained: true
					}
				: {})
		});
		await launched.exited;
	};
	// warm-up (forks the launchers, loads code)
	for (let i = 0; i < inFlight; i++) await one(i);
	let next = 0;
	const started = process.hrtime.bigint();
	await Promise.all(
		Array.from({ length: inFlight }, async () => {
			while (next < count) await one(next++);
		})
	);
	const seconds = Number(process.hrtime.bigint() - started) / 1e9;
	const heap = Math.round(process.memoryUsage().heapUsed / 1024 / 1024);
	await launcher.stop();
	// the launchers have exited and been waited for: their CPU and their tasks' is counted
	const cpuMs = ((cpuWithChildren() - cpuBefore) / count) * 1000;
	fs.rmSync(dir, { recursive: true, force: true });
	process.stdout.write(
		`${mode.padEnd(6)} heap ${String(heap).padStart(5)} MB: ${Math.round(count / seconds)} launches/s (${count} in ${seconds.toFixed(2)} s), CPU ${cpuMs.toFixed(2)} ms per launch with its task\n`
	);
	return keep.length;
}

async function main() {
	const argv = process.argv.slice(2);
	if (argv[0] === "--case") {
		await runCase(argv[1], Number(argv[2]), Number(argv[3]), Number(argv[4]));
		return;
	}
	const count = Number(argv[0] || 2000);
	const inFlight = Number(argv[1] || 32);
	for (const heapMB of [0, 250, 1000])
		for (const mode of [
			"direct",
			"pool",
			"native",
			...(process.geteuid?.() === 0 ? ["contained"] : [])
		])
			process.stdout.write(
				execFileSync(
					process.execPath,
					[
						"--max-old-space-size=4096",
						__filename,
						"--case",
						mode,
						String(heapMB),
						String(count),
						String(inFlight)
					],
					{ encoding: "utf8" }
				)
			);
}

if (require.main === module)
	main().catch(err => {
		process.stderr.write(`${err?.stack ?? err}\n`);
		process.exit(1);
	});
