import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What the recipe list needs (docs/decisions.md, "Lists"): with the default order
 * (last_modified, as Scale orders and filters the list), unfiltered and by type (`type_id`, and
 * `type_name` through its lookup), an index ending in (last_modified, id), the page's whole
 * order; 0002's indexes are widened. The orders Scale's web UI offers on its recipes page
 * (recipe type, created, completed; last_modified above) get theirs ending in id too.
 */

/** Indexes: name, columns, and the columns 0002 made it with, if it did. */
const RECIPE_LIST_INDEXES: [string, string, string | null][] = [
	["recipe_last_modified_idx", "last_modified, id", "last_modified"],
	[
		"recipe_recipe_type_id_last_modified_idx",
		"recipe_type_id, last_modified, id",
		"recipe_type_id, last_modified"
	],
	["recipe_recipe_type_id_idx", "recipe_type_id, id", null],
	["recipe_created_idx", "created, id", "created"],
	["recipe_completed_idx", "completed, id", null]
];

export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, columns] of RECIPE_LIST_INDEXES) {
			await sql(`DROP INDEX IF EXISTS ${name}`);
			await sql(`CREATE INDEX ${name} ON recipe (${columns})`);
		}
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, , before] of RECIPE_LIST_INDEXES) {
			await sql(`DROP INDEX ${name}`);
			if (before) await sql(`CREATE INDEX ${name} ON recipe (${before})`);
		}
	});
};
