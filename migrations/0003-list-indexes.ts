import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the lists need at millions of rows (docs/decisions.md, "Lists"): an execution carries
 * its job's type, so the executions list filters by job type on its own index instead of
 * joining a million jobs; every filter with the list's default order has an index ending in
 * (time column, id), the page's whole order, so a page (however deep) is read from the index
 * alone, with no sort; the job updates list gets those for its own time column.
 */

/** Indexes: table, name, columns, and whether 0002 made it (without the id), so it is widened. */
const LIST_INDEXES: [string, string, string[], boolean][] = [
	["job", "job_last_modified_idx", ["last_modified", "id"], true],
	["job", "job_status_last_modified_idx", ["status", "last_modified", "id"], true],
	["job", "job_job_type_id_last_modified_idx", ["job_type_id", "last_modified", "id"], true],
	["job", "job_last_status_change_idx", ["last_status_change", "id"], true],
	["job", "job_status_last_status_change_idx", ["status", "last_status_change", "id"], false],
	[
		"job",
		"job_job_type_id_last_status_change_idx",
		["job_type_id", "last_status_change", "id"],
		false
	],
	["job_exe", "job_exe_last_modified_idx", ["last_modified", "id"], true],
	["job_exe", "job_exe_status_last_modified_idx", ["status", "last_modified", "id"], true],
	["job_exe", "job_exe_node_id_last_modified_idx", ["node_id", "last_modified", "id"], true],
	[
		"job_exe",
		"job_exe_job_type_id_last_modified_idx",
		["job_type_id", "last_modified", "id"],
		false
	]
];
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
		for (const [table, name, columns] of LIST_INDEXES) {
			await sql(`DROP INDEX IF EXISTS ${name}`);
			await sql(`CREATE INDEX ${name} ON ${table} (${columns.join(", ")})`);
		}
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [table, name, columns, widened] of LIST_INDEXES) {
			await sql(`DROP INDEX ${name}`);
			if (widened)
				await sql(`CREATE INDEX ${name} ON ${table} (${columns.slice(0, -1).join(", ")})`);
		}
		await sql(`ALTER TABLE job_exe DROP COLUMN job_type_id`);
	});
};
