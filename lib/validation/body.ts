import type { Warning } from "../documents/types";

/**
 * Create and edit bodies: a field the body does not take is a 400 naming it (every such field at
 * once), so a typo (`cpus_requried`) is never saved as a default; the read-only fields of the
 * record's own answer (ids, dates, counts), which Scale's exports and samples carry, are accepted,
 * left out, and named in warnings as configuration import names them.
 */

/** Marks a params schema as a create or edit body; its value lists the read-only fields. */
export const BODY_SCHEMA = "$$body";

/**
 * Marks an integer property Scale 3.0 read with `parse_int`: a string of digits ("2") stands for
 * the number, as there.
 */
export const PARSE_INT = "x-parse-int";

/** Where the checker leaves the read-only fields it took out of a body (lib/validation/schema). */
export const READ_ONLY_GIVEN = Symbol("read-only fields given");

/** A body's params schema: `schema`'s properties and nothing else, bar the `readOnly` fields. */
export function bodyParams<T extends { type: string }>(
	schema: T,
	readOnly: readonly string[] = []
): T & { [BODY_SCHEMA]: readonly string[] } {
	return { ...schema, [BODY_SCHEMA]: readOnly };
}

/** An integer schema whose value may be given as a string of digits (PARSE_INT). */
export function parseIntSchema<T extends object>(schema: T): T & { [PARSE_INT]: true } {
	return { ...schema, [PARSE_INT]: true };
}

/** `answer` with `warnings` beside its fields when there are any (a create or edit answer). */
export function withWarnings<T extends object>(answer: T, warnings: Warning[]): T {
	return warnings.length > 0 ? { ...answer, warnings } : answer;
}

/** The `read-only` warnings for the read-only fields a body carried, naming each. */
export function readOnlyWarnings(params: object, what: string): Warning[] {
	const given = (params as { [READ_ONLY_GIVEN]?: string[] })[READ_ONLY_GIVEN] ?? [];
	return given.map(field => ({
		id: "read-only",
		details: `${what[0].toUpperCase()}${what.slice(1)} includes read-only field ${field}, ignored`
	}));
}
