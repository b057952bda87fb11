import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Scans (Scale 5.0's Scan, docs/decisions.md "A scan walks in the control plane"): a walk of a
 * workspace that ingests the files already there. `resume_after` is the last key (or path) whose
 * page was recorded: a scan whose walker died resumes after it; `owner` and `lease_until` say
 * which control plane walks it now. Its ingests name it (`ingest.scan_id`) instead of a strike,
 * one per scan, object and checksum, so a page walked again makes no second ingest.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		CREATE TABLE scan (
			id serial PRIMARY KEY,
			name varchar(50) NOT NULL UNIQUE,
			title varchar(50),
			description varchar(500),
			configuration jsonb NOT NULL,
			status varchar(20) NOT NULL DEFAULT 'CREATED'
				CHECK (status IN ('CREATED', 'RUNNING', 'COMPLETED', 'FAILED')),
			dry_run boolean NOT NULL DEFAULT true,
			file_count bigint,
			files_scanned bigint NOT NULL DEFAULT 0,
			files_ingested bigint NOT NULL DEFAULT 0,
			resume_after text,
			owner varchar(255),
			lease_until timestamptz,
			started timestamptz,
			ended timestamptz,
			error text,
			created timestamptz NOT NULL DEFAULT now(),
			last_modified timestamptz NOT NULL DEFAULT now()
		);
		ALTER TABLE ingest
			ALTER COLUMN strike_id DROP NOT NULL,
			ADD COLUMN scan_id integer REFERENCES scan (id) ON DELETE RESTRICT,
			ADD CONSTRAINT ingest_origin_check CHECK ((strike_id IS NULL) <> (scan_id IS NULL));
		CREATE UNIQUE INDEX ingest_scan_object_idx ON ingest (scan_id, transfer_path, checksum)
			WHERE checksum IS NOT NULL
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		DROP INDEX ingest_scan_object_idx;
		ALTER TABLE ingest DROP CONSTRAINT ingest_origin_check, DROP COLUMN scan_id,
			ALTER COLUMN strike_id SET NOT NULL;
		DROP TABLE scan
	`);
};
