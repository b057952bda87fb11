import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the ingest list needs at 100,000+ ingests (docs/decisions.md, "Lists"): each filter
 * (status, strike_id, file_name) with the default order (last_modified, as Scale orders and
 * filters the list) has an index ending in (last_modified, id), the page's whole order, so a page
 * however deep is read from the index with no sort; 0002's indexes are widened. Scale's web UI
 * orders by -ingest_started, which gets its own (ingest_started, id). The status view reads
 * 0002's (status, ingest_ended) and scale_file (data_started) indexes.
 */

/** Indexes: name, columns, and the columns 0002 made it with, if it did. */
const INGEST_LIST_INDEXES: [string, string, string | null][] = [
	["ingest_last_modified_idx", "last_modified, id", "last_modified"],
	["ingest_status_last_modified_idx", "status, last_modified, id", "status, last_modified"],
	["ingest_strike_id_idx", "strike_id, last_modified, id", "strike_id"],
	["ingest_file_name_idx", "file_name, last_modified, id", "file_name"],
	["ingest_ingest_started_idx", "ingest_started, id", null]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, columns] of INGEST_LIST_INDEXES) {
			await sql(`DROP INDEX IF EXISTS ${name}`);
			await sql(`CREATE INDEX ${name} ON ingest (${columns})`);
		}
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, , before] of INGEST_LIST_INDEXES) {
			await sql(`DROP INDEX ${name}`);
			if (before) await sql(`CREATE INDEX ${name} ON ingest (${before})`);
		}
	});
};
