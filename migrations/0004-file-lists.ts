import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the source and product lists need at millions of rows (docs/decisions.md, "Lists"): each
 * filter with the default order (last_modified, as Scale orders and filters these lists, updates
 * views included) has an index ending in (last_modified, id), the page's whole order, so a page,
 * however deep, is read from the index with no sort, and a capped count from the index alone.
 * They are partial on the file type the list's own condition names. 0002's job type index
 * (partial on job_type_id IS NOT NULL, which the planner cannot match with file_type = 'PRODUCT')
 * is replaced; 0002's file type and is_parsed indexes are widened with the id. A product file name
 * may repeat in every run of a job, so it takes the order columns too; source file names are
 * unique, and 0002's unique index serves them.
 */

/** Indexes: name, columns, predicate, and the columns and predicate 0002 made it with, if it did. */
const FILE_LIST_INDEXES: [string, string, string, [string, string] | null][] = [
	[
		"scale_file_type_last_modified_idx",
		"file_type, last_modified, id",
		"",
		["file_type, last_modified", ""]
	],
	[
		"scale_file_source_is_parsed_idx",
		"is_parsed, last_modified, id",
		"WHERE file_type = 'SOURCE'",
		["is_parsed, last_modified", "WHERE file_type = 'SOURCE'"]
	],
	[
		"scale_file_job_type_id_idx",
		"job_type_id, last_modified, id",
		"WHERE file_type = 'PRODUCT'",
		["job_type_id, last_modified", "WHERE job_type_id IS NOT NULL"]
	],
	[
		"scale_file_product_is_operational_idx",
		"is_operational, last_modified, id",
		"WHERE file_type = 'PRODUCT'",
		null
	],
	[
		"scale_file_product_file_name_idx",
		"file_name, last_modified, id",
		"WHERE file_type = 'PRODUCT'",
		null
	]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, columns, where] of FILE_LIST_INDEXES) {
			await sql(`DROP INDEX IF EXISTS ${name}`);
			await sql(`CREATE INDEX ${name} ON scale_file (${columns}) ${where}`);
		}
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, , , before] of FILE_LIST_INDEXES) {
			await sql(`DROP INDEX ${name}`);
			if (before) await sql(`CREATE INDEX ${name} ON scale_file (${before[0]}) ${before[1]}`);
		}
	});
};
