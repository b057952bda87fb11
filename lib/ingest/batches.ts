/**
 * How a strike monitor cuts the names it has to handle into calls to the control plane
 * (lib/ingest/monitor.ts), and how many of a burst's calls run at once.
 */

/** Batches handled at once, each by a worker of its own (lib/ingest/monitor.ts kick). */
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

/**
 * The next batch: the marked names, in the order they were marked, whose file no batch under way
 * holds (`busy`, by `fileOf`: a file sent under the transfer suffix and under its own name is one
 * file, handled by one batch at a time), at most `max` files and `nameChars` characters of names.
 */
export function nextBatch(
	marked: Iterable<string>,
	busy: ReadonlySet<string>,
	max: number,
	fileOf: (name: string) => string = name => name,
	nameChars = BATCH_NAME_CHARS
): string[] {
	const batch: string[] = [];
	let chars = 0;
	for (const name of marked) {
		if (batch.length >= max || (batch.length > 0 && chars + name.length > nameChars)) break;
		if (busy.has(fileOf(name))) continue;
		batch.push(name);
		chars += name.length;
	}
	return batch;
}
