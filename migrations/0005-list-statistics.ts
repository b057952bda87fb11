import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Statistics of columns that go together, for the estimated counts of large lists
 * (docs/decisions.md, "Lists"): the planner takes columns as independent, so on sources
 * (`file_type = 'SOURCE'`) it read `is_parsed = true` as rare because products are never parsed,
 * and estimated a quarter of the parsed sources; with the columns' common combinations it is
 * within a few percent. Likewise a product's flags and job type, and a job's status and type.
 */
const STATISTICS: [string, string, string][] = [
	["scale_file_type_parsed_stats", "scale_file", "file_type, is_parsed"],
	["scale_file_type_operational_stats", "scale_file", "file_type, is_operational"],
	["scale_file_type_job_type_stats", "scale_file", "file_type, job_type_id"],
	["job_status_job_type_stats", "job", "status, job_type_id"],
	["job_exe_status_job_type_stats", "job_exe", "status, job_type_id"]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, table, columns] of STATISTICS)
			await sql(`CREATE STATISTICS ${name} (mcv) ON ${columns} FROM ${table}`);
	});
	// Outside the transaction: statistics are gathered by ANALYZE (autovacuum would, later).
	// Not on an empty table: one analyzed empty is planned as tiny until autovacuum analyzes it
	// again (migration 0018 says what that cost).
	for (const table of new Set(STATISTICS.map(([, t]) => t))) {
		const [[{ empty }]] = (await qi.sequelize.query(
			`SELECT NOT EXISTS (SELECT 1 FROM ${table}) AS empty`
		)) as [{ empty: boolean }[], unknown];
		if (!empty) await qi.sequelize.query(`ANALYZE ${table}`);
	}
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	for (const [name] of STATISTICS) await qi.sequelize.query(`DROP STATISTICS ${name}`);
};
