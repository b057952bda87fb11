import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * A kept list record's version is its row's `last_modified` instead of its `xmin`
 * (docs/decisions.md, "Lists"): the list indexes hold it, so a page's keys and versions come off
 * the index the page is chosen from, without reading each row (the `xmin` took a second lookup
 * of every row on the page: ~60% of PostgreSQL's time for a page of jobs by status).
 *
 * For that, every UPDATE of a job, execution or file must change `last_modified`, whoever writes
 * it, as every UPDATE changed `xmin`: a trigger sets it when an UPDATE leaves it as it was. It
 * runs only then (the WHEN is tested without calling it); the service's own updates set
 * `last_modified = now()` and do not call it, unless one transaction updates a row twice.
 * Strictly after the old value, so it differs even when the clock has not moved. An UPDATE that
 * sets another value keeps it (tests and operators backdate rows).
 *
 * The indexes whose lists show a column they lack take it as an INCLUDE: the job updates list's
 * (ordered by last_status_change) the `last_modified`, the execution lists' the `job_id` and
 * `node_id` their records' version joins read. Writes pay a few bytes: these rows' updates are
 * never HOT (their `last_modified` is in other indexes), so every index gets a new entry anyway.
 */

const TABLES = ["job", "job_exe", "scale_file"];

/** Indexes: table, name, columns, the INCLUDE added. */
const INDEXES: [string, string, string, string][] = [
	["job", "job_last_status_change_idx", "last_status_change, id", "last_modified"],
	["job", "job_status_last_status_change_idx", "status, last_status_change, id", "last_modified"],
	[
		"job",
		"job_job_type_id_last_status_change_idx",
		"job_type_id, last_status_change, id",
		"last_modified"
	],
	["job_exe", "job_exe_last_modified_idx", "last_modified, id", "job_id, node_id"],
	["job_exe", "job_exe_status_last_modified_idx", "status, last_modified, id", "job_id, node_id"],
	["job_exe", "job_exe_node_id_last_modified_idx", "node_id, last_modified, id", "job_id"],
	[
		"job_exe",
		"job_exe_job_type_id_last_modified_idx",
		"job_type_id, last_modified, id",
		"job_id, node_id"
	]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`
			CREATE FUNCTION last_modified_changes() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				NEW.last_modified := greatest(clock_timestamp(),
					OLD.last_modified + interval '1 microsecond');
				RETURN NEW;
			END $$`);
		for (const table of TABLES) {
			await sql(`
				CREATE TRIGGER ${table}_last_modified_changes BEFORE UPDATE ON ${table}
				FOR EACH ROW WHEN (NEW.last_modified IS NOT DISTINCT FROM OLD.last_modified)
				EXECUTE FUNCTION last_modified_changes()`);
		}
		for (const [table, name, columns, include] of INDEXES) {
			await sql(`DROP INDEX ${name}`);
			await sql(`CREATE INDEX ${name} ON ${table} (${columns}) INCLUDE (${include})`);
		}
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [table, name, columns] of INDEXES) {
			await sql(`DROP INDEX ${name}`);
			await sql(`CREATE INDEX ${name} ON ${table} (${columns})`);
		}
		for (const table of TABLES)
			await sql(`DROP TRIGGER ${table}_last_modified_changes ON ${table}`);
		await sql(`DROP FUNCTION last_modified_changes()`);
	});
};
