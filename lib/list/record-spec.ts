import type { ListSource } from "./types";

/**
 * What a kind of kept record of the lists (lib/list/cached-list.ts) is made from and when it is
 * current: its spec and its version.
 */

/** How a list's records are made and when they are current. */
export interface RecordSpec<Row> {
	/** names this kind of record in the cache (a list and its updates view differ) */
	name: string;
	/**
	 * SQL text over the list's `from` and `versionJoins` that changes whenever anything the
	 * record shows changes: the `last_modified` of the list's own row (every UPDATE changes it:
	 * migration 0016; the list's indexes hold it, so the page reads it there) or the `xmin` of
	 * another row it shows columns of. Of any type: it is compared as PostgreSQL writes it in
	 * JSON (a timestamp so costs less than as text, which JSON then escapes character by
	 * character: a page of product updates, alone, 470 → 423 µs of PostgreSQL's CPU).
	 */
	version: string;
	/** the joins `version` reads */
	versionJoins: string;
	/**
	 * The small tables whose rows the record embeds, by their generation (migration 0011: raised
	 * by any change to the table; for nodes, 0017, by a change of what records show of them)
	 * rather than their rows' `xmin`s, read once per statement
	 */
	generations?: ("job_type" | "error" | "workspace" | "node")[];
	/** whether a record depends on the call's API root (download URLs) */
	byApiRoot?: boolean;
	/** the record of a row read with the list's columns */
	record(row: Row, apiRoot: string | undefined): unknown;
	/** ids of the records it embeds that are read apart, kept with it (a job's input files) */
	refs?(row: Row): number[];
}

/** The SQL of a record's generations part (see versionOf). */
export function generationsSql(spec: Pick<RecordSpec<unknown>, "generations">): string {
	const names = spec.generations ?? [];
	return names.length === 0
		? "''"
		: `(SELECT string_agg(generation::text, '.' ORDER BY name) FROM list_generation
				WHERE name IN (${names.map(n => `'${n}'`).join(", ")}))`;
}

/**
 * The SELECT items of a record's version (see versionOf) where records are read whole: its rows'
 * part as text that is the same as a page statement's JSON holds it (`json_build_array(key,
 * version)`, parsed), whatever its type, and its generations.
 */
export function versionSelect(spec: Pick<RecordSpec<unknown>, "version" | "generations">): string {
	return `to_json(${spec.version}) #>> '{}' AS __version, ${generationsSql(spec)} AS __generation`;
}

/** A record's version from a row read with versionSelect's items. */
export function versionOf(row: { __version: string; __generation: string }): string {
	return `${row.__version}|${row.__generation}`;
}

/** Where a kind of record is read whole: a list's table, joins, key and columns. */
export type RecordSource = Pick<ListSource, "from" | "joins" | "key" | "columns">;
