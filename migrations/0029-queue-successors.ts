import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * `queue.successors`: how many jobs of its recipe wait on the queued job directly (its
 * definition's dependents; 0 outside recipes). The scheduler's launch window holds that many
 * launches of room on the agent while the job runs, so that the jobs its end queues are placed
 * within the window instead of waiting behind the next burst of first jobs (docs/decisions.md,
 * "A launch window per agent"). Written with the row; no index.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(
		`ALTER TABLE queue ADD COLUMN successors smallint NOT NULL DEFAULT 0 CHECK (successors >= 0)`
	);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`ALTER TABLE queue DROP COLUMN successors`);
};
