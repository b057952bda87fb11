import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the lists need at millions of rows (docs/decisions.md, "Lists"): an execution carries
 * its job's type, so the executions list filters by job type on its own index instead of
 * joining a million jobs; the job updates list has indexes for its filters on its time column.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`ALTER TABLE job_exe ADD COLUMN job_type_id integer`);
		await sql(
			`UPDATE job_exe x SET job_type_id = j.job_type_id FROM job j WHERE j.id = x.job_id`
		);
		await sql(`ALTER TABLE job_exe ALTER COLUMN job_type_id SET NOT NULL`);
		await sql(
			`ALTER TABLE job_exe ADD CONSTRAINT job_exe_job_type_id_fkey FOREIGN KEY (job_type_id)
			 REFERENCES job_type (id) ON DELETE RESTRICT`
		);
		await sql(
			`CREATE INDEX job_exe_job_type_id_last_modified_idx ON job_exe (job_type_id, last_modified)`
		);
		await sql(
			`CREATE INDEX job_status_last_status_change_idx ON job (status, last_status_change)`
		);
		await sql(
			`CREATE INDEX job_job_type_id_last_status_change_idx ON job (job_type_id, last_status_change)`
		);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`DROP INDEX job_job_type_id_last_status_change_idx`);
		await sql(`DROP INDEX job_status_last_status_change_idx`);
		await sql(`ALTER TABLE job_exe DROP COLUMN job_type_id`);
	});
};
