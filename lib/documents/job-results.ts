import { FieldError } from "../errors";
import { assertSchema, compileChecker, type Checker } from "../validation/schema";
import { checkStorableText } from "../validation/text";
import { ID_SCHEMA } from "../validation/ids";

/**
 * Job results: the product files a job produced, by output name (Scale 3.0's
 * job/configuration/results/job_results.py).
 *
 * Version: we write "1.0". Scale 3.0's JobResults always writes `{"version": "1.0", ...}`, its
 * REST samples (job and job execution details) show "1.0", and no 1.1 definition of this
 * document exists anywhere in Scale 3.0; the spec's "job results 1.1" most likely repeats the
 * results manifest's version. A "1.1" document is accepted on read as the same shape (nothing
 * else could be meant by it) and normalised to "1.0", so every stored document reads alike.
 */
export const JOB_RESULTS_VERSION = "1.0";
const READABLE_VERSIONS = ["1.0", "1.1"];

export interface FileResult {
	name: string;
	file_id: number;
}
export interface FilesResult {
	name: string;
	file_ids: number[];
}
export type OutputResult = FileResult | FilesResult;

export interface JobResults {
	version: "1.0";
	output_data: OutputResult[];
}

export const JOB_RESULTS_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		output_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name"],
				additionalProperties: false,
				properties: {
					name: { type: "string", minLength: 1 },
					file_id: ID_SCHEMA,
					file_ids: { type: "array", minItems: 1, items: ID_SCHEMA }
				}
			}
		}
	}
};

const checkShape: Checker = compileChecker(JOB_RESULTS_SCHEMA);

/**
 * Checks a job results document and answers a normalised copy (version "1.0", output_data
 * default []). Each entry has a name and exactly one of `file_id` (a file output) and `file_ids`
 * (a files output, non-empty); names are unique. Throws FieldError under `field`.
 */
export function parseJobResults(doc: unknown, field = "results"): JobResults {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as {
		version?: string;
		output_data?: { name: string; file_id?: number; file_ids?: number[] }[];
	};
	const version = given.version ?? JOB_RESULTS_VERSION;
	if (!READABLE_VERSIONS.includes(version))
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${READABLE_VERSIONS.join(", ")})`
		);
	const seen = new Set<string>();
	const outputs = (given.output_data ?? []).map((entry, i): OutputResult => {
		const at = `${field}.output_data[${i}]`;
		if (seen.has(entry.name))
			throw new FieldError(`${at}.name`, `"${entry.name}" is given more than once`);
		seen.add(entry.name);
		if (entry.file_id !== undefined && entry.file_ids !== undefined)
			throw new FieldError(`${at}.file_ids`, "is not allowed together with file_id");
		if (entry.file_id !== undefined) return { name: entry.name, file_id: entry.file_id };
		if (entry.file_ids !== undefined)
			return { name: entry.name, file_ids: [...entry.file_ids] };
		throw new FieldError(at, "must have file_id or file_ids");
	});
	return { version: JOB_RESULTS_VERSION, output_data: outputs };
}

/** One output's stored products, for buildJobResults. */
export interface ResultEntry {
	name: string;
	/** the ids of the product files, in order */
	fileIds: number[];
	/** true for a files output (→ file_ids), false for a file output (→ file_id) */
	multiple: boolean;
}

/**
 * Builds the job results document from the products stored per output, as Scale's
 * store_output_data_files does: `file_ids` for a files output, `file_id` for a file output. An
 * output with no products gets no entry (an optional output the job did not produce). A file
 * output with several products is a programming error (the manifest check comes first) and
 * throws a plain Error; so does a name given twice.
 */
export function buildJobResults(entries: ResultEntry[]): JobResults {
	const seen = new Set<string>();
	const outputs: OutputResult[] = [];
	for (const entry of entries) {
		if (seen.has(entry.name))
			throw new Error(`job results: output "${entry.name}" given twice`);
		seen.add(entry.name);
		if (entry.fileIds.length === 0) continue;
		if (entry.multiple) {
			outputs.push({ name: entry.name, file_ids: [...entry.fileIds] });
		} else if (entry.fileIds.length === 1) {
			outputs.push({ name: entry.name, file_id: entry.fileIds[0] });
		} else {
			throw new Error(
				`job results: file output "${entry.name}" has ${entry.fileIds.length} files`
			);
		}
	}
	return { version: JOB_RESULTS_VERSION, output_data: outputs };
}
