/**
 * Shapes shared by the document modules. Each module in lib/documents parses one document:
 * `parseX(doc, field, ...)` checks the JSON Schema and the semantic rules, converts older
 * versions, fills defaults and returns a normalised copy; a problem throws FieldError (400) whose
 * field is the path inside the request, e.g. `interface.input_data[1].name`. Problems that do
 * not make a document invalid are returned as warnings.
 */

/** A non-fatal problem, as Scale reports them: `{id, details}`. */
export interface Warning {
	id: string;
	details: string;
}

export type InputType = "property" | "file" | "files";
export type OutputType = "file" | "files";

export interface InputEntry {
	name: string;
	type: InputType;
	required: boolean;
	/** file and files inputs only; empty = any media type */
	media_types?: string[];
	/**
	 * file and files inputs only, present when true (Scale 4.0): the job reads only parts of its
	 * files, so one in an s3 workspace with a `host_path` is read through that mount, not
	 * downloaded
	 */
	partial?: true;
}

export interface OutputEntry {
	name: string;
	type: OutputType;
	required: boolean;
	media_type?: string;
}

/** Job interface 1.0, normalised (version filled, defaults applied). */
export interface JobInterface {
	version: "1.0";
	command: string;
	command_arguments: string;
	input_data: InputEntry[];
	output_data: OutputEntry[];
	/** Scale 3.0 samples carry it; kept as given */
	shared_resources?: unknown[];
}

/** Error mapping 1.0: exit code (as a string) → registered error name. */
export interface ErrorMapping {
	version: "1.0";
	exit_codes: Record<string, string>;
}

/** Looks up the current interface of a job type by name and version (null if none). */
export type JobTypeLookup = (name: string, version: string) => JobInterface | null;
