import {
	compileChecker,
	formatProblems,
	pointerToPath,
	QUERY_SCHEMA,
	type FieldProblem
} from "../../lib/validation/schema";

/** The problems of a failed check (failing the test if the value passed). */
function problems(check: (value: unknown) => true | FieldProblem[], value: unknown) {
	const result = check(value);
	if (result === true) throw new Error(`expected ${JSON.stringify(value)} to fail`);
	return result;
}

const jobTypeSchema = {
	type: "object",
	required: ["name", "interface"],
	additionalProperties: false,
	properties: {
		name: { type: "string", maxLength: 5 },
		priority: { type: "integer" },
		is_paused: { type: "boolean" },
		category: { enum: ["A", "B"] },
		interface: {
			type: "object",
			required: ["command"],
			additionalProperties: false,
			properties: {
				command: { type: "string" },
				input_data: {
					type: "array",
					items: {
						type: "object",
						required: ["name"],
						properties: {
							name: { type: "string", pattern: "^[a-z]+$" },
							type: { enum: ["file", "property"] }
						}
					}
				}
			}
		}
	}
};

describe("pointerToPath", () => {
	it.each([
		["", ""],
		["/name", "name"],
		["/interface/input_data/1/name", "interface.input_data[1].name"],
		["/0", "[0]"],
		["/a/0/1/b", "a[0][1].b"],
		["/a~1b/c~0d", "a/b.c~d"],
		["/a~01", "a~1"]
	])("turns %j into %j", (pointer, expected) => {
		expect(pointerToPath(pointer)).toBe(expected);
	});
});

describe("compileChecker on a body schema", () => {
	const check = compileChecker(jobTypeSchema);

	it("passes a valid value", () => {
		expect(
			check({
				name: "abc",
				priority: 3,
				is_paused: false,
				category: "A",
				interface: { command: "run", input_data: [{ name: "x", type: "file" }] }
			})
		).toBe(true);
	});

	it.each([
		["a string for an integer", { priority: "5" }, "priority", "type"],
		["a float for an integer", { priority: 5.5 }, "priority", "type"],
		["a string for a boolean", { is_paused: "true" }, "is_paused", "type"],
		["a number for a boolean", { is_paused: 1 }, "is_paused", "type"],
		["a number for a string", { name: 5 }, "name", "type"],
		["an array for a string", { name: ["abc"] }, "name", "type"],
		["null for an integer", { priority: null }, "priority", "type"]
	])("does not coerce %s", (_, extra, field, type) => {
		const value = { name: "abc", interface: { command: "run" }, ...extra };
		const snapshot = JSON.parse(JSON.stringify(value));
		const [problem] = problems(check, value);
		expect(problem).toMatchObject({ type, field });
		expect(problem.message).toMatch(/^must be /);
		expect(value).toEqual(snapshot); // left as it was
	});

	it("names a nested array item's field as interface.input_data[1].name", () => {
		const result = problems(check, {
			name: "abc",
			interface: { command: "run", input_data: [{ name: "ok" }, { name: 7 }] }
		});
		expect(result).toEqual([
			{ type: "type", field: "interface.input_data[1].name", message: "must be string" }
		]);
		const pattern = problems(check, {
			name: "abc",
			interface: { command: "run", input_data: [{ name: "ok" }, { name: "BAD" }] }
		});
		expect(pattern[0]).toMatchObject({
			type: "pattern",
			field: "interface.input_data[1].name"
		});
		expect(pattern[0].message).toContain("^[a-z]+$");
	});

	it("says a missing property is required, under its full path", () => {
		expect(problems(check, { interface: { command: "x" } })).toEqual([
			{ type: "required", field: "name", message: "is required" }
		]);
		expect(problems(check, { name: "abc", interface: {} })).toEqual([
			{ type: "required", field: "interface.command", message: "is required" }
		]);
		expect(
			problems(check, { name: "abc", interface: { command: "x", input_data: [{}, {}] } })
		).toEqual([
			{ type: "required", field: "interface.input_data[0].name", message: "is required" }
		]);
	});

	it("says an additional property is not allowed, under its full path", () => {
		expect(problems(check, { name: "abc", interface: { command: "x" }, extra: 1 })).toEqual([
			{ type: "additionalProperties", field: "extra", message: "is not allowed" }
		]);
		expect(problems(check, { name: "abc", interface: { command: "x", extra: 1 } })).toEqual([
			{ type: "additionalProperties", field: "interface.extra", message: "is not allowed" }
		]);
	});

	it("lists the allowed values of an enum", () => {
		expect(
			problems(check, { name: "abc", interface: { command: "x" }, category: "C" })
		).toEqual([{ type: "enum", field: "category", message: "must be one of A, B" }]);
		const nested = problems(check, {
			name: "abc",
			interface: { command: "x", input_data: [{ name: "a", type: "other" }] }
		});
		expect(nested).toEqual([
			{
				type: "enum",
				field: "interface.input_data[0].type",
				message: "must be one of file, property"
			}
		]);
	});

	it("reports limits with ajv's message", () => {
		const [problem] = problems(check, { name: "abcdef", interface: { command: "x" } });
		expect(problem).toEqual({
			type: "maxLength",
			field: "name",
			message: "must NOT have more than 5 characters"
		});
	});

	it("calls the whole value `body` when it is not an object", () => {
		for (const value of [[], "x", 5, null]) {
			expect(problems(check, value)).toEqual([
				{ type: "type", field: "body", message: "must be object" }
			]);
		}
	});

	it("reports one problem at a time", () => {
		expect(problems(check, { priority: "x", extra: true })).toHaveLength(1);
	});

	it("fills in defaults", () => {
		const withDefault = compileChecker({
			type: "object",
			properties: { page: { type: "integer", default: 1 } }
		});
		const value: Record<string, unknown> = {};
		expect(withDefault(value)).toBe(true);
		expect(value).toEqual({ page: 1 });
	});

	it("allows union types such as string or null", () => {
		const nullable = compileChecker({
			type: "object",
			properties: { title: { type: ["string", "null"] } }
		});
		expect(nullable({ title: null })).toBe(true);
		expect(nullable({ title: "x" })).toBe(true);
		expect(problems(nullable, { title: 5 })[0]).toMatchObject({ field: "title", type: "type" });
	});

	it("checks formats (ajv-formats)", () => {
		const withFormat = compileChecker({
			type: "object",
			properties: { when: { type: "string", format: "date-time" } }
		});
		expect(withFormat({ when: "2015-03-11T00:00:00Z" })).toBe(true);
		expect(problems(withFormat, { when: "yesterday" })[0]).toMatchObject({
			type: "format",
			field: "when"
		});
	});

	it("refuses a schema with an unknown keyword (strict mode)", () => {
		expect(() => compileChecker({ type: "object", requird: ["x"] })).toThrow(/unknown keyword/);
	});
});

describe("compileChecker on a query schema", () => {
	const check = compileChecker({
		[QUERY_SCHEMA]: true,
		type: "object",
		properties: {
			page: { type: "integer", minimum: 1 },
			is_active: { type: "boolean" },
			name: { type: "array", items: { type: "string" } },
			started: { type: "string" }
		}
	});

	it("coerces query strings to the schema's types, in place", () => {
		const query: Record<string, unknown> = {
			page: "5",
			is_active: "true",
			name: "one",
			started: "PT1H"
		};
		expect(check(query)).toBe(true);
		expect(query).toEqual({ page: 5, is_active: true, name: ["one"], started: "PT1H" });
	});

	it("keeps repeated values as an array", () => {
		const query: Record<string, unknown> = { name: ["a", "b"] };
		expect(check(query)).toBe(true);
		expect(query.name).toEqual(["a", "b"]);
	});

	it("still refuses what cannot be coerced, naming the field", () => {
		expect(problems(check, { page: "abc" })).toEqual([
			{ type: "type", field: "page", message: "must be integer" }
		]);
		expect(problems(check, { page: "0" })).toEqual([
			{ type: "minimum", field: "page", message: "must be >= 1" }
		]);
		expect(problems(check, { page: "1.5" })[0]).toMatchObject({ field: "page" });
		expect(problems(check, { is_active: "maybe" })[0]).toMatchObject({ field: "is_active" });
		expect(problems(check, { started: ["a", "b"] })[0]).toMatchObject({ field: "started" });
	});

	it("does not change the body checker: the marker is per schema", () => {
		const body = compileChecker({ type: "object", properties: { page: { type: "integer" } } });
		expect(problems(body, { page: "5" })[0]).toMatchObject({ field: "page", type: "type" });
	});
});

describe("formatProblems", () => {
	it("joins `field: message` sentences", () => {
		expect(
			formatProblems([
				{ type: "required", field: "name", message: "is required" },
				{ type: "type", field: "interface.input_data[1].name", message: "must be string" }
			])
		).toBe("name: is required; interface.input_data[1].name: must be string");
		expect(formatProblems([])).toBe("");
	});
});
