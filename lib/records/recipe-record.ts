import { formatDatetime } from "../validation/schema";

/**
 * A recipe as lists and job details show it (Scale's RecipeSerializer): one shape for
 * GET /recipes/ (lib/records/recipe.ts) and the `recipes` of job details (lib/records/job.ts).
 */

export interface RecipeListRow {
	id: number;
	recipe_type_id: number;
	recipe_type_rev_id: number;
	event_id: number;
	created: Date;
	completed: Date | null;
	last_modified: Date;
	rt_name: string;
	rt_version: string;
	rt_title: string | null;
	rt_description: string | null;
	rr_revision_num: number;
	ev_type: string;
	ev_rule_id: number | null;
	ev_occurred: Date;
}

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/**
 * A recipe record as lists show it (Scale's RecipeSerializer): its type as it is now (id, name,
 * version, title, description: the type's latest version), the revision it was scheduled with
 * and its event, each as a summary.
 */
export function serializeRecipe(row: RecipeListRow) {
	return {
		id: row.id,
		recipe_type: {
			id: row.recipe_type_id,
			name: row.rt_name,
			version: row.rt_version,
			title: row.rt_title,
			description: row.rt_description
		},
		recipe_type_rev: {
			id: row.recipe_type_rev_id,
			recipe_type: { id: row.recipe_type_id },
			revision_num: row.rr_revision_num
		},
		event: {
			id: row.event_id,
			type: row.ev_type,
			rule: row.ev_rule_id === null ? null : { id: row.ev_rule_id },
			occurred: formatDatetime(row.ev_occurred)
		},
		created: formatDatetime(row.created),
		completed: date(row.completed),
		last_modified: formatDatetime(row.last_modified)
	};
}
