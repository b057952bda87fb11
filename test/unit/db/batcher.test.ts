import { MicroBatcher } from "../../../lib/db/run";

describe("MicroBatcher", () => {
	it("hands items that arrive together to one flush and answers each", async () => {
		const flushes: number[][] = [];
		const b = new MicroBatcher<number, number>(
			async items => {
				flushes.push(items);
				return items.map(i => i * 10);
			},
			{ delayMs: 5, maxItems: 100 }
		);
		const answers = await Promise.all([b.add(1), b.add(2), b.add(3)]);
		expect(answers).toEqual([10, 20, 30]);
		expect(flushes).toEqual([[1, 2, 3]]);
	});

	it("flushes at once when full, and what arrives during a flush goes next, together", async () => {
		const flushes: number[][] = [];
		let release!: () => void;
		const gate = new Promise<void>(r => (release = r));
		const b = new MicroBatcher<number, number>(
			async items => {
				flushes.push(items);
				if (flushes.length === 1) await gate;
				return items;
			},
			{ delayMs: 1000, maxItems: 2 }
		);
		const first = [b.add(1), b.add(2)];
		await new Promise(r => setTimeout(r, 5));
		expect(flushes).toEqual([[1, 2]]);
		const later = [b.add(3), b.add(4), b.add(5)];
		release();
		await Promise.all([...first, ...later]);
		expect(flushes).toEqual([[1, 2], [3, 4], [5]]);
	});

	it("rejects every item of a flush that throws, and keeps working", async () => {
		let fail = true;
		const b = new MicroBatcher<number, number>(
			async items => {
				if (fail) throw new Error("boom");
				return items;
			},
			{ delayMs: 1, maxItems: 10 }
		);
		await expect(Promise.all([b.add(1), b.add(2)])).rejects.toThrow("boom");
		fail = false;
		await expect(b.add(3)).resolves.toBe(3);
	});

	it("drains what waits", async () => {
		const seen: number[] = [];
		const b = new MicroBatcher<number, void>(
			async items => {
				seen.push(...items);
				return items.map(() => undefined);
			},
			{ delayMs: 10000, maxItems: 10 }
		);
		void b.add(1);
		void b.add(2);
		await b.drain();
		expect(seen).toEqual([1, 2]);
		expect(b.size).toBe(0);
	});

	it("with a concurrency of 2, flushes what arrives during a flush beside it, never a third", async () => {
		const flushes: number[][] = [];
		const gates: (() => void)[] = [];
		const b = new MicroBatcher<number, number>(
			async items => {
				flushes.push(items);
				await new Promise<void>(r => gates.push(r));
				return items;
			},
			{ delayMs: 1, maxItems: 10, concurrency: 2 }
		);
		const first = b.add(1);
		await new Promise(r => setTimeout(r, 10));
		const second = b.add(2);
		await new Promise(r => setTimeout(r, 10));
		// the first flush still runs: the second went beside it
		expect(flushes).toEqual([[1], [2]]);
		const third = [b.add(3), b.add(4)];
		await new Promise(r => setTimeout(r, 10));
		expect(flushes).toHaveLength(2);
		gates[0]();
		await expect(first).resolves.toBe(1);
		await new Promise(r => setTimeout(r, 10));
		expect(flushes).toEqual([[1], [2], [3, 4]]);
		gates[1]();
		gates[2]();
		await expect(Promise.all([second, ...third])).resolves.toEqual([2, 3, 4]);
		await b.drain();
		expect(b.size).toBe(0);
	});

	it("takes its batch once `ready` resolves: what arrives meanwhile joins it", async () => {
		const flushes: number[][] = [];
		let open: () => void = () => undefined;
		let readies = 0;
		const b = new MicroBatcher<number, number>(
			async items => {
				flushes.push(items);
				return items;
			},
			{
				delayMs: 1,
				maxItems: 10,
				ready: () => {
					readies++;
					return new Promise<void>(r => (open = r));
				}
			}
		);
		const answers = [b.add(1)];
		await new Promise(r => setTimeout(r, 10));
		answers.push(b.add(2), b.add(3));
		await new Promise(r => setTimeout(r, 10));
		expect(flushes).toEqual([]);
		expect(readies).toBe(1);
		open();
		await expect(Promise.all(answers)).resolves.toEqual([1, 2, 3]);
		expect(flushes).toEqual([[1, 2, 3]]);
	});
});
