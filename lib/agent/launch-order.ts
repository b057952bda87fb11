import { compareRanks, type Rank } from "../documents/agent-protocol";

/**
 * The order the agent launches its backlog in: the queue's (priority, queued, id, as the
 * scheduler sends it with each run), not the order the runs came in. The scheduler places work
 * that ranks ahead of an agent's backlog while its launch window is closed (lib/scheduling/
 * launch-window.ts): a recipe's next job then waits for what ranks ahead of it only, not for
 * every launch placed before it. Launches are handed to the launchers a few at a time (`limit`),
 * enough to keep them busy while the agent's event loop is away, the rest waiting here in order.
 * A run without a rank goes after the ranked ones, in the order it came.
 */
export class LaunchOrder {
	private inFlight = 0;
	/** waiting turns, a binary heap by (rank, arrival) */
	private readonly heap: Turn[] = [];
	private arrivals = 0;

	/** `limit`: launches handed to the launchers at once (asked at each turn; at least 1) */
	constructor(private readonly limit: () => number) {}

	/**
	 * Waits for this launch's turn; answers the call that ends it (once the launcher has
	 * answered: started or failed). Calling it again does nothing.
	 */
	turn(rank: Rank | undefined): Promise<() => void> {
		return new Promise(resolve => {
			this.push({ rank: rank ?? LAST, arrival: this.arrivals++, start: resolve });
			this.next();
		});
	}

	/** Launches waiting for their turn. */
	get waiting(): number {
		return this.heap.length;
	}

	private next(): void {
		while (this.heap.length > 0 && this.inFlight < Math.max(1, this.limit())) {
			const turn = this.pop();
			this.inFlight++;
			let ended = false;
			turn.start(() => {
				if (ended) return;
				ended = true;
				this.inFlight--;
				this.next();
			});
		}
	}

	private push(turn: Turn): void {
		const heap = this.heap;
		heap.push(turn);
		let i = heap.length - 1;
		while (i > 0) {
			const parent = (i - 1) >> 1;
			if (before(heap[parent], heap[i])) break;
			[heap[parent], heap[i]] = [heap[i], heap[parent]];
			i = parent;
		}
	}

	private pop(): Turn {
		const heap = this.heap;
		const top = heap[0];
		const last = heap.pop()!;
		if (heap.length > 0) {
			heap[0] = last;
			let i = 0;
			for (;;) {
				const l = 2 * i + 1;
				const r = l + 1;
				let best = i;
				if (l < heap.length && before(heap[l], heap[best])) best = l;
				if (r < heap.length && before(heap[r], heap[best])) best = r;
				if (best === i) break;
				[heap[best], heap[i]] = [heap[i], heap[best]];
				i = best;
			}
		}
		return top;
	}
}

interface Turn {
	rank: Rank;
	arrival: number;
	start(end: () => void): void;
}

const LAST: Rank = [Infinity, Infinity, Infinity];

function before(a: Turn, b: Turn): boolean {
	const order = compareRanks(a.rank, b.rank);
	return order < 0 || (order === 0 && a.arrival < b.arrival);
}
