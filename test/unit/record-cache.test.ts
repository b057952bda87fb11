import { RecordCache, recordCacheBytes } from "../../lib/list/record-cache";
import { versionOf } from "../../lib/list/record-spec";

const text = (record: { json: Buffer } | undefined) => record?.json.toString();

describe("RecordCache", () => {
	it("answers a record only for the version it was made from, in its own scope", () => {
		const cache = new RecordCache(1000, 100);
		const jobs = cache.scope("0:job:");
		cache.set(jobs, 1, "10|3|", { id: 1 });
		expect(text(cache.get(jobs, 1, "10|3|"))).toBe('{"id":1}');
		expect(cache.get(jobs, 1, "11|3|")).toBeUndefined();
		expect(cache.get(jobs, 2, "10|3|")).toBeUndefined();
		expect(cache.scope("0:job:")).toBe(jobs);
		expect(cache.get(cache.scope("1:job:"), 1, "10|3|")).toBeUndefined();
	});

	it("answers by a version's row part and generation as by the version they make", () => {
		const cache = new RecordCache(1000, 100);
		const s = cache.scope("s");
		cache.set(s, 1, versionOf({ __version: "2026-01-01 00:00:00+00", __generation: "4.7" }), {
			id: 1
		});
		expect(text(cache.getParts(s, 1, "2026-01-01 00:00:00+00", "4.7"))).toBe('{"id":1}');
		expect(cache.getParts(s, 1, "2026-01-01 00:00:00+00", "4.8")).toBeUndefined();
		expect(cache.getParts(s, 1, "2026-01-01 00:00:01+00", "4.7")).toBeUndefined();
		expect(cache.getParts(s, 1, "2026-01-01 00:00:00+0", "04.7")).toBeUndefined();
		expect(cache.getParts(s, 1, "2026-01-01 00:00:00+00|", "4.7")).toBeUndefined();
		expect(cache.getParts(s, 2, "2026-01-01 00:00:00+00", "4.7")).toBeUndefined();
	});

	it("answers the latest record kept under a key, with its refs", () => {
		const cache = new RecordCache(1000, 100);
		const s = cache.scope("s");
		cache.set(s, 1, "1", { v: 1 });
		const made = cache.set(s, 1, "2", { v: 2 }, [7, 8]);
		expect(text(made)).toBe('{"v":2}');
		expect(cache.get(s, 1, "1")).toBeUndefined();
		expect(cache.get(s, 1, "2")).toMatchObject({ refs: [7, 8] });
		expect(cache.size).toBe(1);
	});

	it("keeps UTF-8 JSON of any text", () => {
		const cache = new RecordCache(1000, 100);
		const s = cache.scope("s");
		cache.set(s, 1, "1", { name: "Zürich → 東京 🛰" });
		expect(JSON.parse(text(cache.get(s, 1, "1"))!)).toEqual({ name: "Zürich → 東京 🛰" });
	});

	it("reuses its slabs in turn, forgetting the records of the one it fills again", () => {
		// three slabs of 20 bytes; each record `{"n":"xxxxxxxxxx"}` is 18 bytes, one per slab
		const cache = new RecordCache(60, 20);
		const s = cache.scope("s");
		const value = (c: string) => ({ n: c.repeat(10) });
		const keys = { a: 1, b: 2, c: 3, d: 4, e: 5 };
		for (const key of ["a", "b", "c"] as const) cache.set(s, keys[key], "1", value(key));
		expect(cache.size).toBe(3);
		expect(cache.allocated).toBe(60);
		cache.set(s, keys.d, "1", value("d"));
		expect(cache.get(s, keys.a, "1")).toBeUndefined();
		expect((["b", "c", "d"] as const).map(k => text(cache.get(s, keys[k], "1")))).toEqual(
			["b", "c", "d"].map(k => JSON.stringify(value(k)))
		);
		expect(cache.allocated).toBe(60);
		// b written again lives in a later slab: emptying b's first slab leaves it
		cache.set(s, keys.b, "2", value("B"));
		cache.set(s, keys.e, "1", value("e"));
		expect(text(cache.get(s, keys.b, "2"))).toBe(JSON.stringify(value("B")));
		expect(cache.get(s, keys.c, "1")).toBeUndefined();
	});

	it("keeps nothing larger than a slab, and nothing at all at size 0, yet answers the record", () => {
		const cache = new RecordCache(100, 10);
		const s = cache.scope("s");
		expect(text(cache.set(s, 1, "1", { n: "x".repeat(20) }))).toBe(
			JSON.stringify({ n: "x".repeat(20) })
		);
		expect(cache.get(s, 1, "1")).toBeUndefined();
		const off = new RecordCache(0);
		const o = off.scope("s");
		expect(text(off.set(o, 2, "1", {}))).toBe("{}");
		expect(off.get(o, 2, "1")).toBeUndefined();
		expect(off.allocated).toBe(0);
	});
});

describe("recordCacheBytes", () => {
	it("reads LIST_CACHE_MB in MiB, 48 by default", () => {
		expect(recordCacheBytes({})).toBe(48 * 1024 * 1024);
		expect(recordCacheBytes({ LIST_CACHE_MB: "0" })).toBe(0);
		expect(recordCacheBytes({ LIST_CACHE_MB: "1.5" })).toBe(1.5 * 1024 * 1024);
	});

	it("refuses what is not a size, naming the variable", () => {
		expect(() => recordCacheBytes({ LIST_CACHE_MB: "lots" })).toThrow(/LIST_CACHE_MB/);
		expect(() => recordCacheBytes({ LIST_CACHE_MB: "-1" })).toThrow(/LIST_CACHE_MB/);
	});
});
