import { BadRequestError, FieldError } from "../../../lib/errors";
import {
	parseConfigurationDocument,
	parseConfigurationImport
} from "../../../lib/documents/configuration";

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

/** A job type as Scale's docs/rest/port.rst exports it (is_system and uses_docker included). */
function jobType(): any {
	return {
		name: "my-job",
		version: "1.0.0",
		title: "My Job",
		description: "Runs my job",
		category: null,
		author_name: null,
		author_url: null,
		is_system: false,
		is_long_running: false,
		is_operational: true,
		icon_code: "f013",
		uses_docker: true,
		docker_privileged: false,
		docker_image: null,
		priority: 1,
		timeout: 0,
		max_scheduled: 1,
		max_tries: 0,
		cpus_required: 1.0,
		mem_required: 64.0,
		disk_out_const_required: 64.0,
		disk_out_mult_required: 0.0,
		interface: {
			version: "1.0",
			command: "my_cmd",
			command_arguments: "${input_file} ${job_output_dir}",
			input_data: [{ name: "input_file", type: "file" }],
			output_data: []
		},
		error_mapping: { version: "1.0", exit_codes: { "1": "my-error" } },
		trigger_rule: {
			type: "INGEST",
			name: "my-rule",
			is_active: true,
			configuration: { data: { input_data_name: "input_file", workspace_name: "raw" } }
		}
	};
}

function recipeType(): any {
	return {
		name: "my-recipe",
		version: "1.0.0",
		title: "My Recipe",
		description: "Runs my recipe",
		definition: {
			version: "1.0",
			input_data: [{ name: "f", type: "file" }],
			jobs: [
				{
					name: "j",
					job_type: { name: "my-job", version: "1.0.0" },
					recipe_inputs: [{ recipe_input: "f", job_input: "input_file" }]
				}
			]
		},
		trigger_rule: null
	};
}

function error(): any {
	return {
		name: "my-error",
		title: "My Error",
		description: "Went wrong",
		category: "ALGORITHM"
	};
}

function sample(): any {
	return {
		version: "1.0",
		recipe_types: [recipeType()],
		job_types: [jobType()],
		errors: [error()]
	};
}

describe("parseConfigurationImport", () => {
	it("accepts an export and reports the read-only fields it ignores, as Scale", () => {
		const { document, warnings } = parseConfigurationImport(sample());
		const expected = jobType();
		delete expected.is_system;
		delete expected.uses_docker;
		expect(document).toEqual({
			version: "1.0",
			recipe_types: [recipeType()],
			job_types: [expected],
			errors: [error()]
		});
		expect(warnings).toEqual([
			{ id: "read-only", details: "Job type includes read-only field: my-job -> is_system" },
			{ id: "read-only", details: "Job type includes read-only field: my-job -> uses_docker" }
		]);
	});

	it("fills the version and the lists; entries keep only what was given", () => {
		expect(parseConfigurationDocument({})).toEqual({
			version: "1.0",
			recipe_types: [],
			job_types: [],
			errors: []
		});
		const doc = parseConfigurationDocument({ job_types: [{ name: "a", version: "1" }] });
		expect(doc.job_types).toEqual([{ name: "a", version: "1" }]);
		expect("trigger_rule" in doc.job_types[0]).toBe(false);
		const removing = parseConfigurationDocument({
			recipe_types: [{ name: "r", version: "1", trigger_rule: null }]
		});
		expect(removing.recipe_types[0].trigger_rule).toBeNull();
	});

	it("copies the document", () => {
		const given = sample();
		const doc = parseConfigurationDocument(given);
		(doc.job_types[0].interface as any).command = "changed";
		expect(given.job_types[0].interface.command).toBe("my_cmd");
	});

	it("warns about ids and record fields of pasted details", () => {
		const { warnings } = parseConfigurationImport({
			recipe_types: [{ ...recipeType(), id: 4, revision_num: 2 }],
			errors: [{ ...error(), id: 9 }]
		});
		expect(warnings.map(w => w.details)).toEqual([
			"Error includes read-only field: my-error -> id",
			"Recipe type includes read-only field: my-recipe -> id",
			"Recipe type includes read-only field: my-recipe -> revision_num"
		]);
	});

	it("refuses an unsupported version", () => {
		expect(problemOf(() => parseConfigurationDocument({ version: "2.0" }))).toEqual({
			field: "import.version",
			message: '"2.0" is an unsupported version (supported: 1.0)'
		});
	});

	it("checks the document's shape", () => {
		expect(problemOf(() => parseConfigurationDocument([]))).toEqual({
			field: "import",
			message: "must be object"
		});
		expect(problemOf(() => parseConfigurationDocument({ workspaces: [] }))).toEqual({
			field: "import.workspaces",
			message: "is not allowed"
		});
		expect(problemOf(() => parseConfigurationDocument({ job_types: {} }))).toEqual({
			field: "import.job_types",
			message: "must be array"
		});
	});

	it("checks each job type with exact paths", () => {
		const at = (change: (jt: any) => void) => {
			const doc = sample();
			doc.job_types.push(jobType());
			doc.job_types[1].version = "2.0.0";
			change(doc.job_types[1]);
			return problemOf(() => parseConfigurationDocument(doc));
		};
		expect(at(jt => delete jt.name)).toEqual({
			field: "import.job_types[1].name",
			message: "is required"
		});
		expect(at(jt => delete jt.version)).toEqual({
			field: "import.job_types[1].version",
			message: "is required"
		});
		expect(at(jt => (jt.name = ""))).toEqual({
			field: "import.job_types[1].name",
			message: "must NOT have fewer than 1 characters"
		});
		expect(at(jt => (jt.interface = "cmd"))).toEqual({
			field: "import.job_types[1].interface",
			message: "must be object"
		});
		expect(at(jt => (jt.priority = "1")).field).toBe("import.job_types[1].priority");
		expect(at(jt => (jt.max_tries = 1.5)).field).toBe("import.job_types[1].max_tries");
		expect(at(jt => (jt.cpus_required = "1")).field).toBe("import.job_types[1].cpus_required");
		expect(at(jt => (jt.is_operational = 1)).field).toBe("import.job_types[1].is_operational");
		expect(at(jt => (jt.error_mapping = [])).field).toBe("import.job_types[1].error_mapping");
		expect(at(jt => (jt.shared_resources = [])).field).toBe(
			"import.job_types[1].shared_resources"
		);
		expect(at(jt => delete jt.trigger_rule.configuration)).toEqual({
			field: "import.job_types[1].trigger_rule.configuration",
			message: "is required"
		});
		expect(at(jt => delete jt.trigger_rule.type).field).toBe(
			"import.job_types[1].trigger_rule.type"
		);
		expect(at(jt => (jt.trigger_rule.id = 1)).field).toBe(
			"import.job_types[1].trigger_rule.id"
		);
		// null where Scale's serializers allow it
		const nulls = sample();
		Object.assign(nulls.job_types[0], {
			max_scheduled: null,
			error_mapping: null,
			trigger_rule: null
		});
		expect(() => parseConfigurationDocument(nulls)).not.toThrow();
	});

	it("checks recipe types and errors with exact paths", () => {
		const recipe = sample();
		recipe.recipe_types[0].definition = [];
		expect(problemOf(() => parseConfigurationDocument(recipe))).toEqual({
			field: "import.recipe_types[0].definition",
			message: "must be object"
		});
		const noVersion = sample();
		delete noVersion.recipe_types[0].version;
		expect(problemOf(() => parseConfigurationDocument(noVersion)).field).toBe(
			"import.recipe_types[0].version"
		);
		const category = sample();
		category.errors[0].category = "USER";
		expect(problemOf(() => parseConfigurationDocument(category))).toEqual({
			field: "import.errors[0].category",
			message: "must be one of SYSTEM, ALGORITHM, DATA"
		});
		const noName = sample();
		delete noName.errors[0].name;
		expect(problemOf(() => parseConfigurationDocument(noName, "body.import")).field).toBe(
			"body.import.errors[0].name"
		);
	});

	it("refuses a job type or recipe type given twice, and an error name given twice", () => {
		const jobs = sample();
		jobs.job_types.push(
			{ name: "other", version: "1.0.0" },
			{ name: "my-job", version: "1.0.0" }
		);
		expect(problemOf(() => parseConfigurationDocument(jobs))).toEqual({
			field: "import.job_types[2].name",
			message: 'job type "my-job" version "1.0.0" is also job_types[0]'
		});
		const otherVersion = sample();
		otherVersion.job_types.push({ name: "my-job", version: "1.0.1" });
		expect(() => parseConfigurationDocument(otherVersion)).not.toThrow();
		const recipes = sample();
		recipes.recipe_types.push(recipeType());
		expect(problemOf(() => parseConfigurationDocument(recipes))).toEqual({
			field: "import.recipe_types[1].name",
			message: 'recipe type "my-recipe" version "1.0.0" is also recipe_types[0]'
		});
		const errors = sample();
		errors.errors.push({ name: "my-error", category: "DATA" });
		expect(problemOf(() => parseConfigurationDocument(errors))).toEqual({
			field: "import.errors[1].name",
			message: 'error "my-error" is also errors[0]'
		});
	});
});
