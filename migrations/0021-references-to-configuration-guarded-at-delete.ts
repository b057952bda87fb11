import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * References from the busiest tables to configuration rows (job types and their revisions,
 * workspaces, strikes, trigger rules) are guarded where such a row is deleted, not where each
 * job, execution, queue row, ingest, file or event is written (docs/decisions.md, "References to
 * configuration rows").
 *
 * A foreign key checks every row written: it looks the referenced row up and locks it FOR KEY
 * SHARE. These referenced rows are few and each is locked by every concurrent writer (every
 * ingest of a strike names the same strike and workspace, every job of a type the same job type
 * and revision), which PostgreSQL records as shared lockers: eight such checks per ingested file
 * cost ~24 µs of PostgreSQL's ~177 (P5's burst B, three rounds alternating). The service never
 * deletes these rows (job types, workspaces, strikes and rules are archived or paused, as in
 * Scale), so the checks only ever passed.
 *
 * What the keys kept is kept: a configuration row that a job, execution, queue row, ingest, file
 * or event still names cannot be deleted (SQLSTATE 23503, as the keys answered). The guard first
 * locks each referencing table in SHARE mode, which waits for the transactions writing to it and
 * holds off new ones until the deleting transaction ends, so no reference can be written between
 * its check and the delete. A deleted trigger rule leaves its events with no rule, as the key's
 * ON DELETE SET NULL did. The other keys stay: between the busy tables themselves (a queue row's
 * execution, an execution's job, a job's event, an ingest's source file), whose rows are each
 * checked once (migration 0022 replaced those too).
 */

/** The keys replaced: table, column, the configuration table it names, its constraint. */
export const GUARDED_REFERENCES: [string, string, string, string][] = [
	["job", "job_type_id", "job_type", "job_job_type_id_fkey"],
	["job", "job_type_rev_id", "job_type_rev", "job_job_type_rev_id_fkey"],
	["job_exe", "job_type_id", "job_type", "job_exe_job_type_id_fkey"],
	["queue", "job_type_id", "job_type", "queue_job_type_id_fkey"],
	["scale_file", "job_type_id", "job_type", "scale_file_job_type_id_fkey"],
	["scale_file", "workspace_id", "workspace", "scale_file_workspace_id_fkey"],
	["ingest", "strike_id", "strike", "ingest_strike_id_fkey"],
	["ingest", "workspace_id", "workspace", "ingest_workspace_id_fkey"],
	["ingest", "new_workspace_id", "workspace", "ingest_new_workspace_id_fkey"],
	["trigger_event", "rule_id", "trigger_rule", "trigger_event_rule_id_fkey"]
];

/** How each key acted when its row was deleted, for `down`. */
const ON_DELETE: Record<string, string> = {
	queue_job_type_id_fkey: "CASCADE",
	trigger_event_rule_id_fkey: "SET NULL"
};

/** The configuration tables whose deletes are refused while a row names them (not the rules'). */
const RESTRICTED = ["job_type", "job_type_rev", "workspace", "strike"];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`
			CREATE FUNCTION refuse_delete_when_referenced() RETURNS trigger LANGUAGE plpgsql AS $$
			DECLARE
				i int := 0;
				named boolean;
			BEGIN
				-- TG_ARGV: pairs of (table, column) that name this table's id
				WHILE i < TG_NARGS LOOP
					EXECUTE format('LOCK TABLE %I IN SHARE MODE', TG_ARGV[i]);
					EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I = $1)',
						TG_ARGV[i], TG_ARGV[i + 1]) USING OLD.id INTO named;
					IF named THEN
						RAISE EXCEPTION '% % is still named by %.%', TG_TABLE_NAME, OLD.id,
							TG_ARGV[i], TG_ARGV[i + 1]
							USING ERRCODE = 'foreign_key_violation';
					END IF;
					i := i + 2;
				END LOOP;
				RETURN OLD;
			END $$`);
		await sql(`
			CREATE FUNCTION trigger_rule_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				UPDATE trigger_event SET rule_id = NULL WHERE rule_id = OLD.id;
				RETURN OLD;
			END $$`);
		for (const [table, , , constraint] of GUARDED_REFERENCES)
			await sql(`ALTER TABLE ${table} DROP CONSTRAINT ${constraint}`);
		for (const target of RESTRICTED) {
			const pairs = GUARDED_REFERENCES.filter(([, , t]) => t === target).flatMap(
				([table, column]) => [`'${table}'`, `'${column}'`]
			);
			await sql(
				`CREATE TRIGGER ${target}_references BEFORE DELETE ON ${target}
				 FOR EACH ROW EXECUTE FUNCTION refuse_delete_when_referenced(${pairs.join(", ")})`
			);
		}
		await sql(
			`CREATE TRIGGER trigger_rule_references AFTER DELETE ON trigger_rule
			 FOR EACH ROW EXECUTE FUNCTION trigger_rule_deleted()`
		);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const target of RESTRICTED)
			await sql(`DROP TRIGGER ${target}_references ON ${target}`);
		await sql(`DROP TRIGGER trigger_rule_references ON trigger_rule`);
		await sql(`DROP FUNCTION refuse_delete_when_referenced()`);
		await sql(`DROP FUNCTION trigger_rule_deleted()`);
		for (const [table, column, target, constraint] of GUARDED_REFERENCES)
			await sql(
				`ALTER TABLE ${table} ADD CONSTRAINT ${constraint} FOREIGN KEY (${column})
				 REFERENCES ${target} (id) ON DELETE ${ON_DELETE[constraint] ?? "RESTRICT"}`
			);
	});
};
