import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What Strike and the triggers service need (docs/decisions.md, "Strike" and "Triggers"):
 * - the system job type `scale-strike` (Scale's ingest/fixtures/ingest_job_types.json): a
 *   strike's process is a job of it, long-running, which the node agent that runs it serves with
 *   the strike's monitor instead of a command. Small resources: the monitor is a few timers and
 *   file moves in the agent's own process.
 * - Scale's two clock rules (queue/fixtures/queue_trigger_rules.json,
 *   metrics/fixtures/metrics_trigger_rules.json): `scale-job-load` every minute (Scale: every
 *   hour; this service's load history has kept one row per minute since it began) and
 *   `scale-daily-metrics` every day.
 * - `daily_metrics_day`: the days the daily metrics processor has run for.
 * - an index for the monitor's question "the open ingest of this file in this strike", and
 *   `ingest.error`: why an ERRORED ingest failed.
 */
// Scale's command is "" with `scale_strike` as the first argument; here the agent runs the monitor
// itself and never this command, which only names what runs (an execution shows it)
const STRIKE_INTERFACE = {
	version: "1.0",
	command: "scale_strike",
	command_arguments: "${-i :Strike ID}",
	input_data: [{ name: "Strike ID", type: "property", required: true }],
	output_data: [],
	shared_resources: []
};

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string, bind?: unknown[]) =>
			qi.sequelize.query(text, { transaction, bind });
		await sql(
			`WITH t AS (
				INSERT INTO job_type (name, version, title, description, category, is_system,
					is_long_running, icon_code, interface, priority, timeout, max_tries,
					cpus_required, mem_required, disk_out_const_required, disk_out_mult_required)
				VALUES ('scale-strike', '1.0', 'Scale Strike',
					'Monitors a directory for incoming source files to ingest', 'system', true,
					true, 'f0e7', $1::jsonb, 5, 0, 1, 0.1, 64, 0, 0)
				RETURNING id, interface
			)
			INSERT INTO job_type_rev (job_type_id, revision_num, interface)
			SELECT id, 1, interface FROM t`,
			[JSON.stringify(STRIKE_INTERFACE)]
		);
		await sql(
			`INSERT INTO trigger_rule (type, name, is_active, configuration) VALUES
				('CLOCK', 'scale-job-load', true,
					'{"version": "1.0", "event_type": "JOB_LOAD", "schedule": "PT1M0S"}'),
				('CLOCK', 'scale-daily-metrics', true,
					'{"version": "1.0", "event_type": "DAILY_METRICS", "schedule": "PT24H0M0S"}')`
		);
		await sql(`
			CREATE TABLE daily_metrics_day (
				day date PRIMARY KEY,
				event_id integer REFERENCES trigger_event (id) ON DELETE SET NULL,
				computed timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`ALTER TABLE ingest ADD COLUMN error text`);
		await sql(
			`CREATE INDEX ingest_open_idx ON ingest (strike_id, file_name)
			 WHERE status IN ('TRANSFERRING', 'TRANSFERRED', 'INGESTING')`
		);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`DROP INDEX ingest_open_idx`);
		await sql(`ALTER TABLE ingest DROP COLUMN error`);
		await sql(`DROP TABLE daily_metrics_day`);
		await sql(
			`DELETE FROM trigger_rule WHERE type = 'CLOCK'
			 AND name IN ('scale-job-load', 'scale-daily-metrics')`
		);
		await sql(`DELETE FROM job_type WHERE name = 'scale-strike' AND is_system`);
	});
};
