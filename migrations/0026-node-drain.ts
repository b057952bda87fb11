import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Draining nodes (docs/decisions.md, "Drain"): a node that is leaving (its agent got SIGTERM) or
 * that a user drains (`PATCH /nodes/{id}/ {"is_draining": true}`) takes no new work, and its
 * running executions get the agent's drain time to end before they are stopped.
 *
 * - `draining_since`: when the drain began; null: the node is not draining.
 * - `drain_by`: `agent` (the agent is shutting down: its next registration, a new process, ends
 *   the drain) or `user` (it lasts until `is_draining` is set false). Both null or both set.
 *
 * And the SYSTEM error `node-shutdown`: an execution stopped (or handed back before it started)
 * because its node was draining. Its job is queued again without counting against max_tries.
 * No index: the scheduler reads the flag from the node rows it reads anyway, and heartbeats stay
 * HOT updates.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		ALTER TABLE node
			ADD COLUMN draining_since timestamptz,
			ADD COLUMN drain_by varchar(5) CHECK (drain_by IN ('agent', 'user')),
			ADD CONSTRAINT node_drain_columns_check CHECK ((draining_since IS NULL) = (drain_by IS NULL))
	`);
	await qi.sequelize.query(
		`INSERT INTO error (name, title, category, description, is_builtin)
		 VALUES ('node-shutdown', 'Node Shutdown', 'SYSTEM',
		         'The node running the job execution was shut down or drained before the execution ended; the job is queued again without counting against its max_tries.', true)
		 ON CONFLICT (name) DO UPDATE SET is_builtin = true`
	);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`DELETE FROM error WHERE name = 'node-shutdown' AND is_builtin`);
	await qi.sequelize.query(`
		ALTER TABLE node
			DROP CONSTRAINT node_drain_columns_check,
			DROP COLUMN drain_by,
			DROP COLUMN draining_since
	`);
};
