import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import type { RecipeDefinition } from "./recipe-definition";
import type { InputEntry, JobTypeLookup, Warning } from "./types";

/**
 * Recipe data 1.0 (Scale's recipe/configuration/data/recipe_data.py and
 * docs/architecture/jobs/recipe_data.rst): the values given to a recipe's inputs and the
 * workspace its jobs store their products in.
 */
export const RECIPE_DATA_VERSION = "1.0";

export type RecipeDataInput =
	| { name: string; value: string }
	| { name: string; file_id: number }
	| { name: string; file_ids: number[] };

/** Normalised: version filled; a files input given `file_id` carries `file_ids: [id]` instead. */
export interface RecipeData {
	version: "1.0";
	input_data: RecipeDataInput[];
	workspace_id?: number;
}

const FILE_ID = { type: "integer", minimum: 1 };

const RECIPE_DATA_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		input_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name"],
				additionalProperties: false,
				properties: {
					name: { type: "string" },
					value: { type: "string" },
					file_id: FILE_ID,
					file_ids: { type: "array", items: FILE_ID }
				}
			}
		},
		workspace_id: FILE_ID
	}
};

const checkShape = compileChecker(RECIPE_DATA_SCHEMA);

type GivenInput = { name: string; value?: string; file_id?: number; file_ids?: number[] };

/**
 * Parses recipe data and matches it against the recipe definition's inputs: every input named
 * once and known to the definition, every required input present, each given the field its
 * type takes (`value` for property, `file_id` for file, `file_ids` or `file_id` for files).
 * Whether the files exist (checkRecipeFiles) and whether a workspace is needed
 * (checkRecipeWorkspace) are the caller's next steps. Throws FieldError, e.g.
 * `recipe_data.input_data[1].file_id`.
 */
export function parseRecipeData(
	doc: unknown,
	def: Pick<RecipeDefinition, "input_data">,
	field = "recipe_data"
): RecipeData {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as { version?: string; input_data?: GivenInput[]; workspace_id?: number };
	const version = given.version ?? RECIPE_DATA_VERSION;
	if (version !== RECIPE_DATA_VERSION) {
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${RECIPE_DATA_VERSION})`
		);
	}
	const inputs = new Map(def.input_data.map(input => [input.name, input]));
	const seen = new Set<string>();
	const inputData = (given.input_data ?? []).map((item, i) => {
		const at = `${field}.input_data[${i}]`;
		if (seen.has(item.name)) {
			throw new FieldError(`${at}.name`, `"${item.name}" is given more than once`);
		}
		seen.add(item.name);
		const input = inputs.get(item.name);
		if (!input) {
			const known = def.input_data.map(d => `"${d.name}"`).join(", ") || "none";
			throw new FieldError(
				`${at}.name`,
				`"${item.name}" names no input of the recipe (inputs: ${known})`
			);
		}
		return dataInput(item, input, at);
	});
	for (const input of def.input_data) {
		if (input.required && !seen.has(input.name)) {
			throw new FieldError(
				`${field}.input_data`,
				`input "${input.name}" is required and was not provided`
			);
		}
	}
	const data: RecipeData = { version: RECIPE_DATA_VERSION, input_data: inputData };
	if (given.workspace_id !== undefined) data.workspace_id = given.workspace_id;
	return data;
}

function dataInput(item: GivenInput, input: InputEntry, at: string): RecipeDataInput {
	const refuse = (key: "value" | "file_id" | "file_ids", takes: string) => {
		if (item[key] !== undefined) {
			throw new FieldError(
				`${at}.${key}`,
				`is not allowed: input "${input.name}" is a ${input.type} input and takes ${takes}`
			);
		}
	};
	switch (input.type) {
		case "property":
			refuse("file_id", "value");
			refuse("file_ids", "value");
			if (item.value === undefined) {
				throw new FieldError(
					`${at}.value`,
					`is required: input "${input.name}" is a property`
				);
			}
			return { name: item.name, value: item.value };
		case "file":
			refuse("value", "file_id");
			refuse("file_ids", "file_id (a single file)");
			if (item.file_id === undefined) {
				throw new FieldError(
					`${at}.file_id`,
					`is required: input "${input.name}" is a file`
				);
			}
			return { name: item.name, file_id: item.file_id };
		case "files": {
			refuse("value", "file_ids");
			if (item.file_id !== undefined && item.file_ids !== undefined) {
				throw new FieldError(`${at}.file_id`, "is not allowed together with file_ids");
			}
			if (item.file_id !== undefined) return { name: item.name, file_ids: [item.file_id] };
			if (item.file_ids === undefined) {
				throw new FieldError(
					`${at}.file_ids`,
					`is required: input "${input.name}" is a list of files (file_id is accepted for one)`
				);
			}
			if (!item.file_ids.length) {
				throw new FieldError(`${at}.file_ids`, "must list at least one file");
			}
			return { name: item.name, file_ids: [...item.file_ids] };
		}
	}
}

/**
 * Checks the files the data passes (Scale's _validate_file_ids): each must exist (`files`
 * holds the found ones by id), else FieldError on its id's path; a media type its input does not
 * accept is a `media_type` warning.
 */
export function checkRecipeFiles(
	data: RecipeData,
	def: Pick<RecipeDefinition, "input_data">,
	files: ReadonlyMap<number, { media_type: string }>,
	field = "recipe_data"
): Warning[] {
	const warnings: Warning[] = [];
	data.input_data.forEach((item, i) => {
		const ids: [number, string][] =
			"file_id" in item
				? [[item.file_id, `${field}.input_data[${i}].file_id`]]
				: "file_ids" in item
					? item.file_ids.map((id, k) => [id, `${field}.input_data[${i}].file_ids[${k}]`])
					: [];
		const accepted = def.input_data.find(input => input.name === item.name)?.media_types ?? [];
		for (const [id, at] of ids) {
			const file = files.get(id);
			if (!file) throw new FieldError(at, `file ${id} does not exist`);
			if (accepted.length && !accepted.includes(file.media_type)) {
				warnings.push({
					id: "media_type",
					details: `Invalid media type for file: ${id} -> ${file.media_type} (input ${item.name})`
				});
			}
		}
	});
	return warnings;
}

/**
 * Scale requires a workspace when any job of the recipe has a file output: throws FieldError on
 * `recipe_data.workspace_id` when it is missing then. Whether the workspace exists and is active
 * is the caller's to check.
 */
export function checkRecipeWorkspace(
	data: RecipeData,
	def: Pick<RecipeDefinition, "jobs">,
	lookup: JobTypeLookup,
	field = "recipe_data"
): void {
	if (data.workspace_id !== undefined) return;
	for (const job of def.jobs) {
		const jobInterface = lookup(job.job_type.name, job.job_type.version);
		if (jobInterface?.output_data.length) {
			throw new FieldError(
				`${field}.workspace_id`,
				`is required: job "${job.name}" of the recipe produces files`
			);
		}
	}
}
