import type { Sequelize } from "sequelize";
import { CLOCK_PROCESSORS } from "../clock/processors";
import { select, write, type Sql } from "../db/run";
import {
	checkRuleAgainstInputs,
	parseTriggerRule,
	workspaceNameOf,
	type TriggerRuleSpec
} from "../documents/trigger-configuration";
import type { InputEntry, Warning } from "../documents/types";
import { FieldError } from "../errors";
import { formatDatetime } from "../validation/schema";

/**
 * Trigger rules belong to the job type or recipe type whose `trigger_rule_id` names them: they
 * are created, replaced, paused and removed through their owner (Scale's job and recipe views).
 * A replaced or removed rule is archived (is_active false, `archived` set), never deleted, so
 * the events it fired keep their rule.
 */
export interface TriggerRuleRow {
	id: number;
	type: string;
	name: string;
	is_active: boolean;
	configuration: Record<string, unknown>;
	created: Date;
	archived: Date | null;
	last_modified: Date;
}

/** A trigger rule as job type and recipe type details show it. */
export function serializeTriggerRule(row: TriggerRuleRow) {
	return {
		id: row.id,
		type: row.type,
		name: row.name,
		is_active: row.is_active,
		configuration: row.configuration,
		created: formatDatetime(row.created),
		archived: row.archived ? formatDatetime(row.archived) : null,
		last_modified: formatDatetime(row.last_modified)
	};
}

/** A trigger rule as lists show it: a reference, or null. */
export function triggerRuleReference(id: number | null): { id: number } | null {
	return id === null || id === undefined ? null : { id };
}

/** The rule as the configuration export writes it (Scale's ConfigurationTriggerRuleSerializer). */
export function exportTriggerRule(row: TriggerRuleRow) {
	return {
		type: row.type,
		name: row.name,
		is_active: row.is_active,
		configuration: row.configuration
	};
}

/** The rules with the given ids, by id, in one query; ids not found are absent. */
export async function loadTriggerRules(
	db: Sequelize,
	ids: (number | null)[],
	t?: Sql
): Promise<Map<number, TriggerRuleRow>> {
	const wanted = [...new Set(ids.filter((id): id is number => typeof id === "number"))];
	if (wanted.length === 0) return new Map();
	const rows = await select<TriggerRuleRow>(
		db,
		"SELECT * FROM trigger_rule WHERE id = ANY($1::int[])",
		[wanted],
		t
	);
	return new Map(rows.map(row => [row.id, row]));
}

/** Saves a new rule (already parsed and checked) and answers its row. */
export async function createTriggerRule(
	db: Sequelize,
	rule: TriggerRuleSpec,
	t?: Sql
): Promise<TriggerRuleRow> {
	const [row] = await write<TriggerRuleRow>(
		db,
		`INSERT INTO trigger_rule (type, name, is_active, configuration)
		 VALUES ($1, $2, $3, $4::jsonb) RETURNING *`,
		[rule.type, rule.name, rule.is_active, JSON.stringify(rule.configuration)],
		t
	);
	return row;
}

/** Archives a rule: no longer active, `archived` set (an earlier archive time is kept). */
export async function archiveTriggerRule(db: Sequelize, id: number, t?: Sql): Promise<void> {
	await write(
		db,
		`UPDATE trigger_rule SET is_active = false, archived = COALESCE(archived, now()),
			last_modified = now()
		 WHERE id = $1 RETURNING id`,
		[id],
		t
	);
}

/** Pauses (false) or resumes (true) a rule in place. */
export async function setTriggerRuleActive(
	db: Sequelize,
	id: number,
	isActive: boolean,
	t?: Sql
): Promise<void> {
	await write(
		db,
		"UPDATE trigger_rule SET is_active = $2, last_modified = now() WHERE id = $1 RETURNING id",
		[id, isActive],
		t
	);
}

/** What the `trigger_rule` field of a create or edit body asks for. */
export type TriggerRuleChange =
	/** the field is absent: keep the rule as it is */
	| { kind: "keep" }
	/** null or `{}`: remove the rule (Scale treats an empty object the same) */
	| { kind: "remove" }
	/** only `is_active`: pause or resume the current rule in place */
	| { kind: "active"; isActive: boolean }
	/** a whole rule: replace the current one, unless only is_active differs */
	| { kind: "set"; rule: TriggerRuleSpec };

const RULE_FIELDS = ["type", "name", "is_active", "configuration"];

/**
 * Reads the `trigger_rule` field of a body. `present` says whether the body has the field at
 * all. Fields of the rule other than type, name, is_active and configuration are ignored (a
 * client may send back the rule it read, with its id and dates). A rule with no name is named
 * after its owner (`ownerName`), as Scale does; a CLOCK rule's name must be a clock processor.
 * Throws FieldError naming the path at fault.
 */
export function parseTriggerRuleField(
	value: unknown,
	present: boolean,
	ownerName: string,
	field = "trigger_rule"
): TriggerRuleChange {
	if (!present) return { kind: "keep" };
	if (value === null || value === undefined) return { kind: "remove" };
	if (typeof value !== "object" || Array.isArray(value))
		throw new FieldError(field, "must be an object or null");
	const given = value as Record<string, unknown>;
	const hasType = given.type !== undefined;
	const hasConfiguration = given.configuration !== undefined;
	if (hasType !== hasConfiguration)
		throw new FieldError(field, "type and configuration are required together");
	if (!hasType) {
		// Scale removes the rule for an empty object, and ignores one holding neither.
		if (given.is_active === undefined)
			return Object.keys(given).length === 0 ? { kind: "remove" } : { kind: "keep" };
		if (typeof given.is_active !== "boolean")
			throw new FieldError(`${field}.is_active`, "must be boolean");
		return { kind: "active", isActive: given.is_active };
	}
	const picked = Object.fromEntries(
		RULE_FIELDS.filter(key => given[key] !== undefined).map(key => [key, given[key]])
	);
	const rule = parseTriggerRule(picked, { clockProcessors: new Set(CLOCK_PROCESSORS) }, field);
	if (rule.name === "") rule.name = ownerName.slice(0, 50);
	return { kind: "set", rule };
}

/** A stored rule as the spec the document module answers, to check it against new inputs. */
export function ruleSpecOf(row: TriggerRuleRow): TriggerRuleSpec {
	return {
		type: row.type,
		name: row.name,
		is_active: row.is_active,
		configuration: row.configuration
	} as unknown as TriggerRuleSpec;
}

/**
 * Checks a rule against the inputs of the job type's interface or the recipe type's definition
 * it triggers and, for a new rule (`checkWorkspace`), that its workspace exists. Answers the
 * warnings (media types).
 */
export async function checkTriggerRule(
	db: Sequelize,
	rule: TriggerRuleSpec,
	inputs: InputEntry[],
	opts: { field?: string; checkWorkspace?: boolean; t?: Sql } = {}
): Promise<Warning[]> {
	const field = opts.field ?? "trigger_rule";
	const warnings = checkRuleAgainstInputs(rule, inputs, field);
	const workspace = opts.checkWorkspace === false ? null : workspaceNameOf(rule);
	if (workspace !== null) {
		const [found] = await select(
			db,
			"SELECT id FROM workspace WHERE name = $1",
			[workspace],
			opts.t
		);
		if (!found)
			throw new FieldError(
				`${field}.configuration.data.workspace_name`,
				`"${workspace}" is not the name of a workspace`
			);
	}
	return warnings;
}

/** JSON values equal whatever the order of object keys (jsonb does not keep it). */
export function sameJson(a: unknown, b: unknown): boolean {
	if (a === b) return true;
	if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
	if (Array.isArray(a) !== Array.isArray(b)) return false;
	if (Array.isArray(a)) {
		const other = b as unknown[];
		return a.length === other.length && a.every((item, i) => sameJson(item, other[i]));
	}
	const ak = Object.keys(a as object);
	const bk = Object.keys(b as object);
	return (
		ak.length === bk.length &&
		ak.every(
			key =>
				Object.prototype.hasOwnProperty.call(b, key) &&
				sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
		)
	);
}

/**
 * Applies a change to an owner's current rule (null when it has none) and answers the rule id
 * the owner links to afterwards. A whole rule equal to the current one but for is_active pauses
 * or resumes it in place; any other new rule archives the current one and is saved as a new row.
 */
export async function applyTriggerRuleChange(
	db: Sequelize,
	current: TriggerRuleRow | null,
	change: TriggerRuleChange,
	t: Sql
): Promise<number | null> {
	switch (change.kind) {
		case "keep":
			return current?.id ?? null;
		case "remove":
			if (current) await archiveTriggerRule(db, current.id, t);
			return null;
		case "active":
			if (!current) return null;
			if (current.is_active !== change.isActive)
				await setTriggerRuleActive(db, current.id, change.isActive, t);
			return current.id;
		case "set": {
			const { rule } = change;
			if (
				current &&
				current.type === rule.type &&
				current.name === rule.name &&
				sameJson(current.configuration, rule.configuration)
			) {
				if (current.is_active !== rule.is_active)
					await setTriggerRuleActive(db, current.id, rule.is_active, t);
				return current.id;
			}
			if (current) await archiveTriggerRule(db, current.id, t);
			return (await createTriggerRule(db, rule, t)).id;
		}
	}
}
