/**
 * How a strike monitor cuts the names it has to handle into calls to the control plane
 * (lib/ingest/monitor.ts), and how many of a burst's calls run at once.
 */

/** Batches of one burst handled at once. */
export const BATCHES_AT_ONCE = 3;

/**
 * Files per call: each call costs its transactions' fixed part (guard, rules, plans, commit)
 * whatever its size (docs/decisions.md, "Strike and ingest").
 */
export const BATCH_MAX = 1000;

/**
 * Characters of file names per call at most: a call and its answer carry each name (and its
 * target), and a message over NATS must stay under its max_payload (1 MB), names of up to 250
 * characters of up to 3 bytes each included.
 */
export const BATCH_NAME_CHARS = 64 * 1024;

/** `names` in batches of at most `max` files and `nameChars` characters of names, in order. */
export function batchesOf(names: string[], max: number, nameChars = BATCH_NAME_CHARS): string[][] {
	const batches: string[][] = [];
	let batch: string[] = [];
	let chars = 0;
	for (const name of names) {
		if (batch.length >= max || (batch.length > 0 && chars + name.length > nameChars)) {
			batches.push(batch);
			batch = [];
			chars = 0;
		}
		batch.push(name);
		chars += name.length;
	}
	if (batch.length > 0) batches.push(batch);
	return batches;
}

/** fn over items, at most `limit` at once, answers in order. */
export async function mapLimited<T, R>(
	items: T[],
	limit: number,
	fn: (item: T) => Promise<R>
): Promise<R[]> {
	const out: R[] = new Array(items.length);
	let next = 0;
	const worker = async () => {
		while (next < items.length) {
			const i = next++;
			out[i] = await fn(items[i]);
		}
	};
	await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
	return out;
}
