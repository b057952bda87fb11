import { AnswerCache } from "../../lib/list/answer-cache";

const json = (n: number, fill = "a") => Buffer.from(`"${fill.repeat(n - 2)}"`);

describe("AnswerCache", () => {
	it("answers what was kept only at the version it was kept for", () => {
		const cache = new AnswerCache(1000);
		cache.set("k", "v1", json(10));
		expect(cache.get("k", "v1")?.toString()).toBe(json(10).toString());
		expect(cache.get("k", "v2")).toBeUndefined();
		expect(cache.get("other", "v1")).toBeUndefined();
		cache.set("k", "v2", json(10, "b"));
		expect(cache.get("k", "v1")).toBeUndefined();
		expect(cache.get("k", "v2")?.toString()).toBe(json(10, "b").toString());
		expect(cache.size).toBe(1);
	});

	it("forgets the least recently used answers past its room", () => {
		const cache = new AnswerCache(900);
		cache.set("a", "1", json(200));
		cache.set("b", "1", json(200));
		cache.set("c", "1", json(200));
		cache.set("d", "1", json(200));
		cache.get("a", "1"); // used again: b is now the least recent
		cache.set("e", "1", json(200));
		expect(cache.get("b", "1")).toBeUndefined();
		for (const key of ["a", "c", "d", "e"]) expect(cache.get(key, "1")).toBeDefined();
		// the reads above used a, c, d and e in that order: a is now the least recent
		cache.set("f", "1", json(200));
		expect(cache.get("a", "1")).toBeUndefined();
		expect(cache.size).toBe(4);
	});

	it("keeps no answer larger than a quarter of its room", () => {
		const cache = new AnswerCache(1000);
		cache.set("big", "1", json(251));
		expect(cache.get("big", "1")).toBeUndefined();
		expect(cache.size).toBe(0);
	});
});
