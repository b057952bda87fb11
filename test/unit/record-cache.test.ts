import { jsonBuffer, RecordCache, recordCacheBytes } from "../../lib/list/record-cache";

const rec = (version: string, text: string) => ({ version, json: Buffer.from(text) });

describe("RecordCache", () => {
	it("answers a record only for the version it was made from", () => {
		const cache = new RecordCache(1000);
		cache.set("job:1", rec("10|3|", '{"id":1}'));
		expect(cache.get("job:1", "10|3|")?.json.toString()).toBe('{"id":1}');
		expect(cache.get("job:1", "11|3|")).toBeUndefined();
		expect(cache.get("job:2", "10|3|")).toBeUndefined();
	});

	it("replaces a record kept under the same key and counts its bytes once", () => {
		const cache = new RecordCache(1000);
		cache.set("job:1", rec("1", "x".repeat(100)));
		cache.set("job:1", rec("2", "y".repeat(40)));
		expect(cache.size).toBe(1);
		expect(cache.length).toBe(40);
		expect(cache.get("job:1", "1")).toBeUndefined();
		expect(cache.get("job:1", "2")?.json.toString()).toBe("y".repeat(40));
	});

	it("drops the least recently used records once past its bytes", () => {
		const cache = new RecordCache(300);
		cache.set("a", rec("1", "a".repeat(100)));
		cache.set("b", rec("1", "b".repeat(100)));
		cache.set("c", rec("1", "c".repeat(100)));
		expect(cache.get("a", "1")).toBeDefined(); // a is now the newest
		cache.set("d", rec("1", "d".repeat(100)));
		expect(cache.get("b", "1")).toBeUndefined();
		expect(["a", "c", "d"].map(k => cache.get(k, "1") !== undefined)).toEqual([
			true,
			true,
			true
		]);
		expect(cache.length).toBe(300);
	});

	it("keeps nothing larger than itself, and nothing at all at size 0", () => {
		const cache = new RecordCache(10);
		cache.set("big", rec("1", "x".repeat(11)));
		expect(cache.size).toBe(0);
		const off = new RecordCache(0);
		off.set("a", rec("1", "{}"));
		expect(off.get("a", "1")).toBeUndefined();
	});

	it("makes each record a Buffer of its own, not a slice of Node's pool", () => {
		const json = jsonBuffer({ id: 1, name: "é" });
		expect(JSON.parse(json.toString())).toEqual({ id: 1, name: "é" });
		expect(json.buffer.byteLength).toBe(json.length);
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
