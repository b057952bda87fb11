import { BadRequestError } from "../../lib/errors";
import { ListSpec, parseListQuery, queryList } from "../../lib/list/params";

const NOW = new Date("2015-10-05T21:00:00.000Z");

const spec: ListSpec = {
	orderable: {
		id: '"error"."id"',
		name: '"error"."name"',
		last_modified: '"error"."last_modified"',
		job_type__name: '"job_type"."name"'
	},
	defaultOrder: ["-last_modified"],
	timeColumn: '"error"."last_modified"',
	filters: {
		name: { column: '"error"."name"', type: "string" },
		job_type_id: { column: '"error"."job_type_id"', type: "integer" },
		is_builtin: { column: '"error"."is_builtin"', type: "boolean" },
		category: {
			column: '"error"."category"',
			type: "enum",
			values: ["SYSTEM", "ALGORITHM", "DATA"]
		}
	}
};

function parse(query: Record<string, unknown>, listSpec: ListSpec = spec) {
	return parseListQuery(query, listSpec, NOW);
}

/** The error thrown, checked to be a 400 naming `field`. */
function errorOf(query: Record<string, unknown>, field: string, listSpec: ListSpec = spec) {
	try {
		parse(query, listSpec);
	} catch (error) {
		expect(error).toBeInstanceOf(BadRequestError);
		const badRequest = error as BadRequestError;
		expect(badRequest.code).toBe(400);
		expect(badRequest.data).toMatchObject({ field });
		expect(badRequest.message.startsWith(`${field}: `)).toBe(true);
		return badRequest;
	}
	throw new Error("expected a BadRequestError");
}

describe("paging", () => {
	it("defaults to the first page of 100", () => {
		expect(parse({})).toMatchObject({ page: 1, pageSize: 100, offset: 0, limit: 100 });
	});

	it("computes the offset from page and page_size", () => {
		expect(parse({ page: "3", page_size: "25" })).toMatchObject({
			page: 3,
			pageSize: 25,
			offset: 50,
			limit: 25
		});
	});

	it.each(["1", "1000"])("accepts page_size %s", size => {
		expect(parse({ page_size: size }).pageSize).toBe(Number(size));
	});

	it("accepts values that are already numbers", () => {
		expect(parse({ page: 2, page_size: 10 })).toMatchObject({
			page: 2,
			pageSize: 10,
			offset: 10
		});
	});

	it("takes a single-element array as the value", () => {
		expect(parse({ page: ["4"] }).page).toBe(4);
	});

	it("treats empty values as absent", () => {
		expect(parse({ page: "", page_size: "" })).toMatchObject({ page: 1, pageSize: 100 });
	});

	it.each(["0", "1001", "abc", "1.5", "-1", "+5", " 5", "1e2", 0, 1001, 1.5, -3])(
		"rejects page_size %j",
		size => {
			expect(errorOf({ page_size: size }, "page_size").message).toBe(
				"page_size: must be an integer from 1 to 1000"
			);
		}
	);

	it.each(["0", "abc", "1.5", "-2", 0, 2.5])("rejects page %j", page => {
		expect(errorOf({ page }, "page").message).toBe("page: must be an integer of at least 1");
	});

	it("rejects a page so far out that its offset is not exact", () => {
		expect(errorOf({ page: "99999999999999999999" }, "page").message).toBe(
			"page: is too large"
		);
	});

	it("rejects a repeated page", () => {
		expect(errorOf({ page: ["1", "2"] }, "page").message).toBe(
			"page: must be given at most once"
		);
	});

	it("rejects a nested object", () => {
		expect(errorOf({ page_size: { x: "1" } }, "page_size").message).toBe(
			"page_size: must be a plain value, not a nested object"
		);
	});
});

describe("order", () => {
	it("uses the default order, then id as tie-breaker", () => {
		expect(parse({}).orderBy).toBe('"error"."last_modified" DESC, "error"."id" DESC');
	});

	it("orders ascending by a given key", () => {
		expect(parse({ order: "name" }).orderBy).toBe('"error"."name" ASC, "error"."id" ASC');
	});

	it("reverses with a - prefix", () => {
		expect(parse({ order: "-name" }).orderBy).toBe('"error"."name" DESC, "error"."id" DESC');
	});

	it("orders by several keys in the given order", () => {
		expect(parse({ order: ["job_type__name", "-last_modified"] }).orderBy).toBe(
			'"job_type"."name" ASC, "error"."last_modified" DESC, "error"."id" ASC'
		);
	});

	it("accepts nested keys", () => {
		expect(parse({ order: "-job_type__name" }).orderBy).toBe(
			'"job_type"."name" DESC, "error"."id" DESC'
		);
	});

	it("adds no tie-breaker when id is already ordered on", () => {
		expect(parse({ order: ["-id", "name"] }).orderBy).toBe(
			'"error"."id" DESC, "error"."name" ASC'
		);
	});

	it("accepts duplicates, keeping the first mention", () => {
		expect(parse({ order: ["name", "-name", "name"] }).orderBy).toBe(
			'"error"."name" ASC, "error"."id" ASC'
		);
	});

	it("adds no tie-breaker when there is no id key", () => {
		const noId = { ...spec, orderable: { name: '"t"."name"' }, defaultOrder: ["name"] };
		expect(parse({}, noId).orderBy).toBe('"t"."name" ASC');
	});

	it("ignores an empty order", () => {
		expect(parse({ order: "" }).orderBy).toBe(
			'"error"."last_modified" DESC, "error"."id" DESC'
		);
	});

	it.each(["foo", "-foo", "constructor", "toString", "name; DROP TABLE error", "-"])(
		"rejects unknown key %j, listing the allowed",
		key => {
			const name = key.startsWith("-") ? key.slice(1) : key;
			expect(errorOf({ order: ["name", key] }, "order").message).toBe(
				`order: unknown field "${name}" (allowed: id, name, last_modified, job_type__name)`
			);
		}
	);
});

describe("started and ended", () => {
	const column = '"error"."last_modified"';

	it("applies no time filter when neither is given", () => {
		expect(parse({})).toMatchObject({ where: "TRUE", bind: [], started: null, ended: null });
	});

	it("filters on a datetime range", () => {
		const parsed = parse({
			started: "2015-10-01T00:00:00Z",
			ended: "2015-10-02T00:00:00+02:00"
		});
		expect(parsed.started).toEqual(new Date("2015-10-01T00:00:00Z"));
		expect(parsed.ended).toEqual(new Date("2015-10-01T22:00:00Z"));
		expect(parsed.where).toBe(`${column} >= $1 AND ${column} <= $2`);
		expect(parsed.bind).toEqual([parsed.started, parsed.ended]);
	});

	it("ends at now when only started is given", () => {
		const parsed = parse({ started: "2015-10-01T00:00:00Z" });
		expect(parsed.ended).toEqual(NOW);
		expect(parsed.where).toBe(`${column} >= $1 AND ${column} <= $2`);
		expect(parsed.bind).toEqual([new Date("2015-10-01T00:00:00Z"), NOW]);
	});

	it("filters only on the end when only ended is given", () => {
		const parsed = parse({ ended: "2015-10-01T00:00:00Z" });
		expect(parsed.started).toBeNull();
		expect(parsed.where).toBe(`${column} <= $1`);
		expect(parsed.bind).toEqual([new Date("2015-10-01T00:00:00Z")]);
	});

	it("reads durations as that long before now", () => {
		const parsed = parse({ started: "PT3H0M0S", ended: "PT1H" });
		expect(parsed.started).toEqual(new Date("2015-10-05T18:00:00Z"));
		expect(parsed.ended).toEqual(new Date("2015-10-05T20:00:00Z"));
	});

	it.each([
		["P1D", "2015-10-04T21:00:00Z"],
		["P1W", "2015-09-28T21:00:00Z"],
		["PT0S", "2015-10-05T21:00:00Z"]
	])("reads started=%s", (duration, expected) => {
		expect(parse({ started: duration }).started).toEqual(new Date(expected));
	});

	it("uses the current time when none is passed", () => {
		const before = Date.now();
		const parsed = parseListQuery({ started: "PT1H" }, spec);
		expect(parsed.ended!.getTime()).toBeGreaterThanOrEqual(before);
		expect(parsed.ended!.getTime() - parsed.started!.getTime()).toBe(3_600_000);
	});

	it("accepts started equal to ended", () => {
		const at = "2015-10-01T00:00:00Z";
		expect(parse({ started: at, ended: at }).started).toEqual(new Date(at));
	});

	it("rejects started after ended", () => {
		const query = { started: "2015-10-02T00:00:00Z", ended: "2015-10-01T00:00:00Z" };
		expect(errorOf(query, "started").message).toBe("started: must be before ended");
	});

	it("rejects started after the default end of now", () => {
		expect(errorOf({ started: "2016-01-01T00:00:00Z" }, "started").message).toBe(
			"started: must be before ended"
		);
	});

	it("rejects a datetime without timezone", () => {
		expect(errorOf({ started: "2015-01-01T00:00:00" }, "started").message).toBe(
			'started: "2015-01-01T00:00:00" has no timezone; use ISO-8601 with Z or an offset, or a duration such as PT3H'
		);
	});

	it("rejects a date without time", () => {
		expect(errorOf({ ended: "2015-01-01" }, "ended").message).toMatch(
			/^ended: "2015-01-01" has no timezone;/
		);
	});

	it.each(["garbage", "2015-13-01T00:00:00Z", "1443907200"])("rejects ended %j", text => {
		expect(errorOf({ ended: text }, "ended").message).toMatch(
			new RegExp(`^ended: "${text}" is not .*; use ISO-8601`)
		);
	});

	it.each(["P", "PT3", "P3X"])("rejects the malformed duration %j", text => {
		expect(errorOf({ started: text }, "started").message).toMatch(
			`started: "${text}" is not an ISO-8601 duration`
		);
	});

	it("rejects a duration longer than any date range", () => {
		expect(errorOf({ started: "P27000000Y" }, "started").message).toMatch(
			/^started: "P27000000Y" is too long a duration;/
		);
	});

	it("rejects a duration reaching before the earliest date", () => {
		const longAgo = new Date(-1e14);
		expect(() => parseListQuery({ started: "P273000Y" }, spec, longAgo)).toThrow(
			'started: "P273000Y" reaches back before any representable date'
		);
	});

	it("rejects a repeated started", () => {
		const query = { started: ["2015-10-01T00:00:00Z", "2015-10-02T00:00:00Z"] };
		expect(errorOf(query, "started").message).toBe("started: must be given at most once");
	});

	it("is ignored by endpoints without a time column", () => {
		const timeless = { ...spec, timeColumn: null };
		const parsed = parse({ started: "garbage", ended: "PT1H" }, timeless);
		expect(parsed).toMatchObject({ where: "TRUE", bind: [], started: null, ended: null });
	});
});

describe("filters", () => {
	it("matches any of a string filter's values", () => {
		const parsed = parse({ name: ["a", "b"] });
		expect(parsed.where).toBe('"error"."name" = ANY($1::text[])');
		expect(parsed.bind).toEqual([["a", "b"]]);
	});

	it("tests a single value by equality, so an index gives the page in order", () => {
		expect(parse({ name: "a" })).toMatchObject({ where: '"error"."name" = $1', bind: ["a"] });
	});

	describe("with a lookup", () => {
		const byType = {
			...spec,
			filters: {
				job_type_name: {
					column: '"error"."job_type_id"',
					type: "string" as const,
					lookup: "SELECT id FROM job_type WHERE name = ANY($1::text[])"
				}
			}
		};
		const parseLooked = (query: Record<string, unknown>, looked: Record<string, unknown[]>) =>
			parseListQuery(query, byType, NOW, looked);

		it("tests the list's own column with the ids the lookup answered", () => {
			expect(parseLooked({ job_type_name: "a" }, { job_type_name: [7] })).toMatchObject({
				where: '"error"."job_type_id" = $1',
				bind: [7]
			});
			expect(
				parseLooked({ job_type_name: ["a", "b"] }, { job_type_name: [7, 9] })
			).toMatchObject({ where: '"error"."job_type_id" = ANY($1::int[])', bind: [[7, 9]] });
		});

		it("matches nothing when the lookup found nothing", () => {
			expect(parseLooked({ job_type_name: "none" }, { job_type_name: [] })).toMatchObject({
				where: "FALSE",
				bind: []
			});
		});

		it("is not needed when the filter is not given", () => {
			expect(parseLooked({}, {}).where).toBe("TRUE");
		});

		it("must have run when the filter is given", () => {
			expect(() => parseLooked({ job_type_name: "a" }, {})).toThrow(/lookup/);
		});
	});

	it("binds user text rather than putting it in SQL", () => {
		const parsed = parse({ name: "x'); DROP TABLE error; --" });
		expect(parsed.where).toBe('"error"."name" = $1');
		expect(parsed.bind).toEqual(["x'); DROP TABLE error; --"]);
	});

	it("ignores empty values", () => {
		expect(parse({ name: "", job_type_id: ["", "3"] })).toMatchObject({
			where: '"error"."job_type_id" = $1',
			bind: [3]
		});
	});

	it("parses integer filters", () => {
		const parsed = parse({ job_type_id: ["1", "-2", 3, "2147483647"] });
		expect(parsed.where).toBe('"error"."job_type_id" = ANY($1::int[])');
		expect(parsed.bind).toEqual([[1, -2, 3, 2147483647]]);
	});

	it.each(["abc", "1.5", "1e3", "0x10", "2147483648", "-2147483649", " 1"])(
		"rejects the integer %j",
		value => {
			expect(errorOf({ job_type_id: ["1", value] }, "job_type_id").message).toBe(
				`job_type_id: "${value}" is not an integer`
			);
		}
	);

	it.each([
		["true", true],
		["True", true],
		["1", true],
		["false", false],
		["False", false],
		["0", false]
	])("parses the boolean %s", (value, expected) => {
		const parsed = parse({ is_builtin: value });
		expect(parsed.where).toBe('"error"."is_builtin" = $1');
		expect(parsed.bind).toEqual([expected]);
	});

	it.each(["yes", "TRUE", "t", "constructor", "2"])("rejects the boolean %j", value => {
		expect(errorOf({ is_builtin: value }, "is_builtin").message).toBe(
			`is_builtin: "${value}" is not a boolean (use true or false)`
		);
	});

	it("parses enum filters", () => {
		const parsed = parse({ category: ["SYSTEM", "DATA"] });
		expect(parsed.where).toBe('"error"."category" = ANY($1::text[])');
		expect(parsed.bind).toEqual([["SYSTEM", "DATA"]]);
	});

	it("rejects enum values not allowed, listing the allowed", () => {
		expect(errorOf({ category: ["SYSTEM", "system"] }, "category").message).toBe(
			'category: unknown value "system" (allowed: SYSTEM, ALGORITHM, DATA)'
		);
	});

	it("rejects NUL in string filters", () => {
		expect(errorOf({ name: "a\0b" }, "name").message).toBe("name: must not contain NUL");
	});

	it("numbers placeholders across time range and filters", () => {
		const parsed = parse({
			started: "2015-10-01T00:00:00Z",
			category: "DATA",
			name: "x",
			is_builtin: "false",
			job_type_id: "7"
		});
		expect(parsed.where).toBe(
			[
				'"error"."last_modified" >= $1',
				'"error"."last_modified" <= $2',
				'"error"."name" = $3',
				'"error"."job_type_id" = $4',
				'"error"."is_builtin" = $5',
				'"error"."category" = $6'
			].join(" AND ")
		);
		expect(parsed.bind).toEqual([new Date("2015-10-01T00:00:00Z"), NOW, "x", 7, false, "DATA"]);
	});

	it("reads a parameter repeated more than 20 times, which qs gives as an object", () => {
		const ids = Array.from({ length: 25 }, (_, i) => String(i + 1));
		const asObject = Object.fromEntries(ids.map((id, i) => [String(i), id]));
		expect(parse({ job_type_id: asObject }).bind).toEqual([ids.map(Number)]);
	});
});

describe("unknown parameters", () => {
	it("are ignored", () => {
		const parsed = parse({
			url: "/api/errors/",
			page_number: "7",
			foo: ["x", "y"],
			bar: { a: "b" }
		});
		expect(parsed).toMatchObject({ page: 1, pageSize: 100, where: "TRUE", bind: [] });
	});
});

describe("queryList", () => {
	it("lists absent, single, array and index-object values", () => {
		expect(queryList(undefined)).toEqual([]);
		expect(queryList(null)).toEqual([]);
		expect(queryList("a")).toEqual(["a"]);
		expect(queryList(["a", "b"])).toEqual(["a", "b"]);
		expect(queryList({ 10: "c", 2: "b", 0: "a" })).toEqual(["a", "b", "c"]);
	});

	it("keeps other objects whole", () => {
		expect(queryList({ x: "1" })).toEqual([{ x: "1" }]);
		expect(queryList({})).toEqual([{}]);
	});
});
