import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Generations (migration 0011) for the daily metrics tables and strikes: the metrics tables are
 * written only by the daily computation, so a plot-data answer is kept until the tables it reads
 * (its metrics table and its choices' table) change (lib/metrics/plot.ts).
 */
const TABLES = ["metrics_job_type", "metrics_ingest", "metrics_error", "strike"];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(
		`INSERT INTO list_generation (name) VALUES ${TABLES.map(t => `('${t}')`).join(", ")};
		${TABLES.map(
			t => `CREATE TRIGGER ${t}_list_generation
			AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t}
			FOR EACH STATEMENT EXECUTE FUNCTION bump_list_generation();`
		).join("\n")}`
	);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(
		`${TABLES.map(t => `DROP TRIGGER ${t}_list_generation ON ${t};`).join("\n")}
		DELETE FROM list_generation WHERE name IN (${TABLES.map(t => `'${t}'`).join(", ")});`
	);
};
