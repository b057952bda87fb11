import { FieldError } from "../../../lib/errors";
import { buildJobResults, parseJobResults } from "../../../lib/documents/results";

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

/** Scale's docs/rest/job.rst job details sample. */
const SCALE_SAMPLE = { output_data: [{ name: "output_file", file_id: 8484 }], version: "1.0" };

describe("parseJobResults", () => {
	it("reads Scale's REST sample", () => {
		expect(parseJobResults(SCALE_SAMPLE)).toEqual({
			version: "1.0",
			output_data: [{ name: "output_file", file_id: 8484 }]
		});
	});

	it("reads file_ids, fills version and output_data", () => {
		expect(parseJobResults({ output_data: [{ name: "frames", file_ids: [3, 4] }] })).toEqual({
			version: "1.0",
			output_data: [{ name: "frames", file_ids: [3, 4] }]
		});
		expect(parseJobResults({})).toEqual({ version: "1.0", output_data: [] });
	});

	it("reads a 1.1 document as the same shape, normalised to 1.0", () => {
		expect(parseJobResults({ ...SCALE_SAMPLE, version: "1.1" })).toEqual(
			parseJobResults(SCALE_SAMPLE)
		);
	});

	it.each(["1.2", "2.0", ""])("refuses version %j", version => {
		expect(fieldErrorOf(() => parseJobResults({ ...SCALE_SAMPLE, version }))).toEqual({
			field: "results.version",
			message: `"${version}" is an unsupported version (supported: 1.0, 1.1)`
		});
	});

	it.each([
		[null, "results", "must be object"],
		[{ version: 1 }, "results.version", "must be string"],
		[{ output_data: {} }, "results.output_data", "must be array"],
		[{ outputs: [] }, "results.outputs", "is not allowed"],
		[{ output_data: [{ file_id: 1 }] }, "results.output_data[0].name", "is required"],
		[
			{ output_data: [{ name: "", file_id: 1 }] },
			"results.output_data[0].name",
			"must NOT have fewer than 1 characters"
		],
		[
			{ output_data: [{ name: "a", file_id: "1" }] },
			"results.output_data[0].file_id",
			"must be integer"
		],
		[
			{ output_data: [{ name: "a", file_id: 0 }] },
			"results.output_data[0].file_id",
			"must be >= 1"
		],
		[
			{ output_data: [{ name: "a", file_ids: [] }] },
			"results.output_data[0].file_ids",
			"must NOT have fewer than 1 items"
		],
		[
			{ output_data: [{ name: "a", file_ids: [1.5] }] },
			"results.output_data[0].file_ids[0]",
			"must be integer"
		],
		[
			{ output_data: [{ name: "a", workspace_id: 1 }] },
			"results.output_data[0].workspace_id",
			"is not allowed"
		],
		[
			{ output_data: [{ name: "a" }] },
			"results.output_data[0]",
			"must have file_id or file_ids"
		],
		[
			{ output_data: [{ name: "a", file_id: 1, file_ids: [2] }] },
			"results.output_data[0].file_ids",
			"is not allowed together with file_id"
		],
		[
			{
				output_data: [
					{ name: "a", file_id: 1 },
					{ name: "a", file_ids: [2] }
				]
			},
			"results.output_data[1].name",
			'"a" is given more than once'
		]
	])("refuses %j", (doc, field, message) => {
		expect(fieldErrorOf(() => parseJobResults(doc))).toEqual({ field, message });
	});

	it("names fields under the given prefix", () => {
		expect(fieldErrorOf(() => parseJobResults({ version: "9" }, "job.results")).field).toBe(
			"job.results.version"
		);
	});
});

describe("buildJobResults", () => {
	it("builds file_id for file outputs and file_ids for files outputs", () => {
		const results = buildJobResults([
			{ name: "output_file", fileIds: [8484], multiple: false },
			{ name: "frames", fileIds: [1, 2, 3], multiple: true },
			{ name: "one frame", fileIds: [4], multiple: true }
		]);
		expect(results).toEqual({
			version: "1.0",
			output_data: [
				{ name: "output_file", file_id: 8484 },
				{ name: "frames", file_ids: [1, 2, 3] },
				{ name: "one frame", file_ids: [4] }
			]
		});
		expect(parseJobResults(results)).toEqual(results);
	});

	it("leaves out outputs without products", () => {
		expect(
			buildJobResults([
				{ name: "absent", fileIds: [], multiple: false },
				{ name: "none", fileIds: [], multiple: true }
			])
		).toEqual({ version: "1.0", output_data: [] });
	});

	it("throws on a file output with several products or a name given twice", () => {
		expect(() => buildJobResults([{ name: "f", fileIds: [1, 2], multiple: false }])).toThrow(
			'file output "f" has 2 files'
		);
		expect(() =>
			buildJobResults([
				{ name: "f", fileIds: [1], multiple: false },
				{ name: "f", fileIds: [2], multiple: false }
			])
		).toThrow('output "f" given twice');
	});

	it("does not share the given arrays", () => {
		const ids = [1, 2];
		const results = buildJobResults([{ name: "f", fileIds: ids, multiple: true }]);
		ids.push(3);
		expect(results.output_data[0]).toEqual({ name: "f", file_ids: [1, 2] });
	});
});
