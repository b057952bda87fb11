import type { Sequelize } from "sequelize";
import { checkSpecSchema, duplicateType, fieldPath, has, type SaveOptions } from "./type-spec";
import { select, write, type Sql } from "../db/run";
import {
	parseRecipeDefinition,
	referencedJobTypes,
	type RecipeDefinition
} from "../documents/recipe-definition";
import type { JobInterface, Warning } from "../documents/types";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import { compileChecker, type Checker } from "../validation/schema";
import { jobTypeKey, loadJobTypesByKey, serializeJobTypeBase, type JobTypeRow } from "./job-type";
import { JOB_TYPE_NAME, JOB_TYPE_NAME_RULE, JOB_TYPE_VERSION } from "./job-type-save";
import {
	applyTriggerRuleChange,
	checkTriggerRule,
	exportTriggerRule,
	loadTriggerRules,
	parseTriggerRuleField,
	ruleSpecOf,
	serializeTriggerRule,
	triggerRuleReference,
	type TriggerRuleRow
} from "./trigger-rule";

/**
 * Recipe types (Scale 3.0's recipe/models.py RecipeType and RecipeTypeManager, recipe/views.py,
 * recipe/serializers.py): a definition of jobs run in order, and the rule that triggers it.
 * Every edit increments revision_num; a new definition is also written as a recipe_type_rev row
 * with that number, which recipes created afterwards reference.
 */
export interface RecipeTypeRow {
	id: number;
	name: string;
	version: string;
	title: string | null;
	description: string | null;
	is_active: boolean;
	definition: RecipeDefinition;
	revision_num: number;
	trigger_rule_id: number | null;
	created: Date;
	archived: Date | null;
	last_modified: Date;
}

/** A recipe type as listed (Scale's RecipeTypeSerializer): the rule as a reference. */
export function serializeRecipeType(row: RecipeTypeRow) {
	return {
		id: row.id,
		name: row.name,
		version: row.version,
		title: row.title,
		description: row.description,
		is_active: row.is_active,
		definition: row.definition,
		revision_num: row.revision_num,
		created: formatDatetime(row.created),
		last_modified: formatDatetime(row.last_modified),
		archived: row.archived ? formatDatetime(row.archived) : null,
		trigger_rule: triggerRuleReference(row.trigger_rule_id)
	};
}

/**
 * A recipe type's details (Scale's RecipeTypeDetailsSerializer): the whole rule, and the job
 * types the definition uses, each as a summary with its interface.
 */
export function serializeRecipeTypeDetails(
	row: RecipeTypeRow,
	rule: TriggerRuleRow | null,
	jobTypes: JobTypeRow[]
) {
	return Object.assign(serializeRecipeType(row), {
		trigger_rule: rule ? serializeTriggerRule(rule) : null,
		job_types: jobTypes.map(jobType =>
			Object.assign(serializeJobTypeBase(jobType), {
				interface: jobType.interface
			})
		)
	});
}

/** The columns of a recipe type row (RecipeTypeRow). */
export const RECIPE_TYPE_COLUMNS: (keyof RecipeTypeRow)[] = [
	"id",
	"name",
	"version",
	"title",
	"description",
	"is_active",
	"definition",
	"revision_num",
	"trigger_rule_id",
	"created",
	"archived",
	"last_modified"
];

const LIST_FIELDS = RECIPE_TYPE_COLUMNS.filter(f => f !== "definition" && f !== "trigger_rule_id");

export const RECIPE_TYPE_LIST: ListSource = {
	from: "recipe_type",
	columns: "*",
	orderable: Object.fromEntries(LIST_FIELDS.map(f => [f, f])),
	// Scale's RecipeTypesView orders by name, then version, unless told otherwise.
	defaultOrder: ["name", "version"],
	timeColumn: "last_modified",
	filters: {}
};

export async function getRecipeType(db: Sequelize, id: number, t?: Sql): Promise<RecipeTypeRow> {
	const [row] = await select<RecipeTypeRow>(
		db,
		"SELECT * FROM recipe_type WHERE id = $1",
		[id],
		t
	);
	if (!row) throw new NotFoundError(`No recipe type with id ${id}`);
	return row;
}

/** The id of the recipe type with this name and version, or null. */
export async function findRecipeTypeId(
	db: Sequelize,
	name: string,
	version: string,
	t?: Sql
): Promise<number | null> {
	const [row] = await select<{ id: number }>(
		db,
		"SELECT id FROM recipe_type WHERE name = $1 AND version = $2",
		[name, version],
		t
	);
	return row ? row.id : null;
}

/** The job types a definition uses that exist, in the order the definition first names them. */
async function jobTypesOf(
	db: Sequelize,
	definition: unknown,
	t?: Sql,
	lock = false
): Promise<JobTypeRow[]> {
	const keys = referencedJobTypes(definition);
	const rows = new Map(
		(await loadJobTypesByKey(db, keys, t, { lock })).map(row => [
			jobTypeKey(row.name, row.version),
			row
		])
	);
	return keys
		.map(key => rows.get(jobTypeKey(key.name, key.version)))
		.filter((row): row is JobTypeRow => row !== undefined);
}

export async function getRecipeTypeDetails(db: Sequelize, id: number, t?: Sql) {
	const row = await getRecipeType(db, id, t);
	const [rules, jobTypes] = await Promise.all([
		loadTriggerRules(db, [row.trigger_rule_id], t),
		jobTypesOf(db, row.definition, t)
	]);
	const rule = row.trigger_rule_id === null ? null : (rules.get(row.trigger_rule_id) ?? null);
	return serializeRecipeTypeDetails(row, rule, jobTypes);
}

// ---- create, edit, validate -----------------------------------------------------------------

const TITLE = { type: ["string", "null"], maxLength: 50 };
const DESCRIPTION = { type: ["string", "null"], maxLength: 500 };

export const RECIPE_TYPE_FIELDS = {
	title: TITLE,
	description: DESCRIPTION,
	definition: { type: "object" },
	trigger_rule: { type: ["object", "null"] }
};

/** The create body (and the validation body): unknown fields are ignored. */
export const NEW_RECIPE_TYPE_SCHEMA = {
	type: "object",
	required: ["name", "version", "definition"],
	properties: { name: JOB_TYPE_NAME, version: JOB_TYPE_VERSION, ...RECIPE_TYPE_FIELDS }
};

/** The edit body: title, description, definition, trigger_rule; anything else is ignored. */
export const RECIPE_TYPE_EDIT_SCHEMA = { type: "object", properties: RECIPE_TYPE_FIELDS };

const checkNew: Checker = compileChecker(NEW_RECIPE_TYPE_SCHEMA);
const checkEdit: Checker = compileChecker(RECIPE_TYPE_EDIT_SCHEMA);

/** A create body, or (name and version ignored) an edit body, as the client sent it. */
export interface RecipeTypeSpec {
	name?: string;
	version?: string;
	title?: string | null;
	description?: string | null;
	definition?: unknown;
	trigger_rule?: unknown;
	[other: string]: unknown;
}

interface Prepared {
	definition: RecipeDefinition | null;
	ruleChange: ReturnType<typeof parseTriggerRuleField>;
	currentRule: TriggerRuleRow | null;
	warnings: Warning[];
}

/**
 * Checks a body against the current recipe type (null when creating): its definition against
 * the job types it names (loaded in one query, share-locked inside a transaction), and its
 * trigger rule against the definition's inputs and the workspaces. Writes nothing.
 */
async function prepare(
	db: Sequelize,
	spec: RecipeTypeSpec,
	current: RecipeTypeRow | null,
	field: string | undefined,
	t?: Sql
): Promise<Prepared> {
	const at = (name: string) => fieldPath(field, name);
	const warnings: Warning[] = [];
	let definition: RecipeDefinition | null = null;
	if (has(spec, "definition")) {
		const interfaces = new Map(
			(await jobTypesOf(db, spec.definition, t, t !== undefined)).map(row => [
				jobTypeKey(row.name, row.version),
				row.interface as JobInterface
			])
		);
		const parsed = parseRecipeDefinition(
			spec.definition,
			(name, version) => interfaces.get(jobTypeKey(name, version)) ?? null,
			at("definition")
		);
		definition = parsed.definition;
		warnings.push(...parsed.warnings);
	}
	const ruleChange = parseTriggerRuleField(
		spec.trigger_rule,
		has(spec, "trigger_rule"),
		current ? current.name : (spec.name as string),
		at("trigger_rule")
	);
	const currentRule =
		current && current.trigger_rule_id !== null
			? ((await loadTriggerRules(db, [current.trigger_rule_id], t)).get(
					current.trigger_rule_id
				) ?? null)
			: null;
	const inputs = (definition ?? (current?.definition as RecipeDefinition)).input_data;
	if (ruleChange.kind === "set") {
		warnings.push(
			...(await checkTriggerRule(db, ruleChange.rule, inputs, {
				field: at("trigger_rule"),
				t
			}))
		);
	} else if (definition && currentRule && ruleChange.kind !== "remove") {
		// The rule stays: it must still fit the new definition.
		warnings.push(
			...(await checkTriggerRule(db, ruleSpecOf(currentRule), inputs, {
				field: at("trigger_rule"),
				checkWorkspace: false,
				t
			}))
		);
	}
	return { definition, ruleChange, currentRule, warnings };
}

/**
 * Checks a recipe type about to be created (a create body) and saves nothing. Answers the
 * warnings (media types the definition's connections or the trigger rule pass that an input
 * does not accept). Throws FieldError (400) naming the field at fault.
 */
export async function validateRecipeType(
	db: Sequelize,
	spec: RecipeTypeSpec,
	opts: { field?: string; t?: Sql } = {}
): Promise<Warning[]> {
	checkSpecSchema(checkNew, spec, JOB_TYPE_NAME_RULE, opts.field);
	return (await prepare(db, spec, null, opts.field, opts.t)).warnings;
}

/**
 * Creates a recipe type from a create body (title defaults to the name, as in Scale), or (with
 * `existingId`) edits its title, description, definition and trigger rule as the body carries
 * them, in the caller's transaction `t`. Answers the id and the warnings (which do not stop the
 * save). Throws FieldError (400) for a bad field or document and for a name and version already
 * taken, NotFoundError (404) for an unknown `existingId`; nothing is written then.
 *
 * A create writes revision 1 of the definition. An edit with at least one of those fields
 * increments revision_num; a new definition is written as a recipe_type_rev row with that
 * number. Trigger rules change as for job types (see saveJobType).
 */
export async function saveRecipeType(
	db: Sequelize,
	spec: RecipeTypeSpec,
	t: Sql,
	opts: SaveOptions = {}
): Promise<{ id: number; warnings: Warning[] }> {
	if (opts.existingId !== undefined) return editRecipeType(db, opts.existingId, spec, t, opts);

	checkSpecSchema(checkNew, spec, JOB_TYPE_NAME_RULE, opts.field);
	const name = spec.name as string;
	const version = spec.version as string;
	if ((await findRecipeTypeId(db, name, version, t)) !== null)
		throw duplicateType("recipe type", name, version, opts);
	const prepared = await prepare(db, spec, null, opts.field, t);
	const ruleId = await applyTriggerRuleChange(db, null, prepared.ruleChange, t);
	const definition = JSON.stringify(prepared.definition);
	const [row] = await write<{ id: number }>(
		db,
		`INSERT INTO recipe_type (name, version, title, description, definition, trigger_rule_id)
		 VALUES ($1, $2, $3, $4, $5::jsonb, $6)
		 ON CONFLICT (name, version) DO NOTHING RETURNING id`,
		[
			name,
			version,
			has(spec, "title") ? spec.title : name,
			spec.description ?? null,
			definition,
			ruleId
		],
		t
	);
	// A concurrent create of the same name and version won the race.
	if (!row) throw duplicateType("recipe type", name, version, opts);
	await write(
		db,
		`INSERT INTO recipe_type_rev (recipe_type_id, revision_num, definition)
		 VALUES ($1, 1, $2::jsonb) RETURNING id`,
		[row.id, definition],
		t
	);
	return { id: row.id, warnings: prepared.warnings };
}

async function editRecipeType(
	db: Sequelize,
	id: number,
	spec: RecipeTypeSpec,
	t: Sql,
	opts: SaveOptions
): Promise<{ id: number; warnings: Warning[] }> {
	checkSpecSchema(checkEdit, spec, JOB_TYPE_NAME_RULE, opts.field);
	const [current] = await select<RecipeTypeRow>(
		db,
		"SELECT * FROM recipe_type WHERE id = $1 FOR UPDATE",
		[id],
		t
	);
	if (!current) throw new NotFoundError(`No recipe type with id ${id}`);
	if (!Object.keys(RECIPE_TYPE_FIELDS).some(f => has(spec, f))) return { id, warnings: [] };
	const prepared = await prepare(db, spec, current, opts.field, t);
	const ruleId = await applyTriggerRuleChange(db, prepared.currentRule, prepared.ruleChange, t);
	const [row] = await write<{ revision_num: number }>(
		db,
		`UPDATE recipe_type SET
			title = CASE WHEN $2::boolean THEN $3 ELSE title END,
			description = CASE WHEN $4::boolean THEN $5 ELSE description END,
			definition = COALESCE($6::jsonb, definition),
			trigger_rule_id = $7,
			revision_num = revision_num + 1,
			last_modified = now()
		 WHERE id = $1 RETURNING revision_num`,
		[
			id,
			has(spec, "title"),
			spec.title ?? null,
			has(spec, "description"),
			spec.description ?? null,
			prepared.definition ? JSON.stringify(prepared.definition) : null,
			ruleId
		],
		t
	);
	if (prepared.definition)
		await write(
			db,
			`INSERT INTO recipe_type_rev (recipe_type_id, revision_num, definition)
			 VALUES ($1, $2, $3::jsonb) RETURNING id`,
			[id, row.revision_num, JSON.stringify(prepared.definition)],
			t
		);
	return { id, warnings: prepared.warnings };
}

// ---- configuration export -------------------------------------------------------------------

export interface RecipeTypeExportFilter {
	ids?: number[];
	names?: string[];
}

/**
 * The recipe types as the configuration export writes them (Scale's
 * ConfigurationRecipeTypeSerializer: name, version, title, description, definition,
 * trigger_rule as {type, name, is_active, configuration} or null), ordered by name and version.
 * Each filter given (even empty) must match; filters left undefined match all.
 */
export async function exportRecipeTypes(
	db: Sequelize,
	filter: RecipeTypeExportFilter = {},
	t?: Sql
): Promise<object[]> {
	const rows = await select<RecipeTypeRow>(
		db,
		`SELECT * FROM recipe_type
		 WHERE ($1::int[] IS NULL OR id = ANY($1::int[]))
			AND ($2::text[] IS NULL OR name = ANY($2::text[]))
		 ORDER BY name, version, id`,
		[filter.ids ?? null, filter.names ?? null],
		t
	);
	const rules = await loadTriggerRules(
		db,
		rows.map(r => r.trigger_rule_id),
		t
	);
	return rows.map(row => {
		const rule = row.trigger_rule_id === null ? undefined : rules.get(row.trigger_rule_id);
		return {
			name: row.name,
			version: row.version,
			title: row.title,
			description: row.description,
			definition: row.definition,
			trigger_rule: rule ? exportTriggerRule(rule) : null
		};
	});
}
