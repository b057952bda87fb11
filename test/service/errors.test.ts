import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type Reply, type TestApi } from "../helpers/broker";

/** The errors the migrations seed, by name; each is built in. */
const BUILTIN_NAMES = [
	"algorithm-unknown",
	"database",
	"database-operation",
	"docker-task-launch",
	"filesystem-io",
	"ingest-failure",
	"memory-limit",
	"nfs",
	"node-lost",
	"node-shutdown",
	"scheduler-lost",
	"task-launch",
	"timeout",
	"unknown"
];
const FIELDS = [
	"category",
	"created",
	"description",
	"id",
	"is_builtin",
	"last_modified",
	"name",
	"title"
];
const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let tdb: TestDatabase;
let app: TestApi;
let api: string;

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "errors"]);
	api = app.api;
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

async function rowCount(): Promise<number> {
	const [rows] = await tdb.db.query("SELECT count(*)::int AS n FROM error");
	return (rows as { n: number }[])[0].n;
}

async function list(query: string): Promise<Reply> {
	return request("GET", `${api}/errors/${query ? `?${query}` : ""}`);
}

function names(reply: Reply): string[] {
	return reply.body.results.map((e: { name: string }) => e.name);
}

function expectJsonError(reply: Reply, status: number, detail?: RegExp) {
	expect(reply.status).toBe(status);
	expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
	expect(Object.keys(reply.body)).toEqual(["detail"]);
	expect(typeof reply.body.detail).toBe("string");
	if (detail) expect(reply.body.detail).toMatch(detail);
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

describe("GET /errors/ on a fresh database", () => {
	it("lists the 14 built-in errors with Scale's fields, ordered by name", async () => {
		const reply = await list("");
		expect(reply.status).toBe(200);
		expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
		expect(reply.body).toMatchObject({ count: 14, next: null, previous: null });
		expect(names(reply)).toEqual(BUILTIN_NAMES);
		for (const e of reply.body.results) {
			expect(Object.keys(e).sort()).toEqual(FIELDS);
			expect(Number.isInteger(e.id)).toBe(true);
			expect(e.is_builtin).toBe(true);
			expect(["SYSTEM", "ALGORITHM", "DATA"]).toContain(e.category);
			expect(typeof e.title).toBe("string");
			expect(typeof e.description).toBe("string");
			expect(e.created).toMatch(ISO_MS_Z);
			expect(e.last_modified).toMatch(ISO_MS_Z);
		}
		const unknown = reply.body.results.find((e: { name: string }) => e.name === "unknown");
		expect(unknown).toMatchObject({ title: "Unknown", category: "SYSTEM" });
		const algorithm = reply.body.results.find(
			(e: { name: string }) => e.name === "algorithm-unknown"
		);
		expect(algorithm.category).toBe("ALGORITHM");
	});

	it("answers the same list under /api/v3", async () => {
		const reply = await request("GET", `${api}/v3/errors/`);
		expect(reply.status).toBe(200);
		expect(reply.body.count).toBe(BUILTIN_NAMES.length);
		expect(names(reply)).toEqual(BUILTIN_NAMES);
	});
});

describe("POST /errors/", () => {
	it("creates an error: 201, absolute Location, and the record GET answers", async () => {
		const before = await rowCount();
		const body = {
			name: "error1",
			title: "Error 1",
			description: "This is an algorithm error",
			category: "ALGORITHM"
		};
		const reply = await request("POST", `${api}/errors/`, body);
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({ ...body, is_builtin: false });
		expect(Object.keys(reply.body).sort()).toEqual(FIELDS);
		expect(reply.body.created).toMatch(ISO_MS_Z);
		expect(reply.body.last_modified).toBe(reply.body.created);
		const location = reply.headers.get("location");
		expect(location).toBe(`${api}/errors/${reply.body.id}/`);
		expect(location).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/errors\/\d+\/$/);

		const fetched = await request("GET", location!);
		expect(fetched.status).toBe(200);
		expect(fetched.body).toEqual(reply.body);
		expect(await rowCount()).toBe(before + 1);
	});

	it("points Location under /api/v3 when posted there", async () => {
		const reply = await request("POST", `${api}/v3/errors/`, {
			name: "error-v3",
			category: "DATA"
		});
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({
			name: "error-v3",
			title: null,
			description: null,
			category: "DATA",
			is_builtin: false
		});
		const location = reply.headers.get("location")!;
		expect(location).toBe(`${api}/v3/errors/${reply.body.id}/`);
		const fetched = await request("GET", location);
		expect(fetched.status).toBe(200);
		expect(fetched.body).toEqual(reply.body);
	});

	it("refuses unknown body fields, naming each; takes read-only ones with warnings", async () => {
		expectJsonError(
			await request("POST", `${api}/errors/`, {
				name: "with-extras",
				category: "DATA",
				url: "http://example.com/",
				page_number: 3
			}),
			400,
			/^url: .*; page_number: /
		);
		const reply = await request("POST", `${api}/errors/`, {
			name: "with-extras",
			category: "DATA",
			is_builtin: true,
			id: 99999
		});
		expect(reply.status).toBe(201);
		expect(reply.body.is_builtin).toBe(false);
		expect(reply.body.id).not.toBe(99999);
		expect(reply.body.warnings.map((w: any) => w.details)).toEqual([
			"Error includes read-only field is_builtin, ignored",
			"Error includes read-only field id, ignored"
		]);
	});

	it.each([
		["category SYSTEM", { name: "sys", category: "SYSTEM" }, /^category: .*ALGORITHM, DATA/],
		["a missing name", { category: "DATA" }, /^name: is required/],
		["a missing category", { name: "no-category" }, /^category: is required/],
		["an unknown category", { name: "bad-cat", category: "OTHER" }, /^category: /],
		["a numeric name", { name: 5, category: "DATA" }, /^name: must be string/],
		["a null name", { name: null, category: "DATA" }, /^name: /],
		["an empty name", { name: "", category: "DATA" }, /^name: /],
		["a numeric title", { name: "t", title: 5, category: "DATA" }, /^title: must be/],
		[
			"an array description",
			{ name: "d", description: [], category: "DATA" },
			/^description: /
		],
		["a numeric category", { name: "c", category: 1 }, /^category: /],
		["a 51-character name", { name: "n".repeat(51), category: "DATA" }, /^name: .*50/],
		[
			"a 51-character title",
			{ name: "t2", title: "t".repeat(51), category: "DATA" },
			/^title: /
		],
		[
			"a 251-character description",
			{ name: "d2", description: "d".repeat(251), category: "DATA" },
			/^description: /
		],
		["a name with a space", { name: "bad name", category: "DATA" }, /^name: .*pattern/],
		["a name with a slash", { name: "bad/name", category: "DATA" }, /^name: .*pattern/],
		["a name with non-ASCII", { name: "café", category: "DATA" }, /^name: .*pattern/],
		["a NUL in the title", { name: "nul", title: "a\u0000b", category: "DATA" }, /^title: /],
		[
			"a NUL in the description",
			{ name: "nul", description: "\u0000", category: "DATA" },
			/^description: /
		]
	])("rejects %s with 400 naming the field, and stores nothing", async (_, body, detail) => {
		const before = await rowCount();
		const reply = await request("POST", `${api}/errors/`, body);
		expectJsonError(reply, 400, detail);
		expect(await rowCount()).toBe(before);
	});

	it("accepts a name of exactly 50 characters", async () => {
		const reply = await request("POST", `${api}/errors/`, {
			name: "a".repeat(50),
			category: "DATA"
		});
		expect(reply.status).toBe(201);
		expect(reply.body.name).toBe("a".repeat(50));
	});

	it("rejects a duplicate name, built-in or not, with 400 naming the field", async () => {
		const before = await rowCount();
		const dup = await request("POST", `${api}/errors/`, { name: "error1", category: "DATA" });
		expectJsonError(dup, 400, /^name: .*error1.*already exists/);
		const builtin = await request("POST", `${api}/errors/`, {
			name: "unknown",
			category: "ALGORITHM"
		});
		expectJsonError(builtin, 400, /^name: /);
		expect(await rowCount()).toBe(before);
		const [rows] = await tdb.db.query("SELECT category FROM error WHERE name = 'error1'");
		expect(rows).toEqual([{ category: "ALGORITHM" }]);
	});

	it.each([
		["an array body", "[1, 2]"],
		["malformed JSON", '{"name": "x",'],
		["a JSON string", '"name"']
	])("rejects %s with 400", async (_, body) => {
		const before = await rowCount();
		expectJsonError(await request("POST", `${api}/errors/`, body), 400);
		expect(await rowCount()).toBe(before);
	});
});

describe("GET /errors/{id}/", () => {
	it("answers a built-in error", async () => {
		const [rows] = await tdb.db.query("SELECT id FROM error WHERE name = 'timeout'");
		const id = (rows as { id: number }[])[0].id;
		const reply = await request("GET", `${api}/errors/${id}/`);
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			id,
			name: "timeout",
			title: "Timeout",
			category: "SYSTEM",
			is_builtin: true
		});
		expect(Object.keys(reply.body).sort()).toEqual(FIELDS);
		// without the trailing slash too
		expect((await request("GET", `${api}/errors/${id}`)).body).toEqual(reply.body);
	});

	it.each(["999999", "abc", "0", "-1", "1.5", "12345678901234567890"])(
		"answers 404 JSON for id %s",
		async id => {
			expectJsonError(await request("GET", `${api}/errors/${id}/`), 404);
		}
	);
});

describe("PATCH /errors/{id}/", () => {
	let badEdits = 0;

	async function create(name: string) {
		const reply = await request("POST", `${api}/errors/`, {
			name,
			title: "Original",
			description: "Original description",
			category: "DATA"
		});
		expect(reply.status).toBe(201);
		return reply.body;
	}

	it("edits title, description and category and advances last_modified", async () => {
		const created = await create("to-edit");
		await sleep(5);
		const reply = await request("PATCH", `${api}/errors/${created.id}/`, {
			title: "Edited",
			description: "Edited description",
			category: "ALGORITHM"
		});
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			id: created.id,
			name: "to-edit",
			title: "Edited",
			description: "Edited description",
			category: "ALGORITHM",
			is_builtin: false,
			created: created.created
		});
		expect(reply.body.last_modified).toMatch(ISO_MS_Z);
		expect(Date.parse(reply.body.last_modified)).toBeGreaterThan(
			Date.parse(created.last_modified)
		);
		expect((await request("GET", `${api}/errors/${created.id}/`)).body).toEqual(reply.body);
	});

	it("allows category SYSTEM, as the spec does for edits", async () => {
		const created = await create("to-system");
		const reply = await request("PATCH", `${api}/errors/${created.id}/`, {
			category: "SYSTEM"
		});
		expect(reply.status).toBe(200);
		expect(reply.body.category).toBe("SYSTEM");
		expect(reply.body.title).toBe("Original");
		expect(reply.body.is_builtin).toBe(false);
	});

	it("changes only the fields given, and null clears a title", async () => {
		const created = await create("partial");
		const reply = await request("PATCH", `${api}/errors/${created.id}/`, { title: null });
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			title: null,
			description: "Original description",
			category: "DATA"
		});
	});

	it("refuses unknown fields, and ignores fields that cannot be edited", async () => {
		const created = await create("extras");
		expectJsonError(
			await request("PATCH", `${api}/errors/${created.id}/`, { description: "x", url: "y" }),
			400,
			/^url: /
		);
		const reply = await request("PATCH", `${api}/errors/${created.id}/`, {
			description: "New",
			name: "renamed",
			is_builtin: true,
			id: 1
		});
		expect(reply.status).toBe(200);
		expect(reply.body).toMatchObject({
			id: created.id,
			name: "extras",
			description: "New",
			is_builtin: false
		});
		expect(reply.body).not.toHaveProperty("url");
		const [rows] = await tdb.db.query("SELECT title FROM error WHERE name = 'unknown'");
		expect(rows).toEqual([{ title: "Unknown" }]);
	});

	it.each([
		["an unknown category", { category: "OTHER" }, /^category: /],
		["a numeric title", { title: 7 }, /^title: /],
		["a 251-character description", { description: "x".repeat(251) }, /^description: /],
		["a NUL in the description", { description: "a\u0000" }, /^description: /]
	])("rejects %s with 400 and changes nothing", async (_, body, detail) => {
		const created = await create(`bad-edit-${++badEdits}`);
		expectJsonError(await request("PATCH", `${api}/errors/${created.id}/`, body), 400, detail);
		expect((await request("GET", `${api}/errors/${created.id}/`)).body).toEqual(created);
	});

	it("refuses to edit a built-in error with 400 and leaves it unchanged", async () => {
		const [rows] = await tdb.db.query("SELECT id FROM error WHERE name = 'nfs'");
		const id = (rows as { id: number }[])[0].id;
		const before = await request("GET", `${api}/errors/${id}/`);
		await sleep(5);
		const reply = await request("PATCH", `${api}/errors/${id}/`, {
			title: "Hacked",
			category: "DATA"
		});
		expectJsonError(reply, 400, /built in/);
		const after = await request("GET", `${api}/errors/${id}/`);
		expect(after.body).toEqual(before.body);
	});

	it("answers 404 for an unknown id", async () => {
		expectJsonError(
			await request("PATCH", `${api}/errors/999999/`, { title: "x" }),
			404,
			/999999/
		);
		expectJsonError(await request("PATCH", `${api}/errors/abc/`, { title: "x" }), 404);
	});
});

describe("GET /errors/ filters, order and paging", () => {
	beforeAll(async () => {
		// A known set of non-built-in errors besides those the tests above made.
		for (const [name, category] of [
			["zeta", "DATA"],
			["alpha", "ALGORITHM"],
			["mid", "DATA"]
		]) {
			const reply = await request("POST", `${api}/errors/`, { name, category });
			expect(reply.status).toBe(201);
		}
	});

	it("filters by repeated name", async () => {
		const reply = await list("name=zeta&name=alpha&name=unknown&name=no-such-error");
		expect(reply.status).toBe(200);
		expect(reply.body.count).toBe(3);
		expect(names(reply)).toEqual(["alpha", "unknown", "zeta"]);
	});

	it("filters by a name repeated more than 20 times", async () => {
		const query = [...Array.from({ length: 24 }, (_, i) => `name=nope-${i}`), "name=mid"];
		const reply = await list(query.join("&"));
		expect(reply.status).toBe(200);
		expect(names(reply)).toEqual(["mid"]);
	});

	it("filters by category", async () => {
		const counts = async (categories: string[]) => {
			const [rows] = await tdb.db.query(
				"SELECT count(*)::int AS n FROM error WHERE category = ANY($1)",
				{ bind: [categories] }
			);
			return (rows as { n: number }[])[0].n;
		};
		const algorithm = await list("category=ALGORITHM");
		expect(algorithm.status).toBe(200);
		expect(algorithm.body.count).toBe(await counts(["ALGORITHM"]));
		expect(algorithm.body.results.every((e: any) => e.category === "ALGORITHM")).toBe(true);
		expect(names(algorithm)).toEqual(expect.arrayContaining(["alpha", "algorithm-unknown"]));
		const builtinSystem = await list("category=SYSTEM&is_builtin=true");
		expect(builtinSystem.body.count).toBe(12);
		const both = await list("category=ALGORITHM&category=SYSTEM&page_size=1000");
		expect(both.body.count).toBe(await counts(["ALGORITHM", "SYSTEM"]));
		expect(both.body.count).toBeGreaterThan(algorithm.body.count + 12);
		expect(both.body.results.some((e: any) => e.category === "DATA")).toBe(false);
		expectJsonError(await list("category=OTHER"), 400, /^category: /);
	});

	it("filters by is_builtin", async () => {
		const builtin = await list("is_builtin=true");
		expect(builtin.body.count).toBe(BUILTIN_NAMES.length);
		expect(names(builtin)).toEqual(BUILTIN_NAMES);
		const custom = await list("is_builtin=false");
		const total = await rowCount();
		expect(custom.body.count).toBe(total - BUILTIN_NAMES.length);
		expect(custom.body.results.every((e: any) => e.is_builtin === false)).toBe(true);
		expect(names(custom)).toEqual(expect.arrayContaining(["alpha", "mid", "zeta"]));
		expectJsonError(await list("is_builtin=maybe"), 400, /^is_builtin: /);
	});

	it("orders by -name", async () => {
		const reply = await list("is_builtin=true&order=-name");
		expect(names(reply)).toEqual([...BUILTIN_NAMES].reverse());
	});

	it("orders by category, then by several fields", async () => {
		const reply = await list("name=zeta&name=alpha&name=unknown&order=category");
		expect(reply.body.results.map((e: any) => e.category)).toEqual([
			"ALGORITHM",
			"DATA",
			"SYSTEM"
		]);
		const multi = await list("name=zeta&name=mid&name=alpha&order=category&order=-name");
		expect(names(multi)).toEqual(["alpha", "zeta", "mid"]);
	});

	it("rejects an unknown order field with 400", async () => {
		expectJsonError(await list("order=nonsense"), 400, /^order: .*nonsense/);
		expectJsonError(await list("order=-url"), 400, /^order: /);
	});

	it("pages with absolute next and previous links that work when fetched", async () => {
		const first = await list("is_builtin=true&page_size=5");
		expect(first.status).toBe(200);
		expect(first.body.count).toBe(BUILTIN_NAMES.length);
		expect(first.body.previous).toBeNull();
		expect(names(first)).toEqual(BUILTIN_NAMES.slice(0, 5));
		expect(first.body.next).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/errors\/\?/);
		const next = new URL(first.body.next);
		expect(next.searchParams.get("page")).toBe("2");
		expect(next.searchParams.get("page_size")).toBe("5");
		expect(next.searchParams.get("is_builtin")).toBe("true");

		const second = await request("GET", first.body.next);
		expect(second.status).toBe(200);
		expect(second.body.count).toBe(BUILTIN_NAMES.length);
		expect(names(second)).toEqual(BUILTIN_NAMES.slice(5, 10));
		expect(second.body.previous).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/errors\/\?/);

		const third = await request("GET", second.body.next);
		expect(third.body.count).toBe(BUILTIN_NAMES.length);
		expect(third.body.next).toBeNull();
		expect(names(third)).toEqual(BUILTIN_NAMES.slice(10));

		const back = await request("GET", second.body.previous);
		expect(back.body).toEqual(first.body);

		const beyond = await list("is_builtin=true&page_size=5&page=4");
		expect(beyond.status).toBe(200);
		expect(beyond.body.results).toEqual([]);
		expect(beyond.body.count).toBe(BUILTIN_NAMES.length);
		expect(beyond.body.next).toBeNull();
	});

	it("keeps repeated parameters in the links", async () => {
		const first = await list("is_builtin=true&order=category&order=-name&page_size=4&name=");
		expect(names(first)).toEqual(["memory-limit", "algorithm-unknown", "unknown", "timeout"]);
		const next = new URL(first.body.next);
		expect(next.searchParams.getAll("order")).toEqual(["category", "-name"]);
		const second = await request("GET", first.body.next);
		expect(names(second)).toEqual([
			"task-launch",
			"scheduler-lost",
			"node-shutdown",
			"node-lost"
		]);
		const back = await request("GET", second.body.previous);
		expect(names(back)).toEqual(names(first));
	});

	it("links pages under /api/v3 when listed there", async () => {
		const reply = await request("GET", `${api}/v3/errors/?is_builtin=true&page_size=10`);
		expect(reply.body.next).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v3\/errors\/\?/);
		const next = await request("GET", reply.body.next);
		expect(names(next)).toEqual(BUILTIN_NAMES.slice(10));
	});

	it("defaults to 100 a page", async () => {
		await tdb.db.query(
			`INSERT INTO error (name, category) SELECT 'bulk-' || lpad(n::text, 3, '0'), 'DATA'
			 FROM generate_series(1, 120) n`
		);
		const total = await rowCount();
		const reply = await list("");
		expect(reply.body.count).toBe(total);
		expect(reply.body.results).toHaveLength(100);
		expect(new URL(reply.body.next).searchParams.get("page")).toBe("2");
		const second = await request("GET", reply.body.next);
		expect(second.body.results).toHaveLength(total - 100);
	});

	it.each([
		["page_size=0", /^page_size: /],
		["page_size=1001", /^page_size: /],
		["page_size=abc", /^page_size: /],
		["page_size=-5", /^page_size: /],
		["page=0", /^page: /],
		["page=abc", /^page: /]
	])("rejects %s with 400", async (query, detail) => {
		expectJsonError(await list(query), 400, detail);
	});

	it("accepts page_size 1 and 1000", async () => {
		const one = await list("is_builtin=true&page_size=1");
		expect(one.body.results).toHaveLength(1);
		expect(one.body.count).toBe(BUILTIN_NAMES.length);
		const max = await list("page_size=1000");
		expect(max.status).toBe(200);
		expect(max.body.results).toHaveLength(await rowCount());
		expect(max.body.next).toBeNull();
	});
});

describe("GET /errors/ started and ended", () => {
	beforeAll(async () => {
		await tdb.db.query(
			`UPDATE error SET last_modified = '2015-03-11T12:00:00Z' WHERE name IN ('unknown', 'nfs')`
		);
		await tdb.db.query(
			`UPDATE error SET last_modified = '2016-06-01T00:00:00Z' WHERE name = 'timeout'`
		);
	});

	it("filters on last_modified between two datetimes", async () => {
		const reply = await list("started=2015-03-11T00:00:00Z&ended=2015-03-12T00:00:00Z");
		expect(reply.status).toBe(200);
		expect(names(reply)).toEqual(["nfs", "unknown"]);
		const wider = await list("started=2015-01-01T00:00:00.000Z&ended=2016-12-31T23:59:59Z");
		expect(names(wider)).toEqual(["nfs", "timeout", "unknown"]);
	});

	it("accepts offsets, with + encoded", async () => {
		// 2015-03-11T12:00:00Z is 2015-03-11T14:00:00+02:00
		const hit = await list(
			"started=2015-03-11T14:00:00%2B02:00&ended=2015-03-11T14:00:00%2B02:00"
		);
		expect(names(hit)).toEqual(["nfs", "unknown"]);
		const miss = await list("started=2015-03-11T12:00:01%2B00:00&ended=2015-03-11T13:00:00Z");
		expect(names(miss)).toEqual([]);
	});

	it("takes ended alone as an upper bound", async () => {
		const reply = await list("ended=2015-12-31T00:00:00Z");
		expect(names(reply)).toEqual(["nfs", "unknown"]);
	});

	it("takes a duration as that long before now", async () => {
		const recent = await list("started=PT1H&page_size=1000");
		expect(recent.status).toBe(200);
		expect(recent.body.count).toBe((await rowCount()) - 3);
		expect(names(recent)).not.toContain("unknown");
		expect(names(recent)).toContain("database");
		const long = await list("started=P20Y&page_size=1000");
		expect(long.body.count).toBe(await rowCount());
		const beforeAnHourAgo = await list("ended=PT1H");
		expect(names(beforeAnHourAgo)).toEqual(["nfs", "timeout", "unknown"]);
		const alsoSeconds = await list("started=PT3H0M0S&ended=PT1H");
		expect(names(alsoSeconds)).toEqual([]);
	});

	it.each([
		["started=2015-03-11T00:00:00", /^started: .*timezone/],
		["ended=2015-03-11T00:00:00", /^ended: .*timezone/],
		["started=2015-03-11", /^started: /],
		["started=yesterday", /^started: /],
		["started=P", /^started: /],
		["started=2015-02-30T00:00:00Z", /^started: /],
		["started=2015-03-12T00:00:00Z&ended=2015-03-11T00:00:00Z", /^started: .*before ended/],
		["started=2999-01-01T00:00:00Z", /^started: .*before ended/],
		["started=PT1H&ended=PT2H", /^started: .*before ended/]
	])("rejects %s with 400", async (query, detail) => {
		expectJsonError(await list(query), 400, detail);
	});
});
