import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import type { Warning } from "./types";

/**
 * The configuration export/import document (Scale's port/schema.py, port/serializers.py and
 * port/importer.py; docs/rest/port.rst): recipe types, job types and errors without ids. This
 * module checks the structure only; the inner documents (interface, error_mapping, definition,
 * trigger_rule) are parsed by the caller with the other document modules.
 */
export const CONFIGURATION_VERSION = "1.0";

export interface ConfigurationTriggerRule {
	type: string;
	name?: string | null;
	is_active?: boolean;
	configuration: Record<string, unknown>;
}

/**
 * An exported job type. On import every field but name and version is optional: an absent field
 * keeps the existing job type's value (or the default for a new one); `trigger_rule: null`
 * removes the rule, an absent trigger_rule keeps it.
 */
export interface ConfigurationJobType {
	name: string;
	version: string;
	title?: string | null;
	description?: string | null;
	category?: string | null;
	author_name?: string | null;
	author_url?: string | null;
	is_long_running?: boolean;
	is_operational?: boolean;
	is_paused?: boolean;
	icon_code?: string | null;
	docker_privileged?: boolean;
	docker_image?: string | null;
	priority?: number;
	timeout?: number;
	max_scheduled?: number | null;
	max_tries?: number;
	cpus_required?: number;
	mem_required?: number;
	disk_out_const_required?: number;
	disk_out_mult_required?: number;
	interface?: Record<string, unknown>;
	error_mapping?: Record<string, unknown> | null;
	trigger_rule?: ConfigurationTriggerRule | null;
}

export interface ConfigurationRecipeType {
	name: string;
	version: string;
	title?: string | null;
	description?: string | null;
	definition?: Record<string, unknown>;
	trigger_rule?: ConfigurationTriggerRule | null;
}

export interface ConfigurationError {
	name: string;
	title?: string | null;
	description?: string | null;
	category?: "SYSTEM" | "ALGORITHM" | "DATA";
}

/** Normalised: version filled, the three lists always present; entries keep only the fields given. */
export interface ConfigurationDocument {
	version: "1.0";
	recipe_types: ConfigurationRecipeType[];
	job_types: ConfigurationJobType[];
	errors: ConfigurationError[];
}

const TEXT = { type: ["string", "null"] };
const KEY = { type: "string", minLength: 1, maxLength: 50 };

const TRIGGER_RULE = {
	type: ["object", "null"],
	required: ["type", "configuration"],
	additionalProperties: false,
	properties: {
		type: { type: "string", minLength: 1, maxLength: 50 },
		name: { type: ["string", "null"], maxLength: 50 },
		is_active: { type: "boolean" },
		configuration: { type: "object" }
	}
};

const JOB_TYPE_FIELDS: Record<string, unknown> = {
	name: KEY,
	version: KEY,
	title: TEXT,
	description: TEXT,
	category: TEXT,
	author_name: TEXT,
	author_url: TEXT,
	is_long_running: { type: "boolean" },
	is_operational: { type: "boolean" },
	is_paused: { type: "boolean" },
	icon_code: TEXT,
	docker_privileged: { type: "boolean" },
	docker_image: TEXT,
	priority: { type: "integer" },
	timeout: { type: "integer" },
	max_scheduled: { type: ["integer", "null"] },
	max_tries: { type: "integer" },
	cpus_required: { type: "number" },
	mem_required: { type: "number" },
	disk_out_const_required: { type: "number" },
	disk_out_mult_required: { type: "number" },
	interface: { type: "object" },
	error_mapping: { type: ["object", "null"] },
	trigger_rule: TRIGGER_RULE
};

const RECIPE_TYPE_FIELDS: Record<string, unknown> = {
	name: KEY,
	version: KEY,
	title: TEXT,
	description: TEXT,
	definition: { type: "object" },
	trigger_rule: TRIGGER_RULE
};

const ERROR_FIELDS: Record<string, unknown> = {
	name: KEY,
	title: TEXT,
	description: TEXT,
	category: { type: "string", enum: ["SYSTEM", "ALGORITHM", "DATA"] }
};

/**
 * Fields of the records that an import cannot set (Scale's JobType.UNEDITABLE_FIELDS plus ids and
 * detail-only fields): accepted so that a record pasted from the REST API imports, ignored, and
 * reported as `read-only` warnings as Scale does.
 */
export const JOB_TYPE_READ_ONLY = [
	"id",
	"is_system",
	"is_active",
	"requires_cleanup",
	"uses_docker",
	"revision_num",
	"created",
	"archived",
	"paused",
	"last_modified",
	"errors",
	"job_counts_6h",
	"job_counts_12h",
	"job_counts_24h"
];
export const RECIPE_TYPE_READ_ONLY = [
	"id",
	"is_active",
	"revision_num",
	"created",
	"archived",
	"last_modified",
	"job_types"
];
export const ERROR_READ_ONLY = ["id", "created", "last_modified"];

function entrySchema(
	fields: Record<string, unknown>,
	readOnly: string[],
	required: string[]
): Record<string, unknown> {
	return {
		type: "object",
		required,
		additionalProperties: false,
		properties: { ...fields, ...Object.fromEntries(readOnly.map(key => [key, true])) }
	};
}

// Scale's CONFIGURATION_SCHEMA, with the entries' fields as its serializers take them.
const CONFIGURATION_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		recipe_types: {
			type: "array",
			items: entrySchema(RECIPE_TYPE_FIELDS, RECIPE_TYPE_READ_ONLY, ["name", "version"])
		},
		job_types: {
			type: "array",
			items: entrySchema(JOB_TYPE_FIELDS, JOB_TYPE_READ_ONLY, ["name", "version"])
		},
		errors: { type: "array", items: entrySchema(ERROR_FIELDS, ERROR_READ_ONLY, ["name"]) }
	}
};

const checkShape = compileChecker(CONFIGURATION_SCHEMA);

type Entry = Record<string, unknown>;

/**
 * Parses an import document's structure: the schema of each entry (paths like
 * `import.job_types[3].interface`), each job type and recipe type (name, version) once, each
 * error name once. Answers the normalised document and `read-only` warnings for record fields an
 * import ignores (ids, is_system, revision_num, ...). Throws FieldError.
 */
export function parseConfigurationImport(
	doc: unknown,
	field = "import"
): { document: ConfigurationDocument; warnings: Warning[] } {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as {
		version?: string;
		recipe_types?: Entry[];
		job_types?: Entry[];
		errors?: Entry[];
	};
	const version = given.version ?? CONFIGURATION_VERSION;
	if (version !== CONFIGURATION_VERSION) {
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${CONFIGURATION_VERSION})`
		);
	}
	const warnings: Warning[] = [];
	const entries = (
		list: Entry[] | undefined,
		listName: string,
		what: string,
		fields: Record<string, unknown>,
		readOnly: string[],
		keyOf: (entry: Entry) => string
	): Entry[] => {
		const seen = new Map<string, number>();
		return (list ?? []).map((entry, i) => {
			const key = keyOf(entry);
			const first = seen.get(key);
			if (first !== undefined) {
				throw new FieldError(
					`${field}.${listName}[${i}].name`,
					`${what} ${key} is also ${listName}[${first}]`
				);
			}
			seen.set(key, i);
			const kept: Entry = {};
			for (const [name, value] of Object.entries(entry)) {
				if (name in fields) kept[name] = structuredClone(value);
				else if (readOnly.includes(name)) {
					warnings.push({
						id: "read-only",
						details: `${what[0].toUpperCase()}${what.slice(1)} includes read-only field: ${entry.name} -> ${name}`
					});
				}
			}
			return kept;
		});
	};
	const typeKey = (entry: Entry) => `"${entry.name}" version "${entry.version}"`;
	const errors = entries(given.errors, "errors", "error", ERROR_FIELDS, ERROR_READ_ONLY, e =>
		JSON.stringify(e.name)
	);
	const jobTypes = entries(
		given.job_types,
		"job_types",
		"job type",
		JOB_TYPE_FIELDS,
		JOB_TYPE_READ_ONLY,
		typeKey
	);
	const recipeTypes = entries(
		given.recipe_types,
		"recipe_types",
		"recipe type",
		RECIPE_TYPE_FIELDS,
		RECIPE_TYPE_READ_ONLY,
		typeKey
	);
	return {
		document: {
			version: CONFIGURATION_VERSION,
			recipe_types: recipeTypes as unknown as ConfigurationRecipeType[],
			job_types: jobTypes as unknown as ConfigurationJobType[],
			errors: errors as unknown as ConfigurationError[]
		},
		warnings
	};
}

/** parseConfigurationImport without the warnings. */
export function parseConfigurationDocument(doc: unknown, field = "import"): ConfigurationDocument {
	return parseConfigurationImport(doc, field).document;
}
