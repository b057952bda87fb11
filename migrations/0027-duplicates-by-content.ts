import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Duplicates by content (docs/decisions.md, "A duplicate is the same name and the same content"):
 * a source file's name may be reused by a different file. Two source files may share a name when
 * their sizes differ, or their checksums (`checksum`: what the store already knows, an S3 ETag;
 * null where none is cheap, a host file moved by a rename).
 *
 * And an object a strike reads from an S3 bucket's notifications is ingested once: its ingest
 * keeps the object's ETag (`ingest.checksum`), and one ingest per strike, object and ETag may
 * exist, so a notification delivered twice, or redelivered, finds the first.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		ALTER TABLE scale_file ADD COLUMN checksum varchar(100);
		DROP INDEX scale_file_source_file_name_idx;
		CREATE UNIQUE INDEX scale_file_source_content_idx
			ON scale_file (file_name, file_size, (COALESCE(checksum, '')))
			WHERE file_type = 'SOURCE';
		ALTER TABLE ingest ADD COLUMN checksum varchar(100);
		CREATE UNIQUE INDEX ingest_strike_object_idx ON ingest (strike_id, transfer_path, checksum)
			WHERE checksum IS NOT NULL
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		DROP INDEX ingest_strike_object_idx;
		ALTER TABLE ingest DROP COLUMN checksum;
		DROP INDEX scale_file_source_content_idx;
		CREATE UNIQUE INDEX scale_file_source_file_name_idx ON scale_file (file_name)
			WHERE file_type = 'SOURCE';
		ALTER TABLE scale_file DROP COLUMN checksum
	`);
};
