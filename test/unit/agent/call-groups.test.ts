import { CALL_CHARS, callGroups } from "../../../lib/documents/agent-protocol";

describe("callGroups", () => {
	it("keeps items in order, in groups whose JSON stays within the limit", () => {
		const items = Array.from({ length: 10 }, (_, i) => ({ id: i, text: "x".repeat(30) }));
		const size = JSON.stringify(items[0]).length;
		const groups = callGroups(items, item => item, size * 3);
		expect(groups.map(g => g.map(i => i.id))).toEqual([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]);
		expect(callGroups(items)).toEqual([items]);
		expect(callGroups([])).toEqual([]);
	});

	it("sends an item larger than the limit alone", () => {
		const big = { id: 1, stdout: "y".repeat(CALL_CHARS) };
		const small = { id: 2, stdout: "" };
		expect(callGroups([small, big, small]).map(g => g.map(i => i.id))).toEqual([[2], [1], [2]]);
	});

	it("measures what `jsonOf` picks of each item", () => {
		const runs = [
			{ exe: 1, spec: { s: "a".repeat(60) } },
			{ exe: 2, spec: { s: "b".repeat(60) } }
		];
		expect(callGroups(runs, r => r.spec, 100).map(g => g.map(r => r.exe))).toEqual([[1], [2]]);
		expect(callGroups(runs, r => r.exe, 100).map(g => g.map(r => r.exe))).toEqual([[1, 2]]);
	});
});
