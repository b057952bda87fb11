import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * The references between rows the service writes together are kept where a referenced row is
 * deleted, not checked where each referencing row is written (docs/decisions.md, "References
 * between rows written together"). These are a job's event, an execution's job, a queue row's
 * execution and job, and an ingest's source file.
 *
 * A foreign key checks every row written. The check is a query of its own: it looks the
 * referenced row up and locks it FOR KEY SHARE, which writes that row's page and a WAL record.
 * Here every such check passes by construction:
 * - a job, its execution and its queue row are written by one statement, with ids it draws
 *   itself;
 * - a job's event is written before it, by the same transaction or by the one that recorded the
 *   ingest or parse;
 * - an ingest's source file is written by the statement that sets it.
 * These five checks per ingested file were a tenth of PostgreSQL's CPU in P5's burst B. Three
 * rounds alternating, with / without the keys: PostgreSQL per file 138 / 115, 151 / 134 and
 * 135 / 119 µs.
 *
 * The service deletes none of these rows. For a delete made by hand, what the keys did is done:
 * - deleting a job deletes its executions and queue row (ON DELETE CASCADE, as before);
 * - deleting an execution deletes its queue row (CASCADE);
 * - deleting a file leaves its ingest without a source file (SET NULL);
 * - an event that a job still names cannot be deleted (SQLSTATE 23503, RESTRICT).
 * Each trigger first locks the referencing tables in SHARE mode. That waits for the transactions
 * writing to them, so their rows are seen, and holds off new writers until the delete commits.
 * The keys among the other tables stay (an execution's logs, products and their ancestry).
 */

/** The keys replaced: table, column, the table it names, its constraint, its ON DELETE. */
export const WRITTEN_TOGETHER: [string, string, string, string, string][] = [
	["job", "event_id", "trigger_event", "job_event_id_fkey", "RESTRICT"],
	["job_exe", "job_id", "job", "job_exe_job_id_fkey", "CASCADE"],
	["queue", "job_exe_id", "job_exe", "queue_job_exe_id_fkey", "CASCADE"],
	["queue", "job_id", "job", "queue_job_id_fkey", "CASCADE"],
	["ingest", "source_file_id", "scale_file", "ingest_source_file_id_fkey", "SET NULL"]
];

/**
 * What a deleted row's references get: TG_ARGV[0] is CASCADE (deleted) or SET NULL, then pairs
 * (table, column) of the rows naming the deleted row's id.
 */
const FOLLOW_FUNCTION = `
	CREATE FUNCTION follow_deleted_references() RETURNS trigger LANGUAGE plpgsql AS $$
	DECLARE
		i int := 1;
	BEGIN
		WHILE i < TG_NARGS LOOP
			EXECUTE format('LOCK TABLE %I IN SHARE MODE', TG_ARGV[i]);
			IF TG_ARGV[0] = 'CASCADE' THEN
				EXECUTE format('DELETE FROM %I WHERE %I = $1', TG_ARGV[i], TG_ARGV[i + 1])
					USING OLD.id;
			ELSE
				EXECUTE format('UPDATE %I SET %I = NULL WHERE %I = $1', TG_ARGV[i],
					TG_ARGV[i + 1], TG_ARGV[i + 1]) USING OLD.id;
			END IF;
			i := i + 2;
		END LOOP;
		RETURN OLD;
	END $$`;

/** The triggers on the referenced tables: name, table, timing and function with its pairs. */
function triggers(): [string, string, string][] {
	const byTarget = new Map<string, [string, string][]>();
	for (const [table, column, target, , onDelete] of WRITTEN_TOGETHER) {
		const key = `${target}|${onDelete}`;
		byTarget.set(key, [...(byTarget.get(key) ?? []), [table, column]]);
	}
	return [...byTarget].map(([key, pairs]) => {
		const [target, onDelete] = key.split("|");
		const args = pairs.flatMap(([t, c]) => [`'${t}'`, `'${c}'`]).join(", ");
		const [timing, call] =
			onDelete === "RESTRICT"
				? ["BEFORE", `refuse_delete_when_referenced(${args})`]
				: ["AFTER", `follow_deleted_references('${onDelete}', ${args})`];
		return [
			`${target}_written_with`,
			target,
			`${timing} DELETE ON ${target} FOR EACH ROW EXECUTE FUNCTION ${call}`
		];
	});
}

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(FOLLOW_FUNCTION);
		for (const [table, , , constraint] of WRITTEN_TOGETHER)
			await sql(`ALTER TABLE ${table} DROP CONSTRAINT ${constraint}`);
		// refuse_delete_when_referenced is migration 0021's
		for (const [name, , definition] of triggers())
			await sql(`CREATE TRIGGER ${name} ${definition}`);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, target] of triggers()) await sql(`DROP TRIGGER ${name} ON ${target}`);
		await sql(`DROP FUNCTION follow_deleted_references()`);
		for (const [table, column, target, constraint, onDelete] of WRITTEN_TOGETHER)
			await sql(
				`ALTER TABLE ${table} ADD CONSTRAINT ${constraint} FOREIGN KEY (${column})
				 REFERENCES ${target} (id) ON DELETE ${onDelete}`
			);
	});
};
