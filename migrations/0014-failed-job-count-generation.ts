import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * A generation (migration 0011) for `failed_job_count`, raised by every fold of the FAILED job
 * deltas (migration 0013). Between two folds the deltas are only ever added to, so the
 * generation and the number of deltas name the FAILED jobs' state exactly: GET
 * /job-types/system-failures/ keeps its answer while both (and the job types' and errors'
 * generations) are unchanged (lib/models/job-type-reports.ts).
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		INSERT INTO list_generation (name) VALUES ('failed_job_count');
		CREATE TRIGGER failed_job_count_list_generation
			AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON failed_job_count
			FOR EACH STATEMENT EXECUTE FUNCTION bump_list_generation();
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		DROP TRIGGER failed_job_count_list_generation ON failed_job_count;
		DELETE FROM list_generation WHERE name = 'failed_job_count';
	`);
};
