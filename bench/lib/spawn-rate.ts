import { execFile, spawn } from "child_process";

/**
 * How many `/bin/true` processes per second this process spawns, `concurrency` at a time; with
 * `paceMs`, as a bench's slow machine spawns (lib/agent/launcher.ts, PacedLauncher): one spawn
 * at a time, each after a pause of `paceMs`.
 */
export async function bareSpawnRate(ms: number, concurrency: number, paceMs = 0): Promise<number> {
	const deadline = Date.now() + ms;
	let count = 0;
	const started = process.hrtime.bigint();
	if (paceMs > 0) {
		const exits: Promise<void>[] = [];
		while (Date.now() < deadline) {
			await new Promise(resolve => setTimeout(resolve, paceMs));
			const child = spawn("/bin/true", [], { stdio: "ignore" });
			await new Promise<void>((resolve, reject) => {
				child.once("error", reject);
				child.once("spawn", () => resolve());
			});
			exits.push(new Promise<void>(resolve => child.once("exit", () => resolve())));
			count++;
		}
		await Promise.all(exits);
		return count / (Number(process.hrtime.bigint() - started) / 1e9);
	}
	const worker = async () => {
		while (Date.now() < deadline) {
			await new Promise<void>((resolve, reject) => {
				const child = spawn("/bin/true", [], { stdio: "ignore" });
				child.once("error", reject);
				child.once("exit", () => resolve());
			});
			count++;
		}
	};
	await Promise.all(Array.from({ length: concurrency }, worker));
	return count / (Number(process.hrtime.bigint() - started) / 1e9);
}

/**
 * The bare rate measured in a fresh Node process that loads nothing else. Node's spawn slows with
 * the size of the spawning process (fork copies its page tables): measured inside a benchmark
 * that has loaded a database client and run a service, the rate is a third to a half lower,
 * which would flatter any ratio taken against it.
 */
export function bareSpawnRateInFreshNode(
	ms: number,
	concurrency: number,
	paceMs = 0
): Promise<number> {
	return new Promise<number>((resolve, reject) =>
		execFile(
			process.execPath,
			[__filename, String(ms), String(concurrency), String(paceMs)],
			(error, stdout) => (error ? reject(error) : resolve(Number(stdout)))
		)
	);
}

/**
 * The best of `runs` such measurements: the machine's capacity as nearly as it can be seen (a
 * run slowed by something else on the machine would flatter a ratio taken against it).
 */
export async function bestBareSpawnRate(
	runs: number,
	ms: number,
	concurrency: number,
	paceMs = 0
): Promise<number> {
	let best = 0;
	for (let i = 0; i < runs; i++)
		best = Math.max(best, await bareSpawnRateInFreshNode(ms, concurrency, paceMs));
	return best;
}

if (require.main === module)
	void bareSpawnRate(
		Number(process.argv[2]),
		Number(process.argv[3]),
		Number(process.argv[4] ?? 0)
	).then(rate => process.stdout.write(String(rate)));
