import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * GET /job-types/system-failures/ groups the FAILED jobs of SYSTEM errors by job type and error,
 * over all time (as Scale): this partial index, led by the error, gives those groups from the
 * index alone, the SYSTEM errors' entries only (80,000 FAILED jobs of P4's seed: a scan of the
 * jobs' (status, ...) index and their rows before).
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(
		`CREATE INDEX job_failed_error_idx ON job (error_id, job_type_id, last_status_change)
		 WHERE status = 'FAILED'`
	);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`DROP INDEX job_failed_error_idx`);
};
