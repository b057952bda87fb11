import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { serializeError, type ErrorRow } from "./error";
import { JOB_TYPE_BASE_FIELDS, jobTypeBaseOf, type JobTypeBaseColumns } from "./job";

/**
 * The records of a small table (job types, errors) as the reports embed them, each as JSON text,
 * kept per database with the table's generation (migration 0011: raised in the transaction of
 * any change to the table). A report reads the generation in its own statement, beside its
 * counts, and takes the records kept at that generation: its statement then reads ids and
 * numbers only, and the service serializes tens of records once per change instead of at every
 * request (the job type reports read 14 columns of every job type and serialized them, ~1 ms of
 * PostgreSQL's and the service's time per request).
 */

export interface KeptRecord<Row> {
	row: Row;
	json: string;
}

export interface KeptRecords<Row> {
	generation: string;
	/** by the table's order (job types: last_modified, then id) */
	ordered: KeptRecord<Row>[];
	byId: Map<number, KeptRecord<Row>>;
}

interface TableSpec<Row> {
	table: "job_type" | "error";
	/** every row, in order, with `__generation` */
	sql: string;
	id(row: Row): number;
	record(row: Row): unknown;
}

/** The select item of a table's generation, as text, for a report's own statement. */
export const generationOf = (table: "job_type" | "error") =>
	`(SELECT generation::text FROM list_generation WHERE name = '${table}')`;

const kept = new WeakMap<Sequelize, Map<string, KeptRecords<unknown>>>();

async function keptAt<Row>(
	db: Sequelize,
	spec: TableSpec<Row>,
	generation: string
): Promise<KeptRecords<Row>> {
	let tables = kept.get(db);
	if (tables === undefined) kept.set(db, (tables = new Map()));
	const found = tables.get(spec.table) as KeptRecords<Row> | undefined;
	if (found !== undefined && found.generation === generation) return found;
	// Read with the generation they are at, which may be newer than the report's: a record is
	// never older than the report's statement.
	const rows = await selectPrepared<Row & { __generation: string }>(db, spec.sql);
	const records: KeptRecords<Row> = {
		generation: rows.length > 0 ? rows[0].__generation : generation,
		ordered: [],
		byId: new Map()
	};
	for (const row of rows) {
		delete (row as { __generation?: string }).__generation;
		const record = { row, json: JSON.stringify(spec.record(row)) };
		records.ordered.push(record);
		records.byId.set(spec.id(row), record);
	}
	tables.set(spec.table, records as KeptRecords<unknown>);
	return records;
}

const JOB_TYPES: TableSpec<JobTypeBaseColumns> = {
	table: "job_type",
	sql: `SELECT jt.id AS job_type_id, ${JOB_TYPE_BASE_FIELDS.filter(f => f !== "id")
		.map(f => `jt.${f} AS jt_${f}`)
		.join(", ")}, ${generationOf("job_type")} AS __generation
		FROM job_type jt ORDER BY jt.last_modified, jt.id`,
	id: row => row.job_type_id,
	record: jobTypeBaseOf
};

const ERRORS: TableSpec<ErrorRow> = {
	table: "error",
	sql: `SELECT id, name, title, description, category, is_builtin, created, last_modified,
		${generationOf("error")} AS __generation
		FROM error ORDER BY id`,
	id: row => row.id,
	record: serializeError
};

/** Every job type as job records show it (Scale's JobTypeBaseSerializer), at `generation`. */
export function jobTypesAt(
	db: Sequelize,
	generation: string
): Promise<KeptRecords<JobTypeBaseColumns>> {
	return keptAt(db, JOB_TYPES, generation);
}

/** Every error as the error list shows it, at `generation`. */
export function errorsAt(db: Sequelize, generation: string): Promise<KeptRecords<ErrorRow>> {
	return keptAt(db, ERRORS, generation);
}
