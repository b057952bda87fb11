import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * The queue by job type, in claim order: when job types are paused or at max_scheduled, the
 * scheduler reads the head of each other type's queue (lib/scheduling/claim.ts) instead of
 * stepping over the excluded types' rows in the claim index. Replaces 0002's (job_type_id).
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`DROP INDEX IF EXISTS queue_job_type_id_idx`);
		await sql(
			`CREATE INDEX queue_job_type_id_idx ON queue (job_type_id, priority, queued, id)`
		);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`DROP INDEX queue_job_type_id_idx`);
		await sql(`CREATE INDEX queue_job_type_id_idx ON queue (job_type_id)`);
	});
};
