import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * No planner statistics for the columns no statement filters, joins or orders on: documents
 * (JSON), paths, messages and lists of types (docs/decisions.md, "Statistics nobody reads").
 * ANALYZE sorts every column of its sample to find its common values and histogram; on the
 * tables a burst of ingests fills (ingests, files, events, jobs, executions) autovacuum analyzes
 * each within a second of its growing by a tenth, and these columns' sorts (JSON compared key by
 * key, long strings) were most of that work: a fifth of PostgreSQL's CPU during P5's burst B.
 * Filters, keys and times keep their statistics (and a product's `uuid`, by which the products it
 * supersedes are found).
 */
export const COLUMNS_WITHOUT_STATISTICS: Record<string, string[]> = {
	ingest: ["transfer_path", "media_type", "data_type", "file_path", "ingest_path", "error"],
	job: ["data", "results"],
	job_exe: ["command_arguments", "environment", "results", "results_manifest"],
	scale_file: [
		"file_path",
		"media_type",
		"data_type",
		"geometry",
		"center_point",
		"meta_data",
		"countries"
	],
	trigger_event: ["description"],
	recipe: ["data"]
};

const alter = (target: number) =>
	Object.entries(COLUMNS_WITHOUT_STATISTICS).map(
		([table, columns]) =>
			`ALTER TABLE ${table} ${columns.map(c => `ALTER COLUMN ${c} SET STATISTICS ${target}`).join(", ")}`
	);

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	for (const sql of alter(0)) await qi.sequelize.query(sql);
};

/** Back to the server's default_statistics_target. */
export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	for (const sql of alter(-1)) await qi.sequelize.query(sql);
};
