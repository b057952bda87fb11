import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * The built-in error of an execution whose container the engine killed at its job type's
 * `mem_required` (docs/decisions.md, "Containers"). ALGORITHM: the job asked for too little
 * memory or its data needs more; another node would fail it the same way, so it is not retried
 * and does not count against the node.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(
		`INSERT INTO error (name, title, category, description, is_builtin)
		 VALUES ('memory-limit', 'Memory Limit', 'ALGORITHM',
		         'The job execution''s container was killed at its job type''s memory limit (mem_required).', true)
		 ON CONFLICT (name) DO UPDATE SET is_builtin = true`
	);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`DELETE FROM error WHERE name = 'memory-limit' AND is_builtin`);
};
