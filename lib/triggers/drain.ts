/**
 * Draining waiting work in batches, several at a time (the triggers service's events). A batch
 * that comes back full says more is likely waiting, and starts another worker beside it, up to
 * `workers`: a burst is drained by as many transactions at once as the machine has cpus for,
 * while a trickle costs one transaction at a time. Each batch claims its own rows (SKIP LOCKED),
 * so workers never take the same ones.
 */
export interface DrainOptions {
	/** batches run at once at most */
	workers: number;
	/** the size of a full batch */
	fullBatch: number;
}

/**
 * Runs `batch` until one finds nothing, answering the items processed. `onBatch` is told of each
 * batch that did something. Every worker has ended when the promise settles; the first failure
 * rejects it then.
 */
export async function drainBatches<B extends { events: number }>(
	batch: () => Promise<B>,
	opts: DrainOptions,
	onBatch: (done: B) => void
): Promise<number> {
	let total = 0;
	let active = 0;
	const running: Promise<void>[] = [];
	const worker = async (): Promise<void> => {
		active++;
		try {
			for (;;) {
				const done = await batch();
				if (done.events === 0) return;
				total += done.events;
				onBatch(done);
				if (done.events >= opts.fullBatch && active < opts.workers) running.push(worker());
			}
		} finally {
			active--;
		}
	};
	running.push(worker());
	let failure: { reason: unknown } | null = null;
	while (running.length > 0) {
		const ends = await Promise.allSettled(running.splice(0));
		for (const end of ends)
			if (end.status === "rejected" && failure === null) failure = { reason: end.reason };
	}
	if (failure) throw failure.reason;
	return total;
}
