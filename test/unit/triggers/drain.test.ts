import { drainBatches } from "../../../lib/triggers/drain";

/**
 * A fake queue of `waiting` items taken `size` at a time; each batch yields to the event loop
 * in the middle, as a transaction does, and the most batches ever in flight at once is counted.
 */
function fakeQueue(waiting: number, size: number, failAt = -1) {
	const state = { waiting, calls: 0, inFlight: 0, mostInFlight: 0 };
	const batch = async () => {
		const call = state.calls++;
		state.inFlight++;
		state.mostInFlight = Math.max(state.mostInFlight, state.inFlight);
		try {
			const events = Math.min(size, state.waiting);
			state.waiting -= events;
			await new Promise(resolve => setImmediate(resolve));
			if (call === failAt) throw new Error("the database went away");
			return { events };
		} finally {
			state.inFlight--;
		}
	};
	return { state, batch };
}

describe("drainBatches", () => {
	it("takes a trickle one batch at a time", async () => {
		const q = fakeQueue(30, 10);
		const seen: number[] = [];
		const total = await drainBatches(q.batch, { workers: 2, fullBatch: 50 }, d =>
			seen.push(d.events)
		);
		expect(total).toBe(30);
		expect(seen).toEqual([10, 10, 10]);
		expect(q.state.mostInFlight).toBe(1);
	});

	it("drains a burst with as many batches at once as it has workers, every item once", async () => {
		const q = fakeQueue(1234, 100);
		let told = 0;
		const total = await drainBatches(q.batch, { workers: 3, fullBatch: 100 }, d => {
			told += d.events;
		});
		expect(total).toBe(1234);
		expect(told).toBe(1234);
		expect(q.state.waiting).toBe(0);
		expect(q.state.mostInFlight).toBe(3);
	});

	it("waits for every worker before answering a failure", async () => {
		const q = fakeQueue(1000, 100, 2);
		const outcome = await drainBatches(q.batch, { workers: 2, fullBatch: 100 }, () => {}).catch(
			(e: Error) => e
		);
		expect(outcome).toBeInstanceOf(Error);
		expect((outcome as Error).message).toBe("the database went away");
		// the worker that did not fail went on to the end of what was waiting
		expect(q.state.waiting).toBe(0);
		expect(q.state.inFlight).toBe(0);
	});
});
