import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Tables analyzed while empty are made "never analyzed" again (docs/decisions.md, "Tables
 * analyzed empty"). Migration 0005 analyzed `job`, `job_exe` and `scale_file` on a new database,
 * before they held a row. PostgreSQL then plans each as the one page it is; a table never
 * analyzed is planned as at least ten pages. The plans of the foreign-key checks, which each
 * backend keeps until the table is analyzed again, were thus scans of the whole table: every
 * queue row written scanned `job_exe`, every ingest stored scanned `scale_file`, as these grew
 * by thousands of rows in the second before autovacuum came by. A database migrated since has
 * no such statistics (0005 no longer analyzes an empty table); one migrated before is mended
 * here. Clearing statistics takes PostgreSQL 18 (`pg_clear_relation_stats`, which the embedded
 * server is); an older server keeps them until autovacuum's next ANALYZE, as before.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	const [[{ version }]] = (await qi.sequelize.query(
		"SELECT current_setting('server_version_num')::int AS version"
	)) as [{ version: number }[], unknown];
	if (version < 180000) return;
	await qi.sequelize.query(`
		SELECT pg_clear_relation_stats(n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.reltuples = 0
			AND c.relpages = 0 AND pg_has_role(c.relowner, 'USAGE')
	`);
};

/** Statistics cleared are not restored: autovacuum gathers them again as rows arrive. */
export const down: MigrationFn<QueryInterface> = async () => undefined;
