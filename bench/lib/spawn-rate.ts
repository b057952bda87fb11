import { spawn } from "child_process";

/** How many `/bin/true` processes per second Node spawns here, `concurrency` at a time, for `ms`. */
export async function bareSpawnRate(ms: number, concurrency: number): Promise<number> {
	const deadline = Date.now() + ms;
	let count = 0;
	const started = process.hrtime.bigint();
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
