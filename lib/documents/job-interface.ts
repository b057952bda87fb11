import { FieldError } from "../errors";
import {
	assertSchema,
	compileChecker,
	type Checker,
	checkStorableText
} from "../validation/schema";
import type { InputEntry, JobInterface, OutputEntry } from "./types";

/**
 * Job interface 1.0 (Scale 3.0's job/configuration/interface/job_interface.py and
 * docs/architecture/jobs/job_interface.rst): how a job type's algorithm is run, what it takes and
 * what it produces.
 */
export const JOB_INTERFACE_VERSION = "1.0";

/** The placeholder substituted with the job's output directory. */
export const JOB_OUTPUT_DIR = "job_output_dir";

/** Input and output names: 1 to 255 letters, digits, spaces, `_` and `-` (Scale's pattern). */
export const NAME_PATTERN = "^[a-zA-Z0-9_ -]{1,255}$";

/**
 * The shape, as Scale's JOB_INTERFACE_SCHEMA has it: no unknown fields at any level. Stricter
 * than Scale where Scale only forgot to say: media_types holds strings, command is not empty.
 */
/** An input entry, as interfaces and recipe definitions declare their inputs (Scale's schema). */
export const INPUT_ENTRY_SCHEMA = {
	type: "object",
	required: ["name", "type"],
	additionalProperties: false,
	properties: {
		name: { type: "string", pattern: NAME_PATTERN },
		type: { type: "string", enum: ["property", "file", "files"] },
		required: { type: "boolean" },
		media_types: { type: "array", items: { type: "string" } }
	}
};

/** A job interface's input entry: a recipe's, with Scale 4.0's `partial`. */
const JOB_INPUT_ENTRY_SCHEMA = {
	...INPUT_ENTRY_SCHEMA,
	properties: { ...INPUT_ENTRY_SCHEMA.properties, partial: { type: "boolean" } }
};

export const JOB_INTERFACE_SCHEMA = {
	type: "object",
	required: ["command", "command_arguments"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		command: { type: "string", minLength: 1 },
		command_arguments: { type: "string" },
		input_data: {
			type: "array",
			items: JOB_INPUT_ENTRY_SCHEMA
		},
		output_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name", "type"],
				additionalProperties: false,
				properties: {
					name: { type: "string", pattern: NAME_PATTERN },
					type: { type: "string", enum: ["file", "files"] },
					required: { type: "boolean" },
					media_type: { type: "string" }
				}
			}
		},
		shared_resources: {
			type: "array",
			items: {
				type: "object",
				required: ["name", "type"],
				additionalProperties: false,
				properties: {
					name: { type: "string" },
					type: { type: "string" },
					required: { type: "boolean" }
				}
			}
		}
	}
};

const checkShape: Checker = compileChecker(JOB_INTERFACE_SCHEMA);

/** What a name that breaks the name pattern is told. */
export const IO_NAME_RULE = "must be 1 to 255 letters, digits, spaces, underscores or hyphens";

function assertShape(check: Checker, doc: unknown, field: string): void {
	assertSchema(check, doc, field, p =>
		p.type === "pattern" && /\.name$/.test(p.field) ? IO_NAME_RULE : p.message
	);
}

interface RawInput {
	name: string;
	type: InputEntry["type"];
	required?: boolean;
	media_types?: string[];
	partial?: boolean;
}

interface RawOutput {
	name: string;
	type: OutputEntry["type"];
	required?: boolean;
	media_type?: string;
}

interface RawInterface {
	version?: string;
	command: string;
	command_arguments: string;
	input_data?: RawInput[];
	output_data?: RawOutput[];
	shared_resources?: { name: string }[];
}

/**
 * Checks a job interface and answers a normalised copy: version "1.0", input_data and output_data
 * present, `required` filled (default true) and `media_types` filled (default []) on file and
 * files inputs. Throws FieldError naming the field at fault under `field`, e.g.
 * `interface.input_data[1].name`.
 *
 * Rules beyond the schema: version must be 1.0; names are unique across all inputs, outputs and
 * shared resources; `job_output_dir` is not an input name (it would make `${job_output_dir}`
 * ambiguous); property inputs take no media_types; command_arguments can be split into words
 * (see splitCommandArguments) and each of its `${...}` placeholders is `${job_output_dir}`,
 * `${NAME}` or `${FLAG:NAME}` with NAME an input name.
 */
export function parseJobInterface(doc: unknown, field = "interface"): JobInterface {
	assertShape(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as RawInterface;

	const version = given.version ?? JOB_INTERFACE_VERSION;
	if (version !== JOB_INTERFACE_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${JOB_INTERFACE_VERSION})`
		);
	if (given.command.trim() === "") throw new FieldError(`${field}.command`, "must not be blank");

	const inputs: InputEntry[] = (given.input_data ?? []).map((input, i) => {
		const entry: InputEntry = {
			name: input.name,
			type: input.type,
			required: input.required ?? true
		};
		if (input.type === "property") {
			if (input.media_types !== undefined)
				throw new FieldError(
					`${field}.input_data[${i}].media_types`,
					"is only allowed on file and files inputs"
				);
			if (input.partial !== undefined)
				throw new FieldError(
					`${field}.input_data[${i}].partial`,
					"is only allowed on file and files inputs"
				);
		} else {
			entry.media_types = [...(input.media_types ?? [])];
			if (input.partial) entry.partial = true;
		}
		return entry;
	});
	const outputs: OutputEntry[] = (given.output_data ?? []).map(output => {
		const entry: OutputEntry = {
			name: output.name,
			type: output.type,
			required: output.required ?? true
		};
		if (output.media_type !== undefined) entry.media_type = output.media_type;
		return entry;
	});

	checkNames(given, field);

	const argumentsField = `${field}.command_arguments`;
	const words = splitCommandArguments(given.command_arguments, argumentsField);
	const inputNames = new Set(inputs.map(input => input.name));
	for (const word of words) {
		for (const p of placeholders(word)) {
			if (p.name !== JOB_OUTPUT_DIR && !inputNames.has(p.name))
				throw new FieldError(
					argumentsField,
					`the placeholder ${p.raw} names no input (placeholders are \${NAME}, ` +
						`\${FLAG:NAME} with NAME an input name, and \${${JOB_OUTPUT_DIR}})`
				);
		}
	}

	const result: JobInterface = {
		version: JOB_INTERFACE_VERSION,
		command: given.command,
		command_arguments: given.command_arguments,
		input_data: inputs,
		output_data: outputs
	};
	if (given.shared_resources !== undefined)
		result.shared_resources = structuredClone(given.shared_resources);
	return result;
}

/** Names are unique across inputs, outputs and shared resources (Scale checks the last too). */
function checkNames(given: RawInterface, field: string): void {
	const seen = new Map<string, string>();
	const lists: [string, { name: string }[] | undefined][] = [
		["input_data", given.input_data],
		["output_data", given.output_data],
		["shared_resources", given.shared_resources]
	];
	for (const [list, entries] of lists) {
		(entries ?? []).forEach((entry, i) => {
			const at = `${field}.${list}[${i}].name`;
			const first = seen.get(entry.name);
			if (first !== undefined)
				throw new FieldError(at, `"${entry.name}" is already the name of ${first}`);
			if (list === "input_data" && entry.name === JOB_OUTPUT_DIR)
				throw new FieldError(
					at,
					`"${JOB_OUTPUT_DIR}" is reserved for the output directory placeholder`
				);
			seen.set(entry.name, `${field}.${list}[${i}]`);
		});
	}
}

const BLANK = new Set([" ", "\t", "\n", "\r"]);
// Characters a backslash escapes inside double quotes (POSIX); before others it stays literal.
const DQ_ESCAPABLE = new Set(['"', "\\", "$", "`"]);

/**
 * Splits command_arguments into words by POSIX shell quoting rules, without any expansion:
 * blanks (space, tab, newline) separate words; 'single quotes' keep everything literal;
 * "double quotes" keep everything literal except a backslash before `"`, `\`, `$` or a backtick;
 * outside quotes a backslash makes the next character literal; backslash-newline joins lines;
 * `""` is an empty word. A `${...}` placeholder is read as one unit, like a shell parameter
 * expansion, so `${-f :input file}` stays in one word. Operators such as `;`, `|`, `>` and `#`
 * are ordinary characters: there is no shell. Quoting does not stop substitution: every `${...}`
 * in a resulting word is a placeholder (substituteArguments).
 *
 * Throws FieldError on `field` for an unclosed quote or `${`.
 */
export function splitCommandArguments(text: string, field = "command_arguments"): string[] {
	const words: string[] = [];
	let word: string | null = null;
	let i = 0;
	/** Reads a `${...}` unit starting at i (at the `$`), answering it verbatim. */
	const readPlaceholder = (): string => {
		const end = text.indexOf("}", i + 2);
		if (end < 0) throw new FieldError(field, `has an unclosed "\${" at character ${i + 1}`);
		const unit = text.slice(i, end + 1);
		i = end + 1;
		return unit;
	};
	while (i < text.length) {
		const c = text[i];
		if (BLANK.has(c)) {
			if (word !== null) words.push(word);
			word = null;
			i++;
		} else if (c === "'") {
			const end = text.indexOf("'", i + 1);
			if (end < 0)
				throw new FieldError(field, `has an unclosed single quote at character ${i + 1}`);
			word = (word ?? "") + text.slice(i + 1, end);
			i = end + 1;
		} else if (c === '"') {
			const start = i;
			let part = "";
			i++;
			for (;;) {
				if (i >= text.length)
					throw new FieldError(
						field,
						`has an unclosed double quote at character ${start + 1}`
					);
				const d = text[i];
				if (d === '"') {
					i++;
					break;
				}
				if (d === "\\" && i + 1 < text.length && DQ_ESCAPABLE.has(text[i + 1])) {
					part += text[i + 1];
					i += 2;
				} else if (d === "\\" && text[i + 1] === "\n") {
					i += 2;
				} else if (d === "$" && text[i + 1] === "{") {
					part += readPlaceholder();
				} else {
					part += d;
					i++;
				}
			}
			word = (word ?? "") + part;
		} else if (c === "\\") {
			if (text[i + 1] === "\n") {
				i += 2;
			} else if (i + 1 < text.length) {
				word = (word ?? "") + text[i + 1];
				i += 2;
			} else {
				// A trailing lone backslash stays literal, as in bash and dash.
				word = (word ?? "") + c;
				i++;
			}
		} else if (c === "$" && text[i + 1] === "{") {
			word = (word ?? "") + readPlaceholder();
		} else {
			word = (word ?? "") + c;
			i++;
		}
	}
	if (word !== null) words.push(word);
	return words;
}

/** One `${...}` placeholder found in a text. */
export interface Placeholder {
	/** as written, e.g. `${-f :input_file}` */
	raw: string;
	/** the text before the last colon, trimmed (`-f`); null when there is none or it is blank */
	flag: string | null;
	/** the text after the last colon, or all of it: an input name or `job_output_dir` */
	name: string;
}

const PLACEHOLDER = /\$\{([^}]*)\}/g;

function toPlaceholder(raw: string, inner: string): Placeholder {
	const colon = inner.lastIndexOf(":");
	if (colon < 0) return { raw, flag: null, name: inner };
	const flag = inner.slice(0, colon).trim();
	return { raw, flag: flag === "" ? null : flag, name: inner.slice(colon + 1) };
}

/**
 * The `${...}` placeholders of `text`, in order (Scale's pattern `\$\{(?:[^}]*:)?([^}]*)\}`): the
 * flag is everything before the last colon, so `${--in:my input}` has flag `--in` and name
 * `my input`. Names are taken exactly, spaces included.
 */
export function placeholders(text: string): Placeholder[] {
	return [...text.matchAll(PLACEHOLDER)].map(m => toPlaceholder(m[0], m[1]));
}

/** What the placeholders of one job are replaced with. */
export interface SubstitutionValues {
	/** input name → value (a property's text, a file's path, a files input's directory);
	 *  null or absent for an optional input given no value */
	inputs: Record<string, string | null>;
	/** the absolute path of the job's output directory */
	jobOutputDir: string;
}

/**
 * Replaces the placeholders inside each word of splitCommandArguments' result, answering the
 * argument array for the process. A substituted value is never split or scanned again.
 *
 * - `${NAME}` is replaced by the value inside its word; `${job_output_dir}` by the output path.
 * - `${FLAG:NAME}` that is a whole word gives two arguments, the flag and the value
 *   (`${-f :in}` → `-f`, `/path`). Inside a larger word it is replaced by the value alone (a
 *   flag and a value cannot share one argument).
 * - A placeholder whose value is null or absent (an optional input left out) is removed with its
 *   flag; a word that this leaves empty is dropped entirely (a word written empty, `""`, stays).
 *
 * An input named `job_output_dir` cannot exist (parseJobInterface rejects it), so the name
 * always means the output directory.
 */
export function substituteArguments(words: string[], values: SubstitutionValues): string[] {
	const valueOf = (name: string): string | null => {
		if (name === JOB_OUTPUT_DIR) return values.jobOutputDir;
		return Object.prototype.hasOwnProperty.call(values.inputs, name)
			? (values.inputs[name] ?? null)
			: null;
	};
	const args: string[] = [];
	for (const word of words) {
		const found = placeholders(word);
		if (found.length === 1 && found[0].raw === word && found[0].flag !== null) {
			const value = valueOf(found[0].name);
			if (value !== null) args.push(found[0].flag, value);
			continue;
		}
		let dropped = false;
		const result = word.replace(PLACEHOLDER, (raw: string, inner: string) => {
			const value = valueOf(toPlaceholder(raw, inner).name);
			if (value === null) dropped = true;
			return value ?? "";
		});
		if (dropped && result === "") continue;
		args.push(result);
	}
	return args;
}
