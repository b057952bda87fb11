import { FieldError } from "../../../lib/errors";
import {
	mergeArtifacts,
	parseArtifactLines,
	parseResultsManifest
} from "../../../lib/documents/results";

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

/** Scale's docs/algorithm_integration/results_manifest.rst examples. */
const ONE_OUTPUT = {
	version: "1.1",
	output_data: [{ name: "output_file", file: { path: "/tmp/job_exe_231/outputs/output.csv" } }]
};
const PARSED_INPUT = {
	version: "1.1",
	parse_results: [
		{
			filename: "myfile.h5",
			data_types: ["H5", "VEG"],
			geo_metadata: {
				data_started: "2015-05-15T10:34:12Z",
				data_ended: "2015-05-15T10:36:12Z"
			}
		}
	]
};
const GEO_JSON = {
	type: "Polygon",
	coordinates: [
		[
			[1, 2, 0],
			[3, 4, 0],
			[5, 6, 0],
			[1, 2, 0]
		]
	]
};

describe("parseResultsManifest 1.1", () => {
	it("reads Scale's one-output example", () => {
		expect(parseResultsManifest(ONE_OUTPUT)).toEqual({
			version: "1.1",
			output_data: [
				{ name: "output_file", file: { path: "/tmp/job_exe_231/outputs/output.csv" } }
			],
			parse_results: [],
			errors: []
		});
	});

	it("reads Scale's parsed-input example", () => {
		expect(parseResultsManifest(PARSED_INPUT)).toEqual({
			version: "1.1",
			output_data: [],
			parse_results: PARSED_INPUT.parse_results,
			errors: []
		});
	});

	it("reads the job execution REST sample and an empty document", () => {
		const sample = { output_data: [], version: "1.1", errors: [], parse_results: [] };
		expect(parseResultsManifest(sample)).toEqual(sample);
		expect(parseResultsManifest({})).toEqual(sample);
	});

	it("reads every field", () => {
		const doc = {
			version: "1.1",
			output_data: [
				{
					name: "image",
					file: {
						path: "/out/a.tif",
						geo_metadata: {
							data_started: "2015-05-15T10:34:12.5+02:00",
							data_ended: "2015-05-15T10:36:12Z",
							geo_json: GEO_JSON
						}
					}
				},
				{
					name: "frames",
					files: [{ path: "/out/1.png" }, { path: "/out/2.png", geo_metadata: {} }]
				},
				{ name: "none", files: [] }
			],
			parse_results: [
				{
					filename: "a.h5",
					new_workspace_path: "2015/05/15",
					data_types: [],
					geo_metadata: { geo_json: GEO_JSON },
					gis_data_path: "/out/a.geojson"
				},
				{ filename: "b.h5" }
			],
			info: [{ anything: 1 }],
			errors: ["e"]
		};
		expect(parseResultsManifest(doc)).toEqual(doc);
	});

	it("ignores unknown fields inside entries (Scale's schema allows them)", () => {
		const doc = {
			output_data: [{ name: "o", file: { path: "/p", size: 3 }, media_type: "x" }],
			parse_results: [{ filename: "f", data_started: "not checked", other: 1 }]
		};
		expect(parseResultsManifest(doc)).toEqual({
			version: "1.1",
			output_data: [{ name: "o", file: { path: "/p" } }],
			parse_results: [{ filename: "f" }],
			errors: []
		});
	});

	it("does not change the document it is given", () => {
		const doc = structuredClone(PARSED_INPUT);
		parseResultsManifest(doc);
		expect(doc).toEqual(PARSED_INPUT);
	});

	it.each([
		[null, "results_manifest", "must be object"],
		[[], "results_manifest", "must be object"],
		[{ version: 1.1 }, "results_manifest.version", "must be string"],
		[{ files: [], output_data: [] }, "results_manifest.files", "is not allowed"],
		[{ version: "1.1", files: [] }, "results_manifest.files", "is not allowed"],
		[{ output_data: {} }, "results_manifest.output_data", "must be array"],
		[
			{ output_data: [{ file: { path: "/p" } }] },
			"results_manifest.output_data[0].name",
			"is required"
		],
		[
			{ output_data: [{ name: "", file: { path: "/p" } }] },
			"results_manifest.output_data[0].name",
			"must NOT have fewer than 1 characters"
		],
		[
			{ output_data: [{ name: "o", file: {} }] },
			"results_manifest.output_data[0].file.path",
			"is required"
		],
		[
			{ output_data: [{ name: "o", file: { path: 3 } }] },
			"results_manifest.output_data[0].file.path",
			"must be string"
		],
		[
			{ output_data: [{ name: "o", file: "/p" }] },
			"results_manifest.output_data[0].file",
			"must be object"
		],
		[
			{ output_data: [{ name: "o", files: { path: "/p" } }] },
			"results_manifest.output_data[0].files",
			"must be array"
		],
		[
			{ output_data: [{ name: "o", files: [{ path: "" }] }] },
			"results_manifest.output_data[0].files[0].path",
			"must NOT have fewer than 1 characters"
		],
		[
			{ output_data: [{ name: "o", file: { path: "/p", geo_metadata: [] } }] },
			"results_manifest.output_data[0].file.geo_metadata",
			"must be object"
		],
		[
			{ output_data: [{ name: "o", file: { path: "/p", geo_metadata: { geo_json: "x" } } }] },
			"results_manifest.output_data[0].file.geo_metadata.geo_json",
			"must be object"
		],
		[
			{
				output_data: [
					{ name: "o", files: [{ path: "/p", geo_metadata: { data_ended: 5 } }] }
				]
			},
			"results_manifest.output_data[0].files[0].geo_metadata.data_ended",
			"must be string"
		],
		[
			{ output_data: [{ name: "o" }] },
			"results_manifest.output_data[0]",
			"must have either file or files"
		],
		[
			{ output_data: [{ name: "o", file: { path: "/a" }, files: [] }] },
			"results_manifest.output_data[0]",
			"must have file or files, not both"
		],
		[
			{
				output_data: [
					{ name: "o", file: { path: "/a" } },
					{ name: "o", files: [] }
				]
			},
			"results_manifest.output_data[1].name",
			'"o" is already registered at output_data[0]'
		],
		[{ parse_results: {} }, "results_manifest.parse_results", "must be array"],
		[{ parse_results: [{}] }, "results_manifest.parse_results[0].filename", "is required"],
		[
			{ parse_results: [{ filename: "f", data_types: "H5" }] },
			"results_manifest.parse_results[0].data_types",
			"must be array"
		],
		[
			{ parse_results: [{ filename: "f", data_types: [5] }] },
			"results_manifest.parse_results[0].data_types[0]",
			"must be string"
		],
		[
			{ parse_results: [{ filename: "f", new_workspace_path: 1 }] },
			"results_manifest.parse_results[0].new_workspace_path",
			"must be string"
		],
		[
			{ parse_results: [{ filename: "f", gis_data_path: null }] },
			"results_manifest.parse_results[0].gis_data_path",
			"must be string"
		],
		[
			{ parse_results: [{ filename: "f" }, { filename: "g" }, { filename: "f" }] },
			"results_manifest.parse_results[2].filename",
			'"f" is already parsed at parse_results[0]'
		],
		[{ info: {} }, "results_manifest.info", "must be array"],
		[{ errors: "x" }, "results_manifest.errors", "must be array"],
		[{ warnings: [] }, "results_manifest.warnings", "is not allowed"]
	])("refuses %j", (doc, field, message) => {
		expect(fieldErrorOf(() => parseResultsManifest(doc))).toEqual({ field, message });
	});

	it.each([
		[
			"output_data[0].file.geo_metadata.data_started",
			{
				output_data: [
					{
						name: "o",
						file: { path: "/p", geo_metadata: { data_started: "2015-05-15T10:34:12" } }
					}
				]
			}
		],
		[
			"output_data[0].files[1].geo_metadata.data_ended",
			{
				output_data: [
					{
						name: "o",
						files: [
							{ path: "/a" },
							{ path: "/b", geo_metadata: { data_ended: "2015-05-15T10:34:12" } }
						]
					}
				]
			}
		],
		[
			"parse_results[0].geo_metadata.data_started",
			{
				parse_results: [
					{ filename: "f", geo_metadata: { data_started: "2015-05-15T10:34:12" } }
				]
			}
		]
	])("refuses a datetime without timezone at %s", (at, doc) => {
		expect(fieldErrorOf(() => parseResultsManifest(doc))).toEqual({
			field: `results_manifest.${at}`,
			message: '"2015-05-15T10:34:12" has no timezone (ISO-8601 with a timezone expected)'
		});
	});

	it.each(["yesterday", "2015-05-15", "2015-02-30T00:00:00Z", "2015-05-15 10:34:12Z", ""])(
		"refuses the datetime %j",
		text => {
			const doc = { parse_results: [{ filename: "f", geo_metadata: { data_ended: text } }] };
			const problem = fieldErrorOf(() => parseResultsManifest(doc));
			expect(problem.field).toBe("results_manifest.parse_results[0].geo_metadata.data_ended");
			expect(problem.message).toContain(`"${text}"`);
		}
	);

	it.each(["1.2", "2.0", "0.9", ""])("refuses version %j", version => {
		expect(fieldErrorOf(() => parseResultsManifest({ version, files: [] }))).toEqual({
			field: "results_manifest.version",
			message: `"${version}" is an unsupported version (supported: 1.1, 1.0)`
		});
	});

	it("names fields under the given prefix and refuses NUL", () => {
		expect(fieldErrorOf(() => parseResultsManifest({ version: "3" }, "manifest")).field).toBe(
			"manifest.version"
		);
		expect(
			fieldErrorOf(() =>
				parseResultsManifest({ output_data: [{ name: "o", file: { path: "/a\0" } }] })
			)
		).toEqual({
			field: "results_manifest.output_data[0].file.path",
			message: "must not contain NUL characters"
		});
	});
});

describe("parseResultsManifest 1.0", () => {
	const V10 = {
		version: "1.0",
		files: [
			{ name: "output_file", path: "/out/output.csv" },
			{ name: "frames", paths: ["/out/1.png", "/out/2.png"] }
		],
		parse_results: [
			{
				filename: "myfile.h5",
				data_started: "2015-05-15T10:34:12Z",
				data_ended: "2015-05-15T10:36:12Z",
				data_types: ["H5", "VEG"],
				gis_data_path: "/out/myfile.geojson"
			},
			{ filename: "other.h5" }
		],
		info: [],
		errors: ["x"]
	};
	const AS_11 = {
		version: "1.1",
		output_data: [
			{ name: "output_file", file: { path: "/out/output.csv" } },
			{ name: "frames", files: [{ path: "/out/1.png" }, { path: "/out/2.png" }] }
		],
		parse_results: [
			{
				filename: "myfile.h5",
				data_types: ["H5", "VEG"],
				geo_metadata: {
					data_started: "2015-05-15T10:34:12Z",
					data_ended: "2015-05-15T10:36:12Z"
				},
				gis_data_path: "/out/myfile.geojson"
			},
			{ filename: "other.h5" }
		],
		info: [],
		errors: ["x"]
	};

	it("converts to 1.1", () => {
		expect(parseResultsManifest(V10)).toEqual(AS_11);
	});

	it("reads a manifest without version that has files as 1.0", () => {
		const unversioned: Record<string, unknown> = { ...V10 };
		delete unversioned.version;
		expect(parseResultsManifest(unversioned)).toEqual(AS_11);
	});

	it("converts an empty 1.0 document", () => {
		expect(parseResultsManifest({ version: "1.0" })).toEqual({
			version: "1.1",
			output_data: [],
			parse_results: [],
			errors: []
		});
	});

	it("keeps new_workspace_path and geo_metadata of a 1.0 entry, the 1.0 fields winning", () => {
		const doc = {
			version: "1.0",
			parse_results: [
				{
					filename: "f",
					new_workspace_path: "a/b",
					data_started: "2015-05-15T10:00:00Z",
					geo_metadata: { data_started: "2014-01-01T00:00:00Z", geo_json: GEO_JSON }
				}
			]
		};
		expect(parseResultsManifest(doc).parse_results).toEqual([
			{
				filename: "f",
				new_workspace_path: "a/b",
				geo_metadata: { data_started: "2015-05-15T10:00:00Z", geo_json: GEO_JSON }
			}
		]);
	});

	it.each([
		[{ output_data: [] }, "results_manifest.output_data", "is not allowed"],
		[{ files: {} }, "results_manifest.files", "must be array"],
		[{ files: [{ path: "/p" }] }, "results_manifest.files[0].name", "is required"],
		[{ files: [{ name: "o", path: 1 }] }, "results_manifest.files[0].path", "must be string"],
		[
			{ files: [{ name: "o", paths: ["/a", 2] }] },
			"results_manifest.files[0].paths[1]",
			"must be string"
		],
		[{ files: [{ name: "o" }] }, "results_manifest.files[0]", "must have either path or paths"],
		[
			{ files: [{ name: "o", path: "/a", paths: [] }] },
			"results_manifest.files[0]",
			"must have path or paths, not both"
		],
		[
			{
				files: [
					{ name: "o", path: "/a" },
					{ name: "o", path: "/b" }
				]
			},
			"results_manifest.files[1].name",
			'"o" is already registered at files[0]'
		],
		[
			{ parse_results: [{ filename: "f", data_started: 5 }] },
			"results_manifest.parse_results[0].data_started",
			"must be string"
		],
		[
			{ parse_results: [{ filename: "f", data_ended: "2015-05-15" }] },
			"results_manifest.parse_results[0].data_ended",
			'"2015-05-15" has no timezone (ISO-8601 with a timezone expected)'
		],
		[
			{ parse_results: [{ filename: "f" }, { filename: "f" }] },
			"results_manifest.parse_results[1].filename",
			'"f" is already parsed at parse_results[0]'
		]
	])("refuses %j", (doc, field, message) => {
		expect(fieldErrorOf(() => parseResultsManifest({ version: "1.0", ...doc }))).toEqual({
			field,
			message
		});
	});
});

describe("parseArtifactLines", () => {
	it("finds ARTIFACT lines, paths with colons included", () => {
		const stdout = [
			"starting",
			"ARTIFACT:output_file:/out/a.csv",
			"  ARTIFACT:indented:/x",
			"say ARTIFACT:inline:/x",
			"ARTIFACT:frames:/out/c:d/1.png\r",
			"artifact:lower:/x",
			"ARTIFACT::/no/name",
			"ARTIFACT:noPath:",
			"ARTIFACT:nocolon",
			"ARTIFACT:my output:/out/with space.txt ",
			"ARTIFACT:frames:/out/2.png"
		].join("\n");
		expect(parseArtifactLines(stdout)).toEqual([
			{ name: "output_file", path: "/out/a.csv" },
			{ name: "frames", path: "/out/c:d/1.png" },
			{ name: "my output", path: "/out/with space.txt " },
			{ name: "frames", path: "/out/2.png" }
		]);
	});

	it("finds nothing in empty output", () => {
		expect(parseArtifactLines("")).toEqual([]);
		expect(parseArtifactLines("\n\n")).toEqual([]);
	});
});

describe("mergeArtifacts", () => {
	it("adds artifacts: one path gives file, several give files", () => {
		const manifest = parseResultsManifest({});
		const merged = mergeArtifacts(
			manifest,
			parseArtifactLines(
				"ARTIFACT:a:/out/a\nARTIFACT:b:/out/b1\nARTIFACT:c:/out/c\nARTIFACT:b:/out/b2\n"
			)
		);
		expect(merged.output_data).toEqual([
			{ name: "a", file: { path: "/out/a" } },
			{ name: "b", files: [{ path: "/out/b1" }, { path: "/out/b2" }] },
			{ name: "c", file: { path: "/out/c" } }
		]);
		expect(manifest.output_data).toEqual([]);
	});

	it("lets the manifest win over artifacts of the same name", () => {
		const manifest = parseResultsManifest({
			output_data: [{ name: "output_file", file: { path: "/from/manifest.csv" } }],
			parse_results: [{ filename: "f" }]
		});
		const merged = mergeArtifacts(manifest, [
			{ name: "output_file", path: "/from/stdout.csv" },
			{ name: "output_file", path: "/from/stdout2.csv" },
			{ name: "extra", path: "/from/stdout.txt" }
		]);
		expect(merged).toEqual({
			version: "1.1",
			output_data: [
				{ name: "output_file", file: { path: "/from/manifest.csv" } },
				{ name: "extra", file: { path: "/from/stdout.txt" } }
			],
			parse_results: [{ filename: "f" }],
			errors: []
		});
	});

	it("gives an equal manifest when there are no artifacts", () => {
		const manifest = parseResultsManifest(ONE_OUTPUT);
		const merged = mergeArtifacts(manifest, []);
		expect(merged).toEqual(manifest);
		expect(merged).not.toBe(manifest);
	});
});
