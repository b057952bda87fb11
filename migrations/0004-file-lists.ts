import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the product list's filters need at millions of rows (is_parsed and the range on
 * last_modified have indexes from 0002): each gives its page in the default order, last_modified,
 * straight from an index, and its capped count from the index alone. The indexes are partial on
 * products, which the list's condition names: 0002's job type index (partial on job_type_id IS
 * NOT NULL, which the planner cannot match with file_type = 'PRODUCT') is replaced by one. A
 * product file name may repeat in every run of a job type, so it takes its order column too;
 * source file names are unique, and 0002's unique index serves them.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(
			`CREATE INDEX scale_file_product_is_operational_idx
			 ON scale_file (is_operational, last_modified) WHERE file_type = 'PRODUCT'`
		);
		await sql(
			`CREATE INDEX scale_file_product_file_name_idx
			 ON scale_file (file_name, last_modified) WHERE file_type = 'PRODUCT'`
		);
		await sql(
			`CREATE INDEX scale_file_product_job_type_id_idx
			 ON scale_file (job_type_id, last_modified) WHERE file_type = 'PRODUCT'`
		);
		await sql(`DROP INDEX scale_file_job_type_id_idx`);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(
			`CREATE INDEX scale_file_job_type_id_idx ON scale_file (job_type_id, last_modified)
			 WHERE job_type_id IS NOT NULL`
		);
		await sql(`DROP INDEX scale_file_product_job_type_id_idx`);
		await sql(`DROP INDEX scale_file_product_file_name_idx`);
		await sql(`DROP INDEX scale_file_product_is_operational_idx`);
	});
};
