import { FieldError } from "../../../lib/errors";
import { errorNamesIn, mapExitCode, parseErrorMapping } from "../../../lib/documents/error-mapping";

function fieldErrorOf(fn: () => unknown): { field: string; message: string } {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(FieldError);
		const e = error as FieldError;
		expect(e.code).toBe(400);
		const field = (e.data as { field: string }).field;
		expect(e.message.startsWith(`${field}: `)).toBe(true);
		return { field, message: e.message.slice(field.length + 2) };
	}
	throw new Error("expected a FieldError");
}

const KNOWN = new Set(["unknown", "algorithm-unknown", "bad-input", "out-of-memory"]);

describe("parseErrorMapping", () => {
	it("reads Scale's docs example", () => {
		expect(
			parseErrorMapping({ version: "1.0", exit_codes: { "1": "unknown" } }, KNOWN)
		).toEqual({
			version: "1.0",
			exit_codes: { "1": "unknown" }
		});
	});

	it.each([undefined, null])("answers the empty mapping for %p", doc => {
		expect(parseErrorMapping(doc, KNOWN)).toEqual({ version: "1.0", exit_codes: {} });
	});

	it("fills version and exit_codes", () => {
		expect(parseErrorMapping({}, KNOWN)).toEqual({ version: "1.0", exit_codes: {} });
		expect(parseErrorMapping({ exit_codes: { "2": "bad-input" } }, KNOWN)).toEqual({
			version: "1.0",
			exit_codes: { "2": "bad-input" }
		});
	});

	it("accepts negative, zero, large and repeated-name mappings", () => {
		const doc = {
			exit_codes: {
				"-1": "unknown",
				"0": "unknown",
				"137": "out-of-memory",
				"255": "bad-input",
				"1": "bad-input"
			}
		};
		const mapping = parseErrorMapping(doc, KNOWN);
		expect(mapping.exit_codes).toEqual(doc.exit_codes);
		expect(mapping.exit_codes).not.toBe(doc.exit_codes);
	});

	it.each([
		[[], "error_mapping", "must be object"],
		["1:unknown", "error_mapping", "must be object"],
		[{ version: 1 }, "error_mapping.version", "must be string"],
		[{ exit_codes: [] }, "error_mapping.exit_codes", "must be object"],
		[{ exit_codes: null }, "error_mapping.exit_codes", "must be object"],
		[{ exit_code: {} }, "error_mapping.exit_code", "is not allowed"]
	])("refuses the shape of %j", (doc, field, message) => {
		expect(fieldErrorOf(() => parseErrorMapping(doc, KNOWN))).toEqual({ field, message });
	});

	it.each(["1.1", "2.0", ""])("refuses version %j", version => {
		expect(fieldErrorOf(() => parseErrorMapping({ version }, KNOWN))).toEqual({
			field: "error_mapping.version",
			message: `"${version}" is an unsupported version (supported: 1.0)`
		});
	});

	it.each(["a", "1.5", "01", "+1", "-0", " 1", "1 ", "", "1e3", "0x10", "99999999999999999999"])(
		"refuses the exit code key %j",
		code => {
			expect(
				fieldErrorOf(() => parseErrorMapping({ exit_codes: { [code]: "unknown" } }, KNOWN))
			).toEqual({
				field: `error_mapping.exit_codes.${code}`,
				message: `"${code}" is not an exit code: keys must be integers`
			});
		}
	);

	it("refuses an unknown error name at its exit code", () => {
		expect(
			fieldErrorOf(() =>
				parseErrorMapping({ exit_codes: { "1": "unknown", "3": "no-such-error" } }, KNOWN)
			)
		).toEqual({
			field: "error_mapping.exit_codes.3",
			message: '"no-such-error" is not the name of a registered error'
		});
		expect(
			fieldErrorOf(() => parseErrorMapping({ exit_codes: { "-1": "Unknown" } }, KNOWN)).field
		).toBe("error_mapping.exit_codes.-1");
	});

	it.each([5, null, ["unknown"], { name: "unknown" }])("refuses the error name %j", name => {
		expect(fieldErrorOf(() => parseErrorMapping({ exit_codes: { "1": name } }, KNOWN))).toEqual(
			{
				field: "error_mapping.exit_codes.1",
				message: "must be an error name (a string)"
			}
		);
	});

	it("names fields under the given prefix", () => {
		expect(
			fieldErrorOf(() =>
				parseErrorMapping({ exit_codes: { "1": "x" } }, KNOWN, "job_type.error_mapping")
			).field
		).toBe("job_type.error_mapping.exit_codes.1");
	});

	it("refuses everything when no error is known", () => {
		expect(
			fieldErrorOf(() => parseErrorMapping({ exit_codes: { "1": "unknown" } }, new Set()))
				.field
		).toBe("error_mapping.exit_codes.1");
	});
});

describe("errorNamesIn", () => {
	it("answers the distinct names", () => {
		const mapping = parseErrorMapping(
			{ exit_codes: { "1": "bad-input", "2": "unknown", "3": "bad-input" } },
			KNOWN
		);
		expect(errorNamesIn(mapping)).toEqual(["bad-input", "unknown"]);
		expect(errorNamesIn(parseErrorMapping(null, KNOWN))).toEqual([]);
	});
});

describe("mapExitCode", () => {
	const mapping = parseErrorMapping(
		{ exit_codes: { "0": "unknown", "1": "bad-input", "-9": "out-of-memory" } },
		KNOWN
	);

	it("maps a mapped code", () => {
		expect(mapExitCode(mapping, 1)).toBe("bad-input");
		expect(mapExitCode(mapping, -9)).toBe("out-of-memory");
	});

	it("answers null for success, unmapped codes and non-integers", () => {
		expect(mapExitCode(mapping, 0)).toBeNull();
		expect(mapExitCode(mapping, 2)).toBeNull();
		expect(mapExitCode(mapping, 1.5)).toBeNull();
		expect(mapExitCode(mapping, NaN)).toBeNull();
		expect(mapExitCode(parseErrorMapping(undefined, KNOWN), 1)).toBeNull();
	});

	it("does not map inherited keys", () => {
		const odd = { version: "1.0" as const, exit_codes: Object.create({ "5": "unknown" }) };
		expect(mapExitCode(odd, 5)).toBeNull();
	});
});
