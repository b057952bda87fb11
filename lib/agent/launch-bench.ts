/**
 * Measures how fast the agent can start trivial tasks (`/bin/true`, output to files) spawning
 * directly from its own process against through the launcher pool, with a small and a large
 * agent heap. Prints one line per case. Run after `npm run build`:
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
	const launcher: Launcher = mode === "pool" ? new LauncherPool(2) : new DirectLauncher();
	const one = async (i: number) => {
		const slot = i % inFlight;
		const launched = await launcher.launch({
			command: "/bin/true",
			args: [],
			cwd: dir,
			env: { PATH: "/usr/bin:/bin" },
			stdoutPath: path.join(dir, `out${slot}`),
			stderrPath: path.join(dir, `err${slot}`)
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
	fs.rmSync(dir, { recursive: true, force: true });
	process.stdout.write(
		`${mode.padEnd(6)} heap ${String(heap).padStart(5)} MB: ${Math.round(count / seconds)} launches/s (${count} in ${seconds.toFixed(2)} s)\n`
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
		for (const mode of ["direct", "pool"])
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
