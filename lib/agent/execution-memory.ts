/**
 * Finished execution ids remembered to make `run` idempotent, and cancels remembered ahead of
 * their run (the oldest of each are forgotten beyond this).
 */
const REMEMBERED = 10_000;

/**
 * What an agent remembers of executions it no longer holds: the ones finished here (a run of
 * one again is known, not started twice), and cancels of ids it never had, each kept for
 * `cancelMemoryMs`: the scheduler hands an execution over after committing its placement, so a
 * cancel committed just after may arrive first, and the run that follows must not start a
 * process nobody would stop.
 */
export class ExecutionMemory {
	private readonly done = new Set<number>();
	/** cancels of executions not held here, by id: until when they keep its run from starting */
	private readonly earlyCancels = new Map<number, number>();

	constructor(private readonly cancelMemoryMs: number) {}

	finish(id: number): void {
		this.done.add(id);
		if (this.done.size > REMEMBERED)
			this.done.delete(this.done.values().next().value as number);
	}

	finished(id: number): boolean {
		return this.done.has(id);
	}

	rememberCancel(id: number): void {
		const now = Date.now();
		// the oldest first: the expired ones, and any beyond the cap, go
		for (const [old, until] of this.earlyCancels) {
			if (until >= now && this.earlyCancels.size < REMEMBERED) break;
			this.earlyCancels.delete(old);
		}
		this.earlyCancels.delete(id);
		this.earlyCancels.set(id, now + this.cancelMemoryMs);
	}

	/** Whether a cancel of this id came before it, not long ago (it is used up either way). */
	takeEarlyCancel(id: number): boolean {
		const until = this.earlyCancels.get(id);
		if (until === undefined) return false;
		this.earlyCancels.delete(id);
		return until >= Date.now();
	}
}
