import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * A generation for each small table whose rows the list records embed (job types, errors,
 * workspaces), raised by any statement that changes the table, in its transaction. A list record
 * is current while its own rows' `xmin`s and these generations are unchanged
 * (lib/list/cached-list.ts): reading three numbers once per page costs PostgreSQL less than
 * joining each record to its job type and error for their `xmin`s (~0.2–0.3 ms of ~0.6–0.8 ms
 * per page of jobs). These tables change only when an operator edits them.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		CREATE TABLE list_generation (
			name text PRIMARY KEY,
			generation bigint NOT NULL DEFAULT 0
		);
		INSERT INTO list_generation (name) VALUES ('job_type'), ('error'), ('workspace');
		CREATE FUNCTION bump_list_generation() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			UPDATE list_generation SET generation = generation + 1 WHERE name = TG_TABLE_NAME;
			RETURN NULL;
		END $$;
		CREATE TRIGGER job_type_list_generation
			AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON job_type
			FOR EACH STATEMENT EXECUTE FUNCTION bump_list_generation();
		CREATE TRIGGER error_list_generation
			AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON error
			FOR EACH STATEMENT EXECUTE FUNCTION bump_list_generation();
		CREATE TRIGGER workspace_list_generation
			AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON workspace
			FOR EACH STATEMENT EXECUTE FUNCTION bump_list_generation();
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		DROP TRIGGER workspace_list_generation ON workspace;
		DROP TRIGGER error_list_generation ON error;
		DROP TRIGGER job_type_list_generation ON job_type;
		DROP FUNCTION bump_list_generation();
		DROP TABLE list_generation;
	`);
};
