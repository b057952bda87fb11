import { FieldError } from "../../../lib/errors";
import { parseJobInterface } from "../../../lib/documents/job-interface";
import {
	entryFileIds,
	fileIdsIn,
	parseJobData,
	workspaceIdsIn
} from "../../../lib/documents/job-data";

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

/** Scale's make_geotiff interface and job data (docs/architecture/jobs). */
const GEOTIFF = parseJobInterface({
	version: "1.0",
	command: "python make_geotiff.py",
	command_arguments: "${image} ${georeference_data} ${job_output_dir}",
	input_data: [
		{ name: "image", type: "file", media_types: ["image/png"] },
		{ name: "georeference_data", type: "file", media_types: ["text/csv"] }
	],
	output_data: [{ name: "geo_image", type: "file", media_type: "image/tiff" }]
});
const GEOTIFF_DATA = {
	version: "1.0",
	input_data: [
		{ name: "image", file_id: 1234 },
		{ name: "georeference_data", file_id: 1235 }
	],
	output_data: [{ name: "geo_image", workspace_id: 12 }]
};

/** Every input type, required and optional, and two outputs. */
const MIXED = parseJobInterface({
	command: "run",
	command_arguments: "${level} ${scene} ${frames}",
	input_data: [
		{ name: "level", type: "property" },
		{ name: "scene", type: "file" },
		{ name: "frames", type: "files" },
		{ name: "note", type: "property", required: false },
		{ name: "extra", type: "file", required: false }
	],
	output_data: [
		{ name: "out", type: "file" },
		{ name: "maybe", type: "files", required: false }
	]
});
const MIXED_DATA = {
	input_data: [
		{ name: "level", value: "3" },
		{ name: "scene", file_id: 7 },
		{ name: "frames", file_ids: [8, 9, 7] }
	],
	output_data: [
		{ name: "out", workspace_id: 2 },
		{ name: "maybe", workspace_id: 2 }
	]
};

function mixed(change: (doc: typeof MIXED_DATA & Record<string, any>) => void) {
	const doc = structuredClone(MIXED_DATA) as typeof MIXED_DATA & Record<string, any>;
	change(doc);
	return doc;
}

describe("parseJobData: valid documents", () => {
	it("reads Scale's make_geotiff job data", () => {
		expect(parseJobData(GEOTIFF_DATA, GEOTIFF)).toEqual(GEOTIFF_DATA);
	});

	it("fills version and keeps every input type", () => {
		expect(parseJobData(MIXED_DATA, MIXED)).toEqual({ version: "1.0", ...MIXED_DATA });
	});

	it("takes optional inputs when given", () => {
		const doc = mixed(d =>
			d.input_data.push(
				{ name: "note", value: "" } as any,
				{ name: "extra", file_id: 10 } as any
			)
		);
		expect(parseJobData(doc, MIXED).input_data.slice(3)).toEqual([
			{ name: "note", value: "" },
			{ name: "extra", file_id: 10 }
		]);
	});

	it("turns file_id on a files input into file_ids, as Scale does", () => {
		const doc = mixed(d => (d.input_data[2] = { name: "frames", file_id: 8 } as any));
		expect(parseJobData(doc, MIXED).input_data[2]).toEqual({ name: "frames", file_ids: [8] });
	});

	it("defaults input_data and output_data for an interface without required ones", () => {
		const iface = parseJobInterface({
			command: "x",
			command_arguments: "",
			input_data: [{ name: "a", type: "property", required: false }]
		});
		expect(parseJobData({}, iface)).toEqual({
			version: "1.0",
			input_data: [],
			output_data: []
		});
	});

	it("does not change the document it is given", () => {
		const doc = mixed(d => (d.input_data[2] = { name: "frames", file_id: 8 } as any));
		const copy = structuredClone(doc);
		parseJobData(doc, MIXED);
		expect(doc).toEqual(copy);
	});
});

describe("parseJobData: problems", () => {
	it.each([
		[null, "job_data", "must be object"],
		[[], "job_data", "must be object"],
		[{ version: 1 }, "job_data.version", "must be string"],
		[{ input_data: {} }, "job_data.input_data", "must be array"],
		[{ output_data: null }, "job_data.output_data", "must be array"],
		[{ workspace_id: 1 }, "job_data.workspace_id", "is not allowed"]
	])("refuses the shape of %j", (doc, field, message) => {
		expect(fieldErrorOf(() => parseJobData(doc, GEOTIFF))).toEqual({ field, message });
	});

	it.each(["1.1", "2.0"])("refuses version %j", version => {
		expect(fieldErrorOf(() => parseJobData({ ...GEOTIFF_DATA, version }, GEOTIFF))).toEqual({
			field: "job_data.version",
			message: `"${version}" is an unsupported version (supported: 1.0)`
		});
	});

	it.each([
		[(d: any) => delete d.input_data[1].name, "job_data.input_data[1].name", "is required"],
		[(d: any) => (d.input_data[1].name = 5), "job_data.input_data[1].name", "must be string"],
		[(d: any) => (d.input_data[0].value = 3), "job_data.input_data[0].value", "must be string"],
		[
			(d: any) => (d.input_data[1].file_id = "7"),
			"job_data.input_data[1].file_id",
			"must be integer"
		],
		[
			(d: any) => (d.input_data[1].file_id = 7.5),
			"job_data.input_data[1].file_id",
			"must be integer"
		],
		[
			(d: any) => (d.input_data[1].file_id = 0),
			"job_data.input_data[1].file_id",
			"must be >= 1"
		],
		[
			(d: any) => (d.input_data[1].file_id = 2 ** 31),
			"job_data.input_data[1].file_id",
			"must be <= 2147483647"
		],
		[
			(d: any) => (d.input_data[2].file_ids = []),
			"job_data.input_data[2].file_ids",
			"must NOT have fewer than 1 items"
		],
		[
			(d: any) => (d.input_data[2].file_ids = 8),
			"job_data.input_data[2].file_ids",
			"must be array"
		],
		[
			(d: any) => (d.input_data[2].file_ids = [8, "9"]),
			"job_data.input_data[2].file_ids[1]",
			"must be integer"
		],
		[
			(d: any) => (d.input_data[0].workspace_id = 1),
			"job_data.input_data[0].workspace_id",
			"is not allowed"
		],
		[
			(d: any) => delete d.output_data[1].workspace_id,
			"job_data.output_data[1].workspace_id",
			"is required"
		],
		[
			(d: any) => (d.output_data[0].workspace_id = "2"),
			"job_data.output_data[0].workspace_id",
			"must be integer"
		],
		[
			(d: any) => (d.output_data[0].workspace_id = -2),
			"job_data.output_data[0].workspace_id",
			"must be >= 1"
		],
		[(d: any) => delete d.output_data[0].name, "job_data.output_data[0].name", "is required"],
		[
			(d: any) => (d.output_data[0].file_id = 3),
			"job_data.output_data[0].file_id",
			"is not allowed"
		]
	])("refuses a bad entry (%#) at %s", (change, field, message) => {
		expect(fieldErrorOf(() => parseJobData(mixed(change), MIXED))).toEqual({ field, message });
	});

	it("refuses a missing required input of each type", () => {
		for (const [i, name] of ["level", "scene", "frames"].entries()) {
			const doc = mixed(d => d.input_data.splice(i, 1));
			expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
				field: "job_data.input_data",
				message: `the required input "${name}" is not given`
			});
		}
		expect(
			fieldErrorOf(() => parseJobData({ output_data: GEOTIFF_DATA.output_data }, GEOTIFF))
		).toEqual({
			field: "job_data.input_data",
			message: 'the required input "image" is not given'
		});
	});

	it("refuses an input the interface does not have", () => {
		const doc = mixed(d => d.input_data.push({ name: "bogus", value: "x" } as any));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.input_data[3].name",
			message: '"bogus" is not an input of the job interface'
		});
	});

	it("refuses an output name given as an input", () => {
		const doc = mixed(d => d.input_data.push({ name: "out", file_id: 3 } as any));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED)).field).toBe(
			"job_data.input_data[3].name"
		);
	});

	it("refuses an input given twice", () => {
		const doc = mixed(d => d.input_data.push({ name: "scene", file_id: 3 } as any));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.input_data[3].name",
			message: '"scene" is also given at job_data.input_data[1]'
		});
	});

	it("refuses an output given twice", () => {
		const doc = mixed(d => d.output_data.push({ name: "out", workspace_id: 5 }));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.output_data[2].name",
			message: '"out" is also given at job_data.output_data[0]'
		});
	});

	it("refuses an output named like a given input", () => {
		const doc = mixed(d => d.output_data.push({ name: "level", workspace_id: 5 }));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.output_data[2].name",
			message: '"level" is also given at job_data.input_data[0]'
		});
	});

	it.each([
		[
			0,
			{ name: "level" },
			"job_data.input_data[0].value",
			'is required for property input "level"'
		],
		[
			0,
			{ name: "level", file_id: 3 },
			"job_data.input_data[0].file_id",
			'is not allowed on property input "level" (it takes value)'
		],
		[
			0,
			{ name: "level", value: "3", file_ids: [3] },
			"job_data.input_data[0].file_ids",
			'is not allowed on property input "level" (it takes value)'
		],
		[
			1,
			{ name: "scene" },
			"job_data.input_data[1].file_id",
			'is required for file input "scene"'
		],
		[
			1,
			{ name: "scene", file_ids: [7] },
			"job_data.input_data[1].file_ids",
			'is not allowed on file input "scene" (it takes file_id)'
		],
		[
			1,
			{ name: "scene", value: "7" },
			"job_data.input_data[1].value",
			'is not allowed on file input "scene" (it takes file_id)'
		],
		[
			1,
			{ name: "scene", file_id: 7, file_ids: [7] },
			"job_data.input_data[1].file_ids",
			'is not allowed on file input "scene" (it takes file_id)'
		],
		[
			2,
			{ name: "frames" },
			"job_data.input_data[2].file_ids",
			'is required for files input "frames"'
		],
		[
			2,
			{ name: "frames", value: "8" },
			"job_data.input_data[2].value",
			'is not allowed on files input "frames" (it takes file_ids)'
		],
		[
			2,
			{ name: "frames", file_id: 8, file_ids: [9] },
			"job_data.input_data[2].file_id",
			"is not allowed together with file_ids"
		]
	])("refuses entry %j for the input's type", (i, entry, field, message) => {
		const doc = mixed(d => (d.input_data[i as number] = entry as any));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({ field, message });
	});

	it("refuses a missing output, optional ones included (as Scale does)", () => {
		expect(
			fieldErrorOf(() =>
				parseJobData(
					mixed(d => d.output_data.pop()),
					MIXED
				)
			)
		).toEqual({
			field: "job_data.output_data",
			message: 'the output "maybe" has no entry (every output needs a workspace_id)'
		});
		expect(
			fieldErrorOf(() => parseJobData({ input_data: GEOTIFF_DATA.input_data }, GEOTIFF))
		).toEqual({
			field: "job_data.output_data",
			message: 'the output "geo_image" has no entry (every output needs a workspace_id)'
		});
	});

	it("refuses an output the interface does not have", () => {
		const doc = mixed(d => d.output_data.push({ name: "other", workspace_id: 1 }));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.output_data[2].name",
			message: '"other" is not an output of the job interface'
		});
	});

	it("names fields under the given prefix", () => {
		expect(fieldErrorOf(() => parseJobData({ version: "2" }, GEOTIFF, "data")).field).toBe(
			"data.version"
		);
	});

	it("refuses text PostgreSQL cannot store", () => {
		const doc = mixed(d => (d.input_data[0].value = "a\0b"));
		expect(fieldErrorOf(() => parseJobData(doc, MIXED))).toEqual({
			field: "job_data.input_data[0].value",
			message: "must not contain NUL characters"
		});
	});
});

describe("fileIdsIn and workspaceIdsIn", () => {
	it("answer the distinct ids in order", () => {
		const data = parseJobData(MIXED_DATA, MIXED);
		expect(fileIdsIn(data)).toEqual([7, 8, 9]);
		expect(workspaceIdsIn(data)).toEqual([2]);
		const geotiff = parseJobData(GEOTIFF_DATA, GEOTIFF);
		expect(fileIdsIn(geotiff)).toEqual([1234, 1235]);
		expect(workspaceIdsIn(geotiff)).toEqual([12]);
	});

	it("answer [] when there are none", () => {
		const empty = {
			version: "1.0" as const,
			input_data: [{ name: "p", value: "1" }],
			output_data: []
		};
		expect(fileIdsIn(empty)).toEqual([]);
		expect(workspaceIdsIn(empty)).toEqual([]);
		expect(fileIdsIn(null)).toEqual([]);
	});

	it("read one entry's file_id or file_ids, and only integers, from a stored document", () => {
		expect(entryFileIds({ name: "a", file_id: 4 })).toEqual([4]);
		expect(entryFileIds({ name: "a", file_ids: [5, 6] })).toEqual([5, 6]);
		expect(entryFileIds({ name: "a", value: "x" })).toEqual([]);
		expect(entryFileIds({ name: "a", file_ids: [1, "2", 3.5, null, 4] })).toEqual([1, 4]);
		expect(entryFileIds({ name: "a", file_id: "7" })).toEqual([]);
		expect(entryFileIds(null)).toEqual([]);
	});
});
