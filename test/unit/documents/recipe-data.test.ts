import { BadRequestError, FieldError } from "../../../lib/errors";
import { fileIdsIn } from "../../../lib/documents/job-data";
import {
	checkRecipeFiles,
	checkRecipeWorkspace,
	parseRecipeData
} from "../../../lib/documents/recipe-data";
import type { RecipeDefinition } from "../../../lib/documents/recipe-definition";
import type { JobInterface, JobTypeLookup } from "../../../lib/documents/types";

function problemOf(fn: () => unknown): { field: string; message: string } {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(FieldError);
		expect((error as BadRequestError).code).toBe(400);
		const field = (error as FieldError).data.field as string;
		return { field, message: (error as Error).message.slice(field.length + 2) };
	}
	throw new Error("expected a FieldError");
}

/** The recipe of Scale's recipe definition docs, with a property and a files input added. */
const DEF: RecipeDefinition = {
	version: "1.0",
	input_data: [
		{ name: "image", type: "file", required: true, media_types: ["image/png"] },
		{ name: "georeference_data", type: "file", required: true, media_types: ["text/csv"] },
		{ name: "label", type: "property", required: false },
		{ name: "extras", type: "files", required: false, media_types: [] }
	],
	jobs: [
		{
			name: "make_geotiff",
			job_type: { name: "geotiff-maker", version: "1.2.3" },
			recipe_inputs: [],
			dependencies: []
		}
	]
};

/** Scale's docs/architecture/jobs/recipe_data.rst example. */
function sample(): any {
	return {
		version: "1.0",
		input_data: [
			{ name: "image", file_id: 1234 },
			{ name: "georeference_data", file_id: 1235 }
		],
		workspace_id: 12
	};
}

describe("parseRecipeData", () => {
	it("accepts Scale's sample", () => {
		expect(parseRecipeData(sample(), DEF)).toEqual(sample());
	});

	it("fills the version and leaves workspace_id out when not given", () => {
		const doc = sample();
		delete doc.version;
		delete doc.workspace_id;
		expect(parseRecipeData(doc, DEF)).toEqual({ version: "1.0", input_data: doc.input_data });
	});

	it("takes a value for a property, file_ids or file_id for files", () => {
		const doc = sample();
		doc.input_data.push(
			{ name: "label", value: "north" },
			{ name: "extras", file_ids: [1, 2] }
		);
		expect(parseRecipeData(doc, DEF).input_data.slice(2)).toEqual([
			{ name: "label", value: "north" },
			{ name: "extras", file_ids: [1, 2] }
		]);
		doc.input_data[3] = { name: "extras", file_id: 7 };
		expect(parseRecipeData(doc, DEF).input_data[3]).toEqual({ name: "extras", file_ids: [7] });
	});

	it("refuses an unsupported version", () => {
		const doc = sample();
		doc.version = "1.1";
		expect(problemOf(() => parseRecipeData(doc, DEF))).toEqual({
			field: "recipe_data.version",
			message: '"1.1" is an unsupported version (supported: 1.0)'
		});
	});

	it("checks the shape with exact paths", () => {
		const extra = sample();
		extra.input_data[1].media_type = "text/csv";
		expect(problemOf(() => parseRecipeData(extra, DEF))).toEqual({
			field: "recipe_data.input_data[1].media_type",
			message: "is not allowed"
		});
		const noName = sample();
		delete noName.input_data[0].name;
		expect(problemOf(() => parseRecipeData(noName, DEF))).toEqual({
			field: "recipe_data.input_data[0].name",
			message: "is required"
		});
		const textId = sample();
		textId.input_data[0].file_id = "1234";
		expect(problemOf(() => parseRecipeData(textId, DEF))).toEqual({
			field: "recipe_data.input_data[0].file_id",
			message: "must be integer"
		});
		const workspace = sample();
		workspace.workspace_id = 1.5;
		expect(problemOf(() => parseRecipeData(workspace, DEF)).field).toBe(
			"recipe_data.workspace_id"
		);
		expect(problemOf(() => parseRecipeData("data", DEF)).field).toBe("recipe_data");
	});

	it("refuses an input given twice or unknown to the definition", () => {
		const twice = sample();
		twice.input_data.push({ name: "image", file_id: 1 });
		expect(problemOf(() => parseRecipeData(twice, DEF))).toEqual({
			field: "recipe_data.input_data[2].name",
			message: '"image" is given more than once'
		});
		const unknown = sample();
		unknown.input_data.push({ name: "imagery", file_id: 1 });
		expect(problemOf(() => parseRecipeData(unknown, DEF))).toEqual({
			field: "recipe_data.input_data[2].name",
			message:
				'"imagery" names no input of the recipe (inputs: "image", "georeference_data", "label", "extras")'
		});
	});

	it("refuses a missing required input", () => {
		const doc = sample();
		doc.input_data.shift();
		expect(problemOf(() => parseRecipeData(doc, DEF))).toEqual({
			field: "recipe_data.input_data",
			message: 'input "image" is required and was not provided'
		});
	});

	it("refuses the wrong field for the input's type", () => {
		const propertyAsFile = sample();
		propertyAsFile.input_data.push({ name: "label", file_id: 3 });
		expect(problemOf(() => parseRecipeData(propertyAsFile, DEF))).toEqual({
			field: "recipe_data.input_data[2].file_id",
			message: 'is not allowed: input "label" is a property input and takes value'
		});
		const noValue = sample();
		noValue.input_data.push({ name: "label" });
		expect(problemOf(() => parseRecipeData(noValue, DEF))).toEqual({
			field: "recipe_data.input_data[2].value",
			message: 'is required: input "label" is a property'
		});
		const fileAsList = sample();
		fileAsList.input_data[0] = { name: "image", file_ids: [1234] };
		expect(problemOf(() => parseRecipeData(fileAsList, DEF))).toEqual({
			field: "recipe_data.input_data[0].file_ids",
			message:
				'is not allowed: input "image" is a file input and takes file_id (a single file)'
		});
		const fileValue = sample();
		fileValue.input_data[1] = { name: "georeference_data", value: "x.csv" };
		expect(problemOf(() => parseRecipeData(fileValue, DEF)).field).toBe(
			"recipe_data.input_data[1].value"
		);
		const noFile = sample();
		noFile.input_data[1] = { name: "georeference_data" };
		expect(problemOf(() => parseRecipeData(noFile, DEF))).toEqual({
			field: "recipe_data.input_data[1].file_id",
			message: 'is required: input "georeference_data" is a file'
		});
		const emptyList = sample();
		emptyList.input_data.push({ name: "extras", file_ids: [] });
		expect(problemOf(() => parseRecipeData(emptyList, DEF))).toEqual({
			field: "recipe_data.input_data[2].file_ids",
			message: "must list at least one file"
		});
		const both = sample();
		both.input_data.push({ name: "extras", file_id: 1, file_ids: [2] });
		expect(problemOf(() => parseRecipeData(both, DEF)).field).toBe(
			"recipe_data.input_data[2].file_id"
		);
		const noFiles = sample();
		noFiles.input_data.push({ name: "extras" });
		expect(problemOf(() => parseRecipeData(noFiles, DEF)).field).toBe(
			"recipe_data.input_data[2].file_ids"
		);
	});
});

describe("fileIdsIn", () => {
	it("lists every file once, in order", () => {
		const data = parseRecipeData(
			{
				input_data: [
					{ name: "image", file_id: 5 },
					{ name: "georeference_data", file_id: 3 },
					{ name: "label", value: "x" },
					{ name: "extras", file_ids: [3, 9, 5, 10] }
				]
			},
			DEF
		);
		expect(fileIdsIn(data)).toEqual([5, 3, 9, 10]);
	});
});

describe("checkRecipeFiles", () => {
	const data = () =>
		parseRecipeData(
			{
				input_data: [
					{ name: "image", file_id: 1 },
					{ name: "georeference_data", file_id: 2 },
					{ name: "extras", file_ids: [3, 4] }
				]
			},
			DEF
		);

	it("warns about files of a media type their input does not accept", () => {
		const files = new Map([
			[1, { media_type: "image/png" }],
			[2, { media_type: "text/plain" }],
			[3, { media_type: "anything/at-all" }],
			[4, { media_type: "image/png" }]
		]);
		expect(checkRecipeFiles(data(), DEF, files)).toEqual([
			{
				id: "media_type",
				details: "Invalid media type for file: 2 -> text/plain (input georeference_data)"
			}
		]);
	});

	it("refuses a file that does not exist, at its path", () => {
		const files = new Map([
			[1, { media_type: "image/png" }],
			[2, { media_type: "text/csv" }],
			[3, { media_type: "image/png" }]
		]);
		expect(problemOf(() => checkRecipeFiles(data(), DEF, files))).toEqual({
			field: "recipe_data.input_data[2].file_ids[1]",
			message: "file 4 does not exist"
		});
		files.set(4, { media_type: "x/y" });
		files.delete(1);
		expect(problemOf(() => checkRecipeFiles(data(), DEF, files)).field).toBe(
			"recipe_data.input_data[0].file_id"
		);
	});
});

describe("checkRecipeWorkspace", () => {
	const withOutputs: JobInterface = {
		version: "1.0",
		command: "x",
		command_arguments: "",
		input_data: [],
		output_data: [{ name: "out", type: "file", required: true }]
	};
	const withoutOutputs: JobInterface = { ...withOutputs, output_data: [] };

	it("requires a workspace when a job produces files", () => {
		const data = parseRecipeData({ input_data: sample().input_data }, DEF);
		const producing: JobTypeLookup = () => withOutputs;
		expect(problemOf(() => checkRecipeWorkspace(data, DEF, producing))).toEqual({
			field: "recipe_data.workspace_id",
			message: 'is required: job "make_geotiff" of the recipe produces files'
		});
		expect(() => checkRecipeWorkspace(data, DEF, () => withoutOutputs)).not.toThrow();
		expect(() =>
			checkRecipeWorkspace(parseRecipeData(sample(), DEF), DEF, producing)
		).not.toThrow();
	});
});
