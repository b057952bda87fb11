/**
 * Collects items for a short while and hands them to `flush` together, `concurrency` flushes at
 * a time (one unless told): messages that arrive together (hundreds of executions ending at
 * once) cost one transaction. Each `add` resolves with that item's own answer from the flush, or
 * rejects with its error.
 */
export class MicroBatcher<T, R> {
	private pending: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
	private timer: NodeJS.Timeout | null = null;
	private readonly running = new Set<Promise<void>>();

	constructor(
		/** answers one result per item, in order; throwing rejects every item of the batch */
		private readonly flush: (items: T[]) => Promise<R[]>,
		private readonly opts: {
			delayMs: number;
			maxItems: number;
			concurrency?: number;
			/** waited for before a batch is taken: what arrives meanwhile joins the batch */
			ready?: () => Promise<void>;
		}
	) {}

	private get full(): boolean {
		return this.running.size >= (this.opts.concurrency ?? 1);
	}

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
		while (this.running.size > 0 || this.pending.length > 0) {
			if (this.pending.length > 0 && !this.full) this.run();
			else await Promise.race(this.running);
		}
	}

	private schedule(): void {
		if (this.full) return; // a running flush picks the rest up when it ends
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
		if (this.full || this.pending.length === 0) return;
		const flushing: Promise<void> = (async () => {
			if (this.opts.ready) await this.opts.ready().catch(() => undefined);
			const batch = this.pending.splice(0, this.opts.maxItems);
			try {
				const results = await this.flush(batch.map(b => b.item));
				batch.forEach((b, i) => b.resolve(results[i]));
			} catch (error) {
				for (const b of batch) b.reject(error);
			}
		})().finally(() => {
			this.running.delete(flushing);
			// What arrived during the flush goes at once: it has already waited a flush long.
			if (this.pending.length > 0) this.run();
		});
		this.running.add(flushing);
	}
}
