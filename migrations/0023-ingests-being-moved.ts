import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * `ingest_move`: the files a strike's monitor has been told to move into a workspace and has not
 * reported stored yet (docs/decisions.md, "Strike", "One write per file that arrives
 * whole"). Each row is
 * the record a monitor that dies mid-move finds again: the file's name, its target and what its
 * ingest row will say. Its `id` is the ingest's, drawn from `ingest_id_seq` when the move is
 * decided; the settle writes the ingest row (INGESTED, or what became of the file) with that id
 * and deletes this one, in one transaction.
 *
 * Before, that record was the ingest row itself, written INGESTING and then rewritten INGESTED:
 * two versions of a row with nine indexes for every file. This table has two: its key, and its
 * file name.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(
			`CREATE TABLE ingest_move (
				id integer PRIMARY KEY,
				strike_id integer NOT NULL,
				file_name varchar(250) NOT NULL,
				transfer_path varchar(1000),
				file_size bigint NOT NULL,
				transfer_started timestamptz,
				transfer_ended timestamptz,
				media_type varchar(250),
				data_type text[] NOT NULL DEFAULT '{}',
				workspace_id integer NOT NULL,
				file_path varchar(1000) NOT NULL,
				ingest_path varchar(1000),
				ingest_started timestamptz NOT NULL DEFAULT now()
			)`
		);
		// One move per file name: a name another strike is moving is a DUPLICATE to the others.
		// The strike is not a column of the index: statements that look a move up by id and
		// check its strike were planned, on this often nearly empty table, as a scan of the index
		// on (file_name, strike_id) for the strike, skipping through the names, once per id.
		await sql(`CREATE UNIQUE INDEX ingest_move_file_name_idx ON ingest_move (file_name)`);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	// the moves under way go back to being INGESTING ingests, as they were recorded before
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(
			`INSERT INTO ingest (id, file_name, strike_id, status, transfer_path, bytes_transferred,
				transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
				workspace_id, ingest_path, ingest_started)
			 SELECT id, file_name, strike_id, 'INGESTING', transfer_path, file_size,
				transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
				workspace_id, ingest_path, ingest_started
			 FROM ingest_move`
		);
		await sql(`DROP TABLE ingest_move`);
	});
};
