import { LaunchOrder } from "../../../lib/agent/launch-order";
import type { Rank } from "../../../lib/documents/agent-protocol";

describe("LaunchOrder", () => {
	it("hands launches to the launchers in rank order, `limit` at a time", async () => {
		const order = new LaunchOrder(() => 2);
		const started: string[] = [];
		const ends = new Map<string, () => void>();
		const ask = (name: string, rank: Rank | undefined) =>
			order.turn(rank).then(end => {
				started.push(name);
				ends.set(name, end);
			});
		// the first two go at once, whatever their rank
		await Promise.all([ask("a1", [100, 1, 1]), ask("a2", [100, 2, 2])]);
		const rest = [
			ask("a3", [100, 3, 3]),
			ask("unranked", undefined),
			ask("a4", [100, 4, 4]),
			// a recipe's next job, queued with its recipe's time: ahead of a3 and a4
			ask("b", [100, 0, 9]),
			ask("urgent", [1, 5, 10])
		];
		await new Promise(resolve => setImmediate(resolve));
		expect(started).toEqual(["a1", "a2"]);
		expect(order.waiting).toBe(5);
		ends.get("a1")!();
		// ending a turn twice frees one place only
		ends.get("a1")!();
		await new Promise(resolve => setImmediate(resolve));
		expect(started).toEqual(["a1", "a2", "urgent"]);
		ends.get("a2")!();
		ends.get("urgent")!();
		await new Promise(resolve => setImmediate(resolve));
		expect(started).toEqual(["a1", "a2", "urgent", "b", "a3"]);
		ends.get("b")!();
		ends.get("a3")!();
		await Promise.all(rest);
		// unranked work goes after the ranked, in the order it came
		expect(started.slice(5)).toEqual(["a4", "unranked"]);
		expect(order.waiting).toBe(0);
	});

	it("asks its limit at each turn", async () => {
		let limit = 1;
		const order = new LaunchOrder(() => limit);
		const first = await order.turn([1, 1, 1]);
		let second = false;
		const next = order.turn([1, 2, 2]).then(() => (second = true));
		await new Promise(resolve => setImmediate(resolve));
		expect(second).toBe(false);
		limit = 2;
		// a third asking sees the larger limit, and the best-ranked goes
		const third = order.turn([1, 3, 3]);
		await next;
		expect(second).toBe(true);
		first();
		await third;
	});
});
