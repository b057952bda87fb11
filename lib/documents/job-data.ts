import { FieldError } from "../errors";
import {
	assertSchema,
	compileChecker,
	type Checker,
	checkStorableText
} from "../validation/schema";
import type { JobInterface } from "./types";
import { ID_SCHEMA } from "../validation/ids";

/**
 * Job data 1.0 (Scale 3.0's job/configuration/data/job_data.py and
 * docs/architecture/jobs/job_data.rst): the values given to one job's inputs and the workspaces
 * its outputs go to.
 */
export const JOB_DATA_VERSION = "1.0";

export interface PropertyInputData {
	name: string;
	value: string;
}
export interface FileInputData {
	name: string;
	file_id: number;
}
export interface FilesInputData {
	name: string;
	file_ids: number[];
}
export type InputData = PropertyInputData | FileInputData | FilesInputData;

export interface OutputData {
	name: string;
	workspace_id: number;
}

/** Job data 1.0, normalised: version filled, each input in the form its interface type takes. */
export interface JobData {
	version: "1.0";
	input_data: InputData[];
	output_data: OutputData[];
}

/** Ids are PostgreSQL `serial` values: 1 to 2^31-1. */

/**
 * Scale has no JSON schema for job data, only the checks in JobData; this is their shape, with no
 * unknown fields. An input entry carries one of value, file_id and file_ids (checked below
 * against the input's type).
 */
export const JOB_DATA_SCHEMA = {
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
					file_id: ID_SCHEMA,
					file_ids: { type: "array", minItems: 1, items: ID_SCHEMA }
				}
			}
		},
		output_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name", "workspace_id"],
				additionalProperties: false,
				properties: {
					name: { type: "string" },
					workspace_id: ID_SCHEMA
				}
			}
		}
	}
};

const checkShape: Checker = compileChecker(JOB_DATA_SCHEMA);

interface RawInput {
	name: string;
	value?: string;
	file_id?: number;
	file_ids?: number[];
}

/** Each interface's input types and output names, kept while the interface object lives. */
const interfaceNames = new WeakMap<
	JobInterface,
	{
		inputTypes: Map<string, JobInterface["input_data"][number]["type"]>;
		outputNames: Set<string>;
	}
>();

function namesOf(iface: JobInterface) {
	let names = interfaceNames.get(iface);
	if (!names) {
		names = {
			inputTypes: new Map(iface.input_data.map(input => [input.name, input.type])),
			outputNames: new Set(iface.output_data.map(output => output.name))
		};
		interfaceNames.set(iface, names);
	}
	return names;
}

/**
 * Checks job data against the job's interface and answers a normalised copy. Throws FieldError
 * under `field`, e.g. `job_data.input_data[1].file_id`. The rules, after Scale's JobData:
 *
 * - version is 1.0 (default); input_data and output_data default to [].
 * - Names are unique across input_data and output_data.
 * - Every input_data name is an input of the interface, and every required input is given.
 * - A property input has a string `value`; a file input an integer `file_id`; a files input a
 *   non-empty `file_ids` array — or a `file_id`, which becomes `file_ids: [file_id]` as in Scale.
 *   Any other of the three fields on the entry is refused.
 * - Every output of the interface (required or not) has an output_data entry with an integer
 *   workspace_id, and every output_data name is an output of the interface.
 *
 * Whether the files and workspaces exist (and media types match) is for the caller to check with
 * fileIdsIn and workspaceIdsIn.
 */
export function parseJobData(doc: unknown, iface: JobInterface, field = "job_data"): JobData {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as { version?: string; input_data?: RawInput[]; output_data?: OutputData[] };
	const version = given.version ?? JOB_DATA_VERSION;
	if (version !== JOB_DATA_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${JOB_DATA_VERSION})`
		);

	const seen = new Map<string, string>();
	const checkUnique = (name: string, at: string) => {
		const first = seen.get(name);
		if (first !== undefined)
			throw new FieldError(`${at}.name`, `"${name}" is also given at ${first}`);
		seen.set(name, at);
	};

	const { inputTypes, outputNames } = namesOf(iface);
	const inputs: InputData[] = (given.input_data ?? []).map((entry, i) => {
		const at = `${field}.input_data[${i}]`;
		checkUnique(entry.name, at);
		const type = inputTypes.get(entry.name);
		if (type === undefined)
			throw new FieldError(
				`${at}.name`,
				`"${entry.name}" is not an input of the job interface`
			);
		const present = (["value", "file_id", "file_ids"] as const).filter(
			k => entry[k] !== undefined
		);
		const refuse = (allowed: readonly string[], needs: string) => {
			const extra = present.find(k => !allowed.includes(k));
			if (extra !== undefined)
				throw new FieldError(
					`${at}.${extra}`,
					`is not allowed on ${type} input "${entry.name}" (it takes ${needs})`
				);
		};
		switch (type) {
			case "property":
				refuse(["value"], "value");
				if (entry.value === undefined)
					throw new FieldError(
						`${at}.value`,
						`is required for property input "${entry.name}"`
					);
				return { name: entry.name, value: entry.value };
			case "file":
				refuse(["file_id"], "file_id");
				if (entry.file_id === undefined)
					throw new FieldError(
						`${at}.file_id`,
						`is required for file input "${entry.name}"`
					);
				return { name: entry.name, file_id: entry.file_id };
			case "files":
				if (entry.file_id !== undefined && entry.file_ids !== undefined)
					throw new FieldError(`${at}.file_id`, `is not allowed together with file_ids`);
				refuse(["file_id", "file_ids"], "file_ids");
				if (entry.file_id !== undefined)
					return { name: entry.name, file_ids: [entry.file_id] };
				if (entry.file_ids === undefined)
					throw new FieldError(
						`${at}.file_ids`,
						`is required for files input "${entry.name}"`
					);
				return { name: entry.name, file_ids: [...entry.file_ids] };
		}
	});

	// `seen` holds the input names given so far, and no output name yet
	for (const input of iface.input_data) {
		if (input.required && !seen.has(input.name))
			throw new FieldError(
				`${field}.input_data`,
				`the required input "${input.name}" is not given`
			);
	}

	const outputs: OutputData[] = (given.output_data ?? []).map((entry, i) => {
		const at = `${field}.output_data[${i}]`;
		checkUnique(entry.name, at);
		if (!outputNames.has(entry.name))
			throw new FieldError(
				`${at}.name`,
				`"${entry.name}" is not an output of the job interface`
			);
		return { name: entry.name, workspace_id: entry.workspace_id };
	});
	for (const output of iface.output_data) {
		if (!outputs.some(given => given.name === output.name))
			throw new FieldError(
				`${field}.output_data`,
				`the output "${output.name}" has no entry (every output needs a workspace_id)`
			);
	}

	return { version: JOB_DATA_VERSION, input_data: inputs, output_data: outputs };
}

/**
 * The file ids one entry of a job data, recipe data or results document gives: its `file_id`, or
 * its `file_ids`; none for a value. Read off stored documents too, so it checks what it takes.
 */
export function entryFileIds(entry: unknown): number[] {
	const e = entry as { file_id?: unknown; file_ids?: unknown } | null | undefined;
	if (Number.isInteger(e?.file_id)) return [e!.file_id as number];
	if (Array.isArray(e?.file_ids)) return e.file_ids.filter(id => Number.isInteger(id));
	return [];
}

/** The distinct ids of the files a job or recipe data document gives, in order of appearance. */
export function fileIdsIn(data: { input_data: readonly unknown[] } | null | undefined): number[] {
	const ids = new Set<number>();
	for (const input of data?.input_data ?? []) for (const id of entryFileIds(input)) ids.add(id);
	return [...ids];
}

/** The distinct ids of the output workspaces, in order of appearance. */
export function workspaceIdsIn(data: JobData): number[] {
	return [...new Set(data.output_data.map(output => output.workspace_id))];
}
