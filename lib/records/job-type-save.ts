import type { Sequelize } from "sequelize";
import { select, write, type Sql } from "../db/run";
import { parseErrorMapping } from "../documents/error-mapping";
import { parseJobInterface } from "../documents/job-interface";
import { parseRecipeDefinition, referencedJobTypes } from "../documents/recipe-definition";
import type { ErrorMapping, JobInterface, Warning } from "../documents/types";
import { BadRequestError, FieldError, NotFoundError } from "../errors";
import { normalizeImage } from "../documents/images";
import { compileChecker, type Checker } from "../validation/schema";
import {
	findJobTypeId,
	jobTypeKey,
	loadJobTypesByKey,
	type JobTypeKey,
	type JobTypeRow
} from "./job-type";
import {
	applyTriggerRuleChange,
	checkTriggerRule,
	loadTriggerRules,
	parseTriggerRuleField,
	ruleSpecOf,
	type TriggerRuleRow
} from "./trigger-rule";
import { checkSpecSchema, duplicateType, fieldPath, has, type SaveOptions } from "./type-spec";
import { INT4_MAX } from "../validation/ids";

/**
 * Job types as users write them (POST and PATCH /job-types/, the configuration import): the
 * request schemas, validation (interface, error mapping, trigger rule, the recipe types that use
 * the job type) and the write of a new job type or an edit, with its revision.
 */

/** Letters, digits, `_`, `-` and inner spaces: what a recipe definition can name (Scale's pattern). */
export const JOB_TYPE_NAME = {
	type: "string",
	minLength: 1,
	maxLength: 50,
	pattern: "^[a-zA-Z0-9_-]([a-zA-Z0-9_ -]*[a-zA-Z0-9_-])?$"
};
/** JOB_TYPE_NAME's pattern in words, for error messages. */
export const JOB_TYPE_NAME_RULE =
	"must be 1 to 50 letters, digits, underscores, hyphens or inner spaces";
const NAME_RULE = JOB_TYPE_NAME_RULE;
export const JOB_TYPE_VERSION = { type: "string", minLength: 1, maxLength: 50 };
const TEXT = (maxLength?: number) =>
	maxLength === undefined
		? { type: ["string", "null"] }
		: { type: ["string", "null"], maxLength };
const FLAG = { type: "boolean" };
const AMOUNT = { type: "number", minimum: 0 };

/** The fields a client may set on create and edit, as JSON Schema properties. */
export const JOB_TYPE_FIELDS = {
	title: TEXT(50),
	description: TEXT(),
	category: TEXT(50),
	author_name: TEXT(50),
	author_url: TEXT(),
	is_long_running: FLAG,
	is_operational: FLAG,
	is_paused: FLAG,
	is_active: FLAG,
	icon_code: TEXT(20),
	docker_privileged: FLAG,
	docker_image: TEXT(500),
	priority: { type: "integer", minimum: 1, maximum: INT4_MAX },
	timeout: { type: "integer", minimum: 0, maximum: INT4_MAX },
	max_scheduled: { type: ["integer", "null"], minimum: 1, maximum: INT4_MAX },
	max_tries: { type: "integer", minimum: 1, maximum: INT4_MAX },
	cpus_required: AMOUNT,
	mem_required: AMOUNT,
	disk_out_const_required: AMOUNT,
	disk_out_mult_required: AMOUNT,
	interface: { type: "object" },
	error_mapping: { type: ["object", "null"] },
	trigger_rule: { type: ["object", "null"] }
};

/** The create body (and the validation body): unknown fields are ignored. */
export const NEW_JOB_TYPE_SCHEMA = {
	type: "object",
	required: ["name", "version", "interface"],
	properties: { name: JOB_TYPE_NAME, version: JOB_TYPE_VERSION, ...JOB_TYPE_FIELDS }
};

/** The edit body: name and version cannot change and are ignored, as are unknown fields. */
export const JOB_TYPE_EDIT_SCHEMA = { type: "object", properties: JOB_TYPE_FIELDS };

const checkNew: Checker = compileChecker(NEW_JOB_TYPE_SCHEMA);
const checkEdit: Checker = compileChecker(JOB_TYPE_EDIT_SCHEMA);

/** The plain columns a create or edit body sets as given. */
const PLAIN_FIELDS = [
	"title",
	"description",
	"category",
	"author_name",
	"author_url",
	"is_long_running",
	"is_operational",
	"icon_code",
	"docker_privileged",
	"docker_image",
	"priority",
	"timeout",
	"max_scheduled",
	"max_tries",
	"cpus_required",
	"mem_required",
	"disk_out_const_required",
	"disk_out_mult_required"
] as const;

/** Every field an edit may carry; a body with none of them changes nothing. */
const EDITABLE = [
	...PLAIN_FIELDS,
	"is_paused",
	"is_active",
	"interface",
	"error_mapping",
	"trigger_rule"
];

/** A create body, or (with name and version ignored) an edit body, as the client sent it. */
export interface JobTypeSpec {
	name?: string;
	version?: string;
	title?: string | null;
	description?: string | null;
	category?: string | null;
	author_name?: string | null;
	author_url?: string | null;
	is_long_running?: boolean;
	is_operational?: boolean;
	is_paused?: boolean;
	is_active?: boolean;
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
	interface?: unknown;
	error_mapping?: unknown;
	trigger_rule?: unknown;
	[other: string]: unknown;
}

/** The names of registered errors among those the mapping mentions (read tolerantly). */
async function registeredErrorNames(
	db: Sequelize,
	mapping: unknown,
	t?: Sql
): Promise<Set<string>> {
	const codes = (mapping as { exit_codes?: unknown } | null)?.exit_codes;
	if (codes === null || typeof codes !== "object") return new Set();
	const names = [...new Set(Object.values(codes as object))].filter(
		(n): n is string => typeof n === "string"
	);
	if (names.length === 0) return new Set();
	const rows = await select<{ name: string }>(
		db,
		"SELECT name FROM error WHERE name = ANY($1::text[])",
		[names],
		t
	);
	return new Set(rows.map(r => r.name));
}

/**
 * Checks that a new interface for the job type `key` still fits every recipe type whose
 * definition uses that job type (Scale's edit_job_type validates all recipe definitions).
 * Answers the recipe definitions' warnings; throws FieldError on `field` when one breaks.
 */
async function checkRecipesUsing(
	db: Sequelize,
	key: JobTypeKey,
	newInterface: JobInterface,
	field: string,
	t?: Sql
): Promise<Warning[]> {
	const recipes = await select<{ name: string; version: string; definition: unknown }>(
		db,
		`SELECT name, version, definition FROM recipe_type
		 WHERE definition->'jobs' @> $1::jsonb ORDER BY id`,
		[JSON.stringify([{ job_type: { name: key.name, version: key.version } }])],
		t
	);
	if (recipes.length === 0) return [];
	const keys = new Map<string, JobTypeKey>();
	for (const recipe of recipes)
		for (const k of referencedJobTypes(recipe.definition))
			keys.set(jobTypeKey(k.name, k.version), k);
	const interfaces = new Map(
		(await loadJobTypesByKey(db, [...keys.values()], t)).map(row => [
			jobTypeKey(row.name, row.version),
			row.interface as JobInterface
		])
	);
	interfaces.set(jobTypeKey(key.name, key.version), newInterface);
	const lookup = (name: string, version: string) =>
		interfaces.get(jobTypeKey(name, version)) ?? null;
	const warnings: Warning[] = [];
	for (const recipe of recipes) {
		try {
			warnings.push(...parseRecipeDefinition(recipe.definition, lookup).warnings);
		} catch (error) {
			if (!(error instanceof FieldError)) throw error;
			throw new FieldError(
				field,
				`does not fit recipe type "${recipe.name}" version "${recipe.version}": ${error.message}`
			);
		}
	}
	return warnings;
}

/** A create or edit body checked and its documents parsed, ready to write. */
interface Prepared {
	interface: JobInterface | null;
	errorMapping: ErrorMapping | null;
	ruleChange: ReturnType<typeof parseTriggerRuleField>;
	currentRule: TriggerRuleRow | null;
	warnings: Warning[];
}

/**
 * Checks a body against the current job type (null when creating): its fields, its interface,
 * error mapping (every name registered) and trigger rule (fits the interface, its workspace
 * exists), and, for a new interface of an existing job type, the recipe types using it.
 * Writes nothing.
 */
async function prepare(
	db: Sequelize,
	spec: JobTypeSpec,
	current: JobTypeRow | null,
	field: string | undefined,
	t?: Sql
): Promise<Prepared> {
	const at = (name: string) => fieldPath(field, name);
	const iface = has(spec, "interface")
		? parseJobInterface(spec.interface, at("interface"))
		: null;
	const errorMapping = has(spec, "error_mapping")
		? parseErrorMapping(
				spec.error_mapping,
				await registeredErrorNames(db, spec.error_mapping, t),
				at("error_mapping")
			)
		: null;
	const ownerName = current ? current.name : (spec.name as string);
	const ruleChange = parseTriggerRuleField(
		spec.trigger_rule,
		has(spec, "trigger_rule"),
		ownerName,
		at("trigger_rule")
	);
	const currentRule =
		current && current.trigger_rule_id !== null
			? ((await loadTriggerRules(db, [current.trigger_rule_id], t)).get(
					current.trigger_rule_id
				) ?? null)
			: null;

	const warnings: Warning[] = [];
	const inputs = (iface ?? (current?.interface as JobInterface)).input_data;
	if (ruleChange.kind === "set") {
		warnings.push(
			...(await checkTriggerRule(db, ruleChange.rule, inputs, {
				field: at("trigger_rule"),
				t
			}))
		);
	} else if (iface && currentRule && ruleChange.kind !== "remove") {
		// The rule stays: it must still fit the new interface.
		warnings.push(
			...(await checkTriggerRule(db, ruleSpecOf(currentRule), inputs, {
				field: at("trigger_rule"),
				checkWorkspace: false,
				t
			}))
		);
	}
	if (iface && current)
		warnings.push(...(await checkRecipesUsing(db, current, iface, at("interface"), t)));
	return { interface: iface, errorMapping, ruleChange, currentRule, warnings };
}

/**
 * Warns when no active node can run the job type's containers now (no engine, the image nowhere
 * and no node pulling, privileged containers allowed nowhere): its jobs would wait QUEUED until
 * one can (the scheduler places a container job only where it can run).
 */
async function checkContainerNodes(
	db: Sequelize,
	image: string,
	privileged: boolean,
	t?: Sql
): Promise<Warning[]> {
	const [found] = await select<{ engine: boolean; image: boolean; privileged: boolean }>(
		db,
		`SELECT coalesce(bool_or(docker_engine), false) AS engine,
		        coalesce(bool_or(docker_engine AND (docker_pull OR $1 = ANY(docker_images))), false) AS image,
		        coalesce(bool_or(docker_engine AND (docker_pull OR $1 = ANY(docker_images)) AND docker_privileged), false) AS privileged
		 FROM node WHERE is_active`,
		[normalizeImage(image)],
		t
	);
	const wait = "its jobs will wait in the queue until one can";
	if (!found.engine)
		return [{ id: "docker_image", details: `no active node has a Docker engine: ${wait}` }];
	if (!found.image)
		return [
			{
				id: "docker_image",
				details: `no active node has the image ${image}, and none pulls images (AGENT_DOCKER_PULL): ${wait}`
			}
		];
	if (privileged && !found.privileged)
		return [
			{
				id: "docker_privileged",
				details: `no active node with the image runs privileged containers (AGENT_DOCKER_PRIVILEGED): ${wait}`
			}
		];
	return [];
}

/**
 * Checks a job type about to be created (a create body) and saves nothing. Answers Scale's
 * warnings: media types a trigger rule passes that the interface does not accept, and, when a
 * job type of that name and version exists, the warnings of the recipe types using it with the
 * new interface; and, for a container job type, that no active node can run it now. Throws FieldError (400) naming the field at fault.
 */
export async function validateJobType(
	db: Sequelize,
	spec: JobTypeSpec,
	opts: { field?: string; t?: Sql } = {}
): Promise<Warning[]> {
	checkSpecSchema(checkNew, spec, NAME_RULE, opts.field);
	const prepared = await prepare(db, spec, null, opts.field, opts.t);
	const [existing] = await select<{ name: string; version: string }>(
		db,
		"SELECT name, version FROM job_type WHERE name = $1 AND version = $2",
		[spec.name, spec.version],
		opts.t
	);
	if (existing && prepared.interface)
		prepared.warnings.push(
			...(await checkRecipesUsing(
				db,
				existing,
				prepared.interface,
				fieldPath(opts.field, "interface"),
				opts.t
			))
		);
	if (spec.docker_image)
		prepared.warnings.push(
			...(await checkContainerNodes(
				db,
				spec.docker_image,
				spec.docker_privileged === true,
				opts.t
			))
		);
	return prepared.warnings;
}

/** How an edit moves a timestamp that follows a flag (paused, archived). */
function stamp(
	given: boolean | undefined,
	was: boolean,
	setWhen: boolean
): "keep" | "set" | "clear" {
	if (given === undefined || given === was) return "keep";
	return given === setWhen ? "set" : "clear";
}

/**
 * Creates a job type from a create body, or (with `existingId`) edits that job type with the
 * fields the body carries, in the caller's transaction `t`. Answers the id and the warnings
 * (which do not stop the save). Throws FieldError (400) for a bad field or document and for a
 * name and version already taken, NotFoundError (404) for an unknown `existingId`; nothing is
 * written then (the caller's transaction rolls back).
 *
 * A create writes revision 1 of the interface. An edit with at least one editable field
 * increments revision_num; a new interface is written as a job_type_rev row with that number.
 * `trigger_rule`: a new rule archives and replaces the current one, unless only its is_active
 * differs (paused or resumed in place); `{is_active}` alone pauses or resumes; null removes it.
 * is_paused sets or clears `paused`; is_active false archives (sets `archived`), true clears it.
 */
export async function saveJobType(
	db: Sequelize,
	spec: JobTypeSpec,
	t: Sql,
	opts: SaveOptions = {}
): Promise<{ id: number; warnings: Warning[] }> {
	if (opts.existingId !== undefined) return editJobType(db, opts.existingId, spec, t, opts);

	checkSpecSchema(checkNew, spec, NAME_RULE, opts.field);
	const name = spec.name as string;
	const version = spec.version as string;
	if ((await findJobTypeId(db, name, version, t)) !== null)
		throw duplicateType("job type", name, version, opts);
	const prepared = await prepare(db, spec, null, opts.field, t);
	const ruleId = await applyTriggerRuleChange(db, null, prepared.ruleChange, t);

	const values = PLAIN_FIELDS.map(f => (has(spec, f) ? spec[f] : null));
	const given = PLAIN_FIELDS.map(f => has(spec, f));
	// Columns not given take their defaults (Scale's): COALESCE with the column default is not
	// possible in SQL, so the INSERT names only the columns given.
	const columns: string[] = [];
	const binds: unknown[] = [];
	const placeholders: string[] = [];
	const add = (column: string, value: unknown, cast = "") => {
		binds.push(value);
		columns.push(column);
		placeholders.push(`$${binds.length}${cast}`);
	};
	add("name", name);
	add("version", version);
	PLAIN_FIELDS.forEach((f, i) => {
		if (given[i]) add(f, values[i]);
	});
	add("interface", JSON.stringify(prepared.interface), "::jsonb");
	if (prepared.errorMapping)
		add("error_mapping", JSON.stringify(prepared.errorMapping), "::jsonb");
	add("uses_docker", !!spec.docker_image);
	add("trigger_rule_id", ruleId);
	const isPaused = spec.is_paused ?? false;
	const isActive = spec.is_active ?? true;
	add("is_paused", isPaused);
	add("is_active", isActive);
	const [row] = await write<{ id: number }>(
		db,
		`INSERT INTO job_type (${columns.join(", ")}, paused, archived)
		 VALUES (${placeholders.join(", ")},
			${isPaused ? "now()" : "NULL"}, ${isActive ? "NULL" : "now()"})
		 ON CONFLICT (name, version) DO NOTHING RETURNING id`,
		binds,
		t
	);
	// A concurrent create of the same name and version won the race.
	if (!row) throw duplicateType("job type", name, version, opts);
	await write(
		db,
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface)
		 VALUES ($1, 1, $2::jsonb) RETURNING id`,
		[row.id, JSON.stringify(prepared.interface)],
		t
	);
	return { id: row.id, warnings: prepared.warnings };
}

async function editJobType(
	db: Sequelize,
	id: number,
	spec: JobTypeSpec,
	t: Sql,
	opts: SaveOptions
): Promise<{ id: number; warnings: Warning[] }> {
	checkSpecSchema(checkEdit, spec, NAME_RULE, opts.field);
	const [current] = await select<JobTypeRow>(
		db,
		"SELECT * FROM job_type WHERE id = $1 FOR UPDATE",
		[id],
		t
	);
	if (!current) throw new NotFoundError(`No job type with id ${id}`);
	if (!EDITABLE.some(f => has(spec, f))) return { id, warnings: [] };
	if (current.is_system)
		throw new BadRequestError(
			`Job type "${current.name}" is a system job type and cannot be edited`
		);
	const prepared = await prepare(db, spec, current, opts.field, t);
	const ruleId = await applyTriggerRuleChange(db, prepared.currentRule, prepared.ruleChange, t);

	const binds: unknown[] = [id];
	const sets: string[] = [];
	const set = (column: string, value: unknown, cast = "") => {
		binds.push(value);
		sets.push(`${column} = $${binds.length}${cast}`);
	};
	for (const f of PLAIN_FIELDS) if (has(spec, f)) set(f, spec[f] ?? null);
	if (has(spec, "docker_image")) set("uses_docker", !!spec.docker_image);
	if (prepared.interface) set("interface", JSON.stringify(prepared.interface), "::jsonb");
	if (prepared.errorMapping)
		set("error_mapping", JSON.stringify(prepared.errorMapping), "::jsonb");
	set("trigger_rule_id", ruleId);
	if (has(spec, "is_paused")) set("is_paused", spec.is_paused);
	if (has(spec, "is_active")) set("is_active", spec.is_active);
	const paused = stamp(spec.is_paused, current.is_paused, true);
	const archived = stamp(spec.is_active, current.is_active, false);
	if (paused !== "keep") sets.push(`paused = ${paused === "set" ? "now()" : "NULL"}`);
	if (archived !== "keep") sets.push(`archived = ${archived === "set" ? "now()" : "NULL"}`);
	const [row] = await write<{ revision_num: number }>(
		db,
		`UPDATE job_type SET ${sets.join(", ")}, revision_num = revision_num + 1,
			last_modified = now()
		 WHERE id = $1 RETURNING revision_num`,
		binds,
		t
	);
	if (prepared.interface)
		await write(
			db,
			`INSERT INTO job_type_rev (job_type_id, revision_num, interface)
			 VALUES ($1, $2, $3::jsonb) RETURNING id`,
			[id, row.revision_num, JSON.stringify(prepared.interface)],
			t
		);
	return { id, warnings: prepared.warnings };
}
