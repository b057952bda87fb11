import { Logger, makeWorkerUtils, run } from "graphile-worker";

/**
 * graphile-worker's rate for no-op jobs on the given PostgreSQL: a worker (in this process, with
 * `concurrency`) is running, then `n` jobs are added in batches of 1000; jobs/s = n / (time from
 * the first add to the last job done). The reference for P2, measured in the same run.
 */
export async function graphileNoopRate(
	connectionString: string,
	n: number,
	concurrency = 10
): Promise<number> {
	const utils = await makeWorkerUtils({ connectionString });
	await utils.migrate();
	const specs = Array.from({ length: n }, (_, i) => ({ identifier: "noop", payload: { i } }));
	let done = 0;
	let finished!: () => void;
	const allDone = new Promise<void>(resolve => (finished = resolve));
	const runner = await run({
		connectionString,
		concurrency,
		noHandleSignals: true,
		pollInterval: 1000,
		logger: new Logger(() => () => undefined),
		taskList: {
			noop: async () => {
				if (++done === n) finished();
			}
		}
	});
	const started = process.hrtime.bigint();
	for (let i = 0; i < specs.length; i += 1000) await utils.addJobs(specs.slice(i, i + 1000));
	await allDone;
	const seconds = Number(process.hrtime.bigint() - started) / 1e9;
	await runner.stop();
	await utils.release();
	return n / seconds;
}
