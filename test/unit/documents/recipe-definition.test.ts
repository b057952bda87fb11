import { BadRequestError, FieldError } from "../../../lib/errors";
import {
	parseRecipeDefinition,
	referencedJobTypes,
	topologicalOrder
} from "../../../lib/documents/recipe-definition";
import type { JobInterface, JobTypeLookup } from "../../../lib/documents/types";

/** The field and message of the FieldError `fn` throws. */
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

// The two interfaces of Scale's recipe definition docs, plus one with property and files inputs.
const INTERFACES: Record<string, JobInterface> = {
	"geotiff-maker 1.2.3": {
		version: "1.0",
		command: "python make_geotiff.py",
		command_arguments: "${image} ${georeference_data} ${job_output_dir}",
		input_data: [
			{ name: "image", type: "file", required: true, media_types: ["image/png"] },
			{ name: "georeference_data", type: "file", required: true, media_types: ["text/csv"] }
		],
		output_data: [{ name: "geo_image", type: "file", required: true, media_type: "image/tiff" }]
	},
	"point-detector 4.5.6": {
		version: "1.0",
		command: "python detect_points.py",
		command_arguments: "${image} ${job_output_dir}",
		input_data: [{ name: "image", type: "file", required: true, media_types: ["image/tiff"] }],
		output_data: [
			{
				name: "geo_image",
				type: "file",
				required: true,
				media_type: "application/vnd.geo+json"
			}
		]
	},
	"combiner 1.0": {
		version: "1.0",
		command: "combine",
		command_arguments: "${label} ${images} ${job_output_dir}",
		input_data: [
			{ name: "label", type: "property", required: true },
			{ name: "images", type: "files", required: true, media_types: [] },
			{ name: "extra", type: "file", required: false, media_types: [] }
		],
		output_data: [
			{ name: "mosaics", type: "files", required: true },
			{ name: "log", type: "file", required: false, media_type: "text/plain" }
		]
	}
};

const lookup: JobTypeLookup = (name, version) => INTERFACES[`${name} ${version}`] ?? null;

/** Scale's docs/architecture/jobs/recipe_definition.rst example. */
function sample(): any {
	return {
		version: "1.0",
		input_data: [
			{ name: "image", type: "file", media_types: ["image/png"] },
			{ name: "georeference_data", type: "file", media_types: ["text/csv"] }
		],
		jobs: [
			{
				name: "make_geotiff",
				job_type: { name: "geotiff-maker", version: "1.2.3" },
				recipe_inputs: [
					{ recipe_input: "image", job_input: "image" },
					{ recipe_input: "georeference_data", job_input: "georeference_data" }
				]
			},
			{
				name: "detect_points",
				job_type: { name: "point-detector", version: "4.5.6" },
				dependencies: [
					{ name: "make_geotiff", connections: [{ output: "geo_image", input: "image" }] }
				]
			}
		]
	};
}

/** A recipe feeding the combiner: label (property) and images (files). */
function combinerRecipe(): any {
	return {
		input_data: [
			{ name: "label", type: "property" },
			{ name: "pictures", type: "files" }
		],
		jobs: [
			{
				name: "combine",
				job_type: { name: "combiner", version: "1.0" },
				recipe_inputs: [
					{ recipe_input: "label", job_input: "label" },
					{ recipe_input: "pictures", job_input: "images" }
				]
			}
		]
	};
}

describe("parseRecipeDefinition", () => {
	it("accepts Scale's sample and fills the defaults", () => {
		const { definition, warnings } = parseRecipeDefinition(sample(), lookup);
		expect(warnings).toEqual([]);
		expect(definition).toEqual({
			version: "1.0",
			input_data: [
				{ name: "image", type: "file", required: true, media_types: ["image/png"] },
				{
					name: "georeference_data",
					type: "file",
					required: true,
					media_types: ["text/csv"]
				}
			],
			jobs: [
				{
					name: "make_geotiff",
					job_type: { name: "geotiff-maker", version: "1.2.3" },
					recipe_inputs: [
						{ recipe_input: "image", job_input: "image" },
						{ recipe_input: "georeference_data", job_input: "georeference_data" }
					],
					dependencies: []
				},
				{
					name: "detect_points",
					job_type: { name: "point-detector", version: "4.5.6" },
					recipe_inputs: [],
					dependencies: [
						{
							name: "make_geotiff",
							connections: [{ output: "geo_image", input: "image" }]
						}
					]
				}
			]
		});
	});

	it("does not change the document it is given", () => {
		const doc = sample();
		const before = JSON.stringify(doc);
		parseRecipeDefinition(doc, lookup);
		expect(JSON.stringify(doc)).toBe(before);
	});

	it("accepts the bare minimum and fills input_data and version", () => {
		expect(parseRecipeDefinition({ jobs: [] }, lookup).definition).toEqual({
			version: "1.0",
			input_data: [],
			jobs: []
		});
	});

	it("fills media_types of file inputs and keeps property inputs bare", () => {
		const { definition } = parseRecipeDefinition(combinerRecipe(), lookup);
		expect(definition.input_data).toEqual([
			{ name: "label", type: "property", required: true },
			{ name: "pictures", type: "files", required: true, media_types: [] }
		]);
	});

	it("refuses an unsupported version", () => {
		expect(
			problemOf(() => parseRecipeDefinition({ version: "2.0", jobs: [] }, lookup))
		).toEqual({
			field: "definition.version",
			message: '"2.0" is an unsupported version (supported: 1.0)'
		});
	});

	it("checks the shape with exact paths", () => {
		expect(problemOf(() => parseRecipeDefinition({}, lookup))).toEqual({
			field: "definition.jobs",
			message: "is required"
		});
		expect(problemOf(() => parseRecipeDefinition([], lookup)).field).toBe("definition");
		const extra = sample();
		extra.jobs[1].priority = 1;
		expect(problemOf(() => parseRecipeDefinition(extra, lookup))).toEqual({
			field: "definition.jobs[1].priority",
			message: "is not allowed"
		});
		const badType = sample();
		badType.input_data[1].type = "directory";
		expect(problemOf(() => parseRecipeDefinition(badType, lookup))).toEqual({
			field: "definition.input_data[1].type",
			message: "must be one of property, file, files"
		});
		const noVersion = sample();
		delete noVersion.jobs[0].job_type.version;
		expect(problemOf(() => parseRecipeDefinition(noVersion, lookup))).toEqual({
			field: "definition.jobs[0].job_type.version",
			message: "is required"
		});
		const noOutput = sample();
		delete noOutput.jobs[1].dependencies[0].connections[0].output;
		expect(problemOf(() => parseRecipeDefinition(noOutput, lookup)).field).toBe(
			"definition.jobs[1].dependencies[0].connections[0].output"
		);
	});

	it("applies the interface name rule to recipe inputs and jobs", () => {
		for (const good of ["foo", "name with spaces", "name_with-underscores", "x".repeat(255)]) {
			const doc = combinerRecipe();
			doc.input_data[0].name = good;
			doc.jobs[0].recipe_inputs[0].recipe_input = good;
			doc.jobs[0].name = good;
			expect(() => parseRecipeDefinition(doc, lookup)).not.toThrow();
		}
		for (const bad of ["Speci@lCharacter", "dont.use.periods", "", "x".repeat(256)]) {
			const doc = combinerRecipe();
			doc.input_data[1].name = bad;
			expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
				field: "definition.input_data[1].name",
				message: "must be 1 to 255 letters, digits, spaces, underscores or hyphens"
			});
			const job = combinerRecipe();
			job.jobs[0].name = bad;
			expect(problemOf(() => parseRecipeDefinition(job, lookup)).field).toBe(
				"definition.jobs[0].name"
			);
		}
	});

	it("refuses text PostgreSQL cannot store", () => {
		const doc = sample();
		doc.jobs[0].job_type.version = "1.2\u00003";
		expect(problemOf(() => parseRecipeDefinition(doc, lookup)).field).toBe(
			"definition.jobs[0].job_type.version"
		);
	});

	it("refuses duplicate recipe input names and job names", () => {
		const inputs = sample();
		inputs.input_data.push({ name: "image", type: "file" });
		expect(problemOf(() => parseRecipeDefinition(inputs, lookup))).toEqual({
			field: "definition.input_data[2].name",
			message: '"image" is the name of another recipe input'
		});
		const jobs = sample();
		jobs.jobs[1].name = "make_geotiff";
		expect(problemOf(() => parseRecipeDefinition(jobs, lookup))).toEqual({
			field: "definition.jobs[1].name",
			message: '"make_geotiff" is the name of another job'
		});
	});

	it("refuses a job type that does not exist, naming it", () => {
		const doc = sample();
		doc.jobs.push({ name: "third", job_type: { name: "point-detector", version: "9.9" } });
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[2].job_type",
			message: 'job type "point-detector" version "9.9" does not exist'
		});
	});

	it("refuses a recipe input that names no input of the recipe", () => {
		const doc = sample();
		doc.jobs[0].recipe_inputs[1].recipe_input = "georef";
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[1].recipe_input",
			message: '"georef" names no input of the recipe'
		});
	});

	it("refuses a job input the job type does not have", () => {
		const doc = sample();
		doc.jobs[0].recipe_inputs[1].job_input = "georef";
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[1].job_input",
			message: '"georef" is not an input of job type "geotiff-maker" version "1.2.3"'
		});
	});

	it("refuses a job input fed twice", () => {
		const byRecipe = sample();
		byRecipe.jobs[0].recipe_inputs[1].job_input = "image";
		expect(problemOf(() => parseRecipeDefinition(byRecipe, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[1].job_input",
			message:
				'job input "image" is already fed by recipe input "image" (jobs[0].recipe_inputs[0])'
		});
		const byBoth = sample();
		byBoth.jobs[1].recipe_inputs = [{ recipe_input: "image", job_input: "image" }];
		expect(problemOf(() => parseRecipeDefinition(byBoth, lookup)).field).toBe(
			"definition.jobs[1].dependencies[0].connections[0].input"
		);
	});

	it("matches types: property to property, file to file or files, files only to files", () => {
		const propToFiles = combinerRecipe();
		propToFiles.jobs[0].recipe_inputs[1].recipe_input = "label";
		expect(problemOf(() => parseRecipeDefinition(propToFiles, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[1]",
			message: 'recipe input "label" (property) cannot feed job input "images" (files)'
		});
		const fileToProp = combinerRecipe();
		fileToProp.input_data[0].type = "file";
		expect(problemOf(() => parseRecipeDefinition(fileToProp, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[0]",
			message: 'recipe input "label" (file) cannot feed job input "label" (property)'
		});
		const filesToFile = sample();
		filesToFile.input_data[0].type = "files";
		expect(problemOf(() => parseRecipeDefinition(filesToFile, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[0]",
			message:
				'recipe input "image" (files) cannot feed job input "image" (file): the input accepts a single file'
		});
		const fileToFiles = combinerRecipe();
		fileToFiles.input_data[1].type = "file";
		expect(parseRecipeDefinition(fileToFiles, lookup).warnings).toEqual([]);
	});

	it("refuses an optional recipe input feeding a required job input", () => {
		const doc = sample();
		doc.input_data[1].required = false;
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[0].recipe_inputs[1]",
			message:
				'job input "georeference_data" is required but recipe input "georeference_data" is optional and may be absent'
		});
		const optionalToOptional = combinerRecipe();
		optionalToOptional.input_data.push({ name: "more", type: "file", required: false });
		optionalToOptional.jobs[0].recipe_inputs.push({ recipe_input: "more", job_input: "extra" });
		expect(() => parseRecipeDefinition(optionalToOptional, lookup)).not.toThrow();
	});

	it("refuses a dependency on an unknown job or on itself", () => {
		const unknown = sample();
		unknown.jobs[1].dependencies[0].name = "make_tiff";
		expect(problemOf(() => parseRecipeDefinition(unknown, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].name",
			message: '"make_tiff" names no job of the recipe'
		});
		const self = sample();
		self.jobs[1].dependencies[0].name = "detect_points";
		expect(problemOf(() => parseRecipeDefinition(self, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].name",
			message: "a job cannot depend on itself"
		});
	});

	it("refuses a connection from an unknown output or to an unknown input", () => {
		const output = sample();
		output.jobs[1].dependencies[0].connections[0].output = "tiff";
		expect(problemOf(() => parseRecipeDefinition(output, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].connections[0].output",
			message:
				'"tiff" is not an output of job "make_geotiff" (job type "geotiff-maker" version "1.2.3")'
		});
		const input = sample();
		input.jobs[1].dependencies[0].connections[0].input = "picture";
		expect(problemOf(() => parseRecipeDefinition(input, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].connections[0].input",
			message: '"picture" is not an input of job type "point-detector" version "4.5.6"'
		});
	});

	it("matches the types of connections and refuses an optional output feeding a required input", () => {
		const doc = combinerRecipe();
		doc.jobs.push({
			name: "detect",
			job_type: { name: "point-detector", version: "4.5.6" },
			dependencies: [
				{ name: "combine", connections: [{ output: "mosaics", input: "image" }] }
			]
		});
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].connections[0]",
			message:
				'output "mosaics" of job "combine" (files) cannot feed job input "image" (file): the input accepts a single file'
		});
		doc.jobs[1].dependencies[0].connections[0].output = "log";
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[1].dependencies[0].connections[0]",
			message:
				'job input "image" is required but output "log" of job "combine" is optional and may be absent'
		});
		// a file output feeds a files input
		const chain = sample();
		chain.jobs.push({
			name: "combine",
			job_type: { name: "combiner", version: "1.0" },
			dependencies: [
				{ name: "make_geotiff", connections: [{ output: "geo_image", input: "images" }] }
			]
		});
		chain.input_data.push({ name: "label", type: "property" });
		chain.jobs[2].recipe_inputs = [{ recipe_input: "label", job_input: "label" }];
		expect(parseRecipeDefinition(chain, lookup).warnings).toEqual([]);
	});

	it("refuses a required job input fed by nothing, as Scale", () => {
		const doc = sample();
		delete doc.jobs[1].dependencies[0].connections;
		expect(problemOf(() => parseRecipeDefinition(doc, lookup))).toEqual({
			field: "definition.jobs[1]",
			message:
				'required input "image" of job type "point-detector" version "4.5.6" is fed by no recipe input and no dependency connection'
		});
		const property = combinerRecipe();
		property.jobs[0].recipe_inputs.shift();
		expect(problemOf(() => parseRecipeDefinition(property, lookup)).message).toMatch(
			/^required input "label" of job type "combiner"/
		);
	});

	it("warns about media types an input does not accept", () => {
		const png = sample();
		png.jobs[1].dependencies = [];
		png.jobs[1].recipe_inputs = [{ recipe_input: "image", job_input: "image" }];
		expect(parseRecipeDefinition(png, lookup).warnings).toEqual([
			{
				id: "media_type",
				details:
					'Invalid media type for data input: image -> image/png (job detect_points, from recipe input "image")'
			}
		]);
		// A source that names no media type may hold anything: Scale warns with octet-stream.
		const untyped = sample();
		delete untyped.input_data[1].media_types;
		expect(parseRecipeDefinition(untyped, lookup).warnings).toEqual([
			{
				id: "media_type",
				details:
					'Invalid media type for data input: georeference_data -> application/octet-stream (job make_geotiff, from recipe input "georeference_data")'
			}
		]);
		// An input that accepts any media type is never warned about.
		expect(parseRecipeDefinition(combinerRecipe(), lookup).warnings).toEqual([]);
	});

	it("refuses a dependency cycle, naming it", () => {
		const two = sample();
		two.jobs[0].dependencies = [{ name: "detect_points" }];
		expect(problemOf(() => parseRecipeDefinition(two, lookup))).toEqual({
			field: "definition.jobs",
			message:
				"the job dependencies form a cycle: make_geotiff -> detect_points -> make_geotiff (each depends on the next)"
		});
		const three = {
			jobs: [
				{
					name: "a",
					job_type: { name: "combiner", version: "1.0" },
					dependencies: [{ name: "b" }]
				},
				{
					name: "b",
					job_type: { name: "combiner", version: "1.0" },
					dependencies: [{ name: "c" }]
				},
				{
					name: "c",
					job_type: { name: "combiner", version: "1.0" },
					dependencies: [{ name: "b" }]
				}
			]
		};
		expect(problemOf(() => parseRecipeDefinition(three, lookup)).message).toBe(
			"the job dependencies form a cycle: b -> c -> b (each depends on the next)"
		);
	});

	it("names the document with the field given", () => {
		expect(
			problemOf(() =>
				parseRecipeDefinition({ jobs: 1 }, lookup, "import.recipe_types[0].definition")
			)
		).toEqual({ field: "import.recipe_types[0].definition.jobs", message: "must be array" });
	});
});

describe("referencedJobTypes", () => {
	it("lists each job type once, in order", () => {
		const doc = sample();
		doc.jobs.push({ name: "again", job_type: { name: "geotiff-maker", version: "1.2.3" } });
		expect(referencedJobTypes(doc)).toEqual([
			{ name: "geotiff-maker", version: "1.2.3" },
			{ name: "point-detector", version: "4.5.6" }
		]);
	});

	it("tolerates anything malformed", () => {
		expect(referencedJobTypes(null)).toEqual([]);
		expect(referencedJobTypes("x")).toEqual([]);
		expect(referencedJobTypes({ jobs: {} })).toEqual([]);
		expect(
			referencedJobTypes({
				jobs: [
					null,
					3,
					{ job_type: null },
					{ job_type: { name: "a" } },
					{ job_type: { name: "b", version: "1" } }
				]
			})
		).toEqual([{ name: "b", version: "1" }]);
	});
});

describe("topologicalOrder", () => {
	it("puts every job after its dependencies, otherwise in the definition's order", () => {
		const job = (name: string, deps: string[]) => ({
			name,
			job_type: { name: "combiner", version: "1.0" },
			recipe_inputs: [],
			dependencies: deps.map(d => ({ name: d, connections: [] }))
		});
		expect(
			topologicalOrder({
				jobs: [job("d", ["b", "c"]), job("b", ["a"]), job("c", []), job("a", [])]
			})
		).toEqual(["c", "a", "b", "d"]);
		expect(topologicalOrder(parseRecipeDefinition(sample(), lookup).definition)).toEqual([
			"make_geotiff",
			"detect_points"
		]);
		expect(() => topologicalOrder({ jobs: [job("a", ["b"]), job("b", ["a"])] })).toThrow(
			/cycle/
		);
	});
});
