import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/** The seeds are the SYSTEM errors the service itself records; later code looks them up by name. */
const BUILTIN_ERRORS: [string, string, string, string][] = [
	[
		"unknown",
		"Unknown",
		"SYSTEM",
		"The cause of this failure is unknown. System administrators should investigate it."
	],
	["database", "Database", "SYSTEM", "An error occurred with the database."],
	[
		"database-operation",
		"Database Operation",
		"SYSTEM",
		"A database operation failed (connection limit, unreachable server, deadlock)."
	],
	[
		"filesystem-io",
		"Filesystem IO",
		"SYSTEM",
		"An IO operation on the node's local filesystem failed."
	],
	["nfs", "NFS", "SYSTEM", "A network file system operation failed."],
	[
		"timeout",
		"Timeout",
		"SYSTEM",
		"The job execution ran longer than its job type's timeout and was killed."
	],
	[
		"node-lost",
		"Node Lost",
		"SYSTEM",
		"The node running the job execution was lost (agent disconnected or heartbeat expired)."
	],
	[
		"scheduler-lost",
		"Scheduler Lost",
		"SYSTEM",
		"The scheduler was lost while the job execution was being launched."
	],
	[
		"task-launch",
		"Task Launch",
		"SYSTEM",
		"The node agent failed to launch the job execution's process."
	],
	[
		"docker-task-launch",
		"Docker Task Launch",
		"SYSTEM",
		"The node agent failed to launch the job execution's container; no Docker engine answered or the image could not be run."
	],
	[
		"ingest-failure",
		"Ingest Failure",
		"SYSTEM",
		"A file could not be ingested into its workspace."
	],
	[
		"algorithm-unknown",
		"Algorithm Unknown",
		"ALGORITHM",
		"The algorithm exited with an error its job type does not map to a registered error."
	]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	const sql = (text: string) => qi.sequelize.query(text);
	await sql(`
		CREATE TABLE error (
			id serial PRIMARY KEY,
			name varchar(50) NOT NULL UNIQUE,
			title varchar(50),
			description varchar(250),
			category varchar(50) NOT NULL DEFAULT 'SYSTEM' CHECK (category IN ('SYSTEM', 'ALGORITHM', 'DATA')),
			is_builtin boolean NOT NULL DEFAULT false,
			created timestamptz NOT NULL DEFAULT now(),
			last_modified timestamptz NOT NULL DEFAULT now()
		)`);
	await sql(`CREATE INDEX error_category_idx ON error (category)`);
	await sql(`CREATE INDEX error_last_modified_idx ON error (last_modified)`);
	await sql(`CREATE INDEX error_created_idx ON error (created)`);
	await qi.sequelize.query(
		`INSERT INTO error (name, title, category, description, is_builtin)
		 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS s, (SELECT true) AS b`,
		{
			bind: [0, 1, 2, 3].map(i => BUILTIN_ERRORS.map(e => e[i]))
		}
	);

	await sql(`
		CREATE TABLE workspace (
			id serial PRIMARY KEY,
			name varchar(50) NOT NULL UNIQUE,
			title varchar(50),
			description varchar(500),
			base_url varchar(1000),
			is_active boolean NOT NULL DEFAULT true,
			json_config jsonb NOT NULL,
			is_move_enabled boolean NOT NULL DEFAULT true,
			used_size bigint,
			total_size bigint,
			created timestamptz NOT NULL DEFAULT now(),
			archived timestamptz,
			last_modified timestamptz NOT NULL DEFAULT now()
		)`);
	await sql(`CREATE INDEX workspace_last_modified_idx ON workspace (last_modified)`);
	await sql(`CREATE INDEX workspace_created_idx ON workspace (created)`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`DROP TABLE workspace`);
	await qi.sequelize.query(`DROP TABLE error`);
};
