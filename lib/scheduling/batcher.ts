/**
 * Collects items for a short while and hands them to `flush` together, one flush at a time:
 * messages that arrive together (hundreds of executions ending at once) cost one transaction.
 * Each `add` resolves with that item's own answer from the flush, or rejects with its error.
 */
export class MicroBatcher<T, R> {
	private pending: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
	private timer: NodeJS.Timeout | null = null;
	private running: Promise<void> | null = null;

	constructor(
		/** answers one result per item, in order; throwing rejects every item of the batch */
		private readonly flush: (items: T[]) => Promise<R[]>,
		private readonly opts: { delayMs: number; maxItems: number }
	) {}

	add(item: T): Promise<R> {
		return new Promise<R>((resolve, reject) => {
			this.pending.push({ item, resolve, reject });
			this.schedule();
		});
	}

	/** Items waiting or being flushed. */
	get size(): number {
		return this.pending.length;
	}

	/** Flushes whatever is waiting and resolves once nothing is left. */
	async drain(): Promise<void> {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		while (this.running || this.pending.length > 0) {
			if (this.running) await this.running;
			else this.run();
		}
	}

	private schedule(): void {
		if (this.running) return; // the running flush picks the rest up when it ends
		if (this.pending.length >= this.opts.maxItems) {
			if (this.timer) clearTimeout(this.timer);
			this.timer = null;
			this.run();
			return;
		}
		if (!this.timer)
			this.timer = setTimeout(() => {
				this.timer = null;
				this.run();
			}, this.opts.delayMs);
	}

	private run(): void {
		if (this.running || this.pending.length === 0) return;
		const batch = this.pending.splice(0, this.opts.maxItems);
		this.running = (async () => {
			try {
				const results = await this.flush(batch.map(b => b.item));
				batch.forEach((b, i) => b.resolve(results[i]));
			} catch (error) {
				for (const b of batch) b.reject(error);
			}
		})().finally(() => {
			this.running = null;
			// What arrived during the flush goes at once: it has already waited a flush long.
			if (this.pending.length > 0) this.run();
		});
	}
}
