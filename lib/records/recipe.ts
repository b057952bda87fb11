import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { fileIdsIn } from "../documents/job-data";
import type { RecipeData } from "../documents/recipe-data";
import type { RecipeDefinition } from "../documents/recipe-definition";
import type { JobInterface } from "../documents/types";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import { JOB_COLUMNS, JOB_JOINS, serializeJob, type JobListRow } from "./job";
import { serializeEventDetails, type EventDetailsRow } from "./job-details";
import { RECIPE_TYPE_COLUMNS, serializeRecipeType, type RecipeTypeRow } from "./recipe-type";
import { loadFiles, serializeScaleFile, type ScaleFileRow } from "./scale-file";

/**
 * Recipes, the read side (Scale 3.0's recipe/models.py Recipe and RecipeManager.get_recipes and
 * get_details, recipe/serializers.py RecipeSerializer and RecipeDetailsSerializer): the recipe
 * record as lists show it, the list source and the details.
 */

/** A recipe list row: the recipe, its type (`rt_`), revision (`rr_`) and event (`ev_`). */

/** The SELECT list of a RecipeListRow (lib/records/recipe-record.ts) over the recipe (`r`) and RECIPE_JOINS. */
const RECIPE_LIST_COLUMNS = [
	"r.id",
	"r.recipe_type_id",
	"r.recipe_type_rev_id",
	"r.event_id",
	"r.created",
	"r.completed",
	"r.last_modified",
	"rt.name AS rt_name",
	"rt.version AS rt_version",
	"rt.title AS rt_title",
	"rt.description AS rt_description",
	"rr.revision_num AS rr_revision_num",
	"ev.type AS ev_type",
	"ev.rule_id AS ev_rule_id",
	"ev.occurred AS ev_occurred"
].join(", ");

/** What a recipe record shows of the records it references: its type, revision and event. */
const RECIPE_JOINS = `LEFT JOIN recipe_type rt ON rt.id = r.recipe_type_id
	LEFT JOIN recipe_type_rev rr ON rr.id = r.recipe_type_rev_id
	LEFT JOIN trigger_event ev ON ev.id = r.event_id`;

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/**
 * GET /recipes/: as Scale's get_recipes, `started`/`ended` filter on last_modified and the list
 * is ordered by it, oldest first, unless told otherwise; `type_id` and `type_name` (repeatable)
 * test the recipe's own recipe_type_id (names looked up first). Each filter with the default
 * order, and each order Scale's web UI offers (recipe type, created, last modified, completed),
 * has an index ending in id (migration 0009).
 */
export const RECIPE_LIST: ListSource = {
	from: "recipe r",
	joins: RECIPE_JOINS,
	key: "r.id",
	columns: RECIPE_LIST_COLUMNS,
	orderable: {
		id: "r.id",
		created: "r.created",
		completed: "r.completed",
		last_modified: "r.last_modified",
		recipe_type: "r.recipe_type_id",
		recipe_type_rev: "r.recipe_type_rev_id",
		event: "r.event_id",
		recipe_type__id: "r.recipe_type_id",
		recipe_type__name: "rt.name",
		recipe_type__version: "rt.version",
		recipe_type__title: "rt.title",
		recipe_type_rev__id: "r.recipe_type_rev_id",
		recipe_type_rev__revision_num: "rr.revision_num",
		event__id: "r.event_id",
		event__occurred: "ev.occurred"
	},
	// Scale's RecipeManager.get_recipes orders by last_modified unless told otherwise.
	defaultOrder: ["last_modified"],
	timeColumn: "r.last_modified",
	filters: {
		type_id: { column: "r.recipe_type_id", type: "integer" },
		type_name: {
			column: "r.recipe_type_id",
			type: "string",
			lookup: "SELECT id FROM recipe_type WHERE name = ANY($1::text[])"
		}
	}
};

// ---- details ------------------------------------------------------------------------------

/** A `recipe` row read whole. */
interface RecipeRow {
	id: number;
	recipe_type_id: number;
	recipe_type_rev_id: number;
	event_id: number;
	data: RecipeData;
	completed: Date | null;
	created: Date;
	last_modified: Date;
}

interface RecipeTypeRevRow {
	id: number;
	recipe_type_id: number;
	revision_num: number;
	definition: RecipeDefinition;
	created: Date;
}

/** A job of the recipe: its name in the recipe, the job record's columns, its revision's. */
interface RecipeJobRow extends JobListRow {
	recipe_id: number;
	job_name: string;
	rev_interface: JobInterface;
	rev_created: Date;
}

/** A recipe with its type, revision and event (with its rule), their columns prefixed. */
const RECIPE_HEAD_SQL = `SELECT ${[
	"id",
	"recipe_type_id",
	"recipe_type_rev_id",
	"event_id",
	"data",
	"completed",
	"created",
	"last_modified"
]
	.map(c => `r.${c} AS r_${c}`)
	.join(", ")},
	${RECIPE_TYPE_COLUMNS.map(c => `rt.${c} AS rt_${c}`).join(", ")},
	${["id", "recipe_type_id", "revision_num", "definition", "created"]
		.map(c => `rev.${c} AS rev_${c}`)
		.join(", ")},
	ev.id AS ev_id, ev.type AS ev_type, ev.rule_id AS ev_rule_id, ev.occurred AS ev_occurred,
	ev.description AS ev_description, ru.type AS ev_rule_type, ru.name AS ev_rule_name,
	ru.is_active AS ev_rule_is_active, ru.configuration AS ev_rule_configuration
 FROM recipe r JOIN recipe_type rt ON rt.id = r.recipe_type_id
	JOIN recipe_type_rev rev ON rev.id = r.recipe_type_rev_id
	JOIN trigger_event ev ON ev.id = r.event_id LEFT JOIN trigger_rule ru ON ru.id = ev.rule_id
 WHERE r.id = ANY($1::int[])`;

const RECIPE_JOBS_SQL = `SELECT rj.recipe_id, rj.job_name, ${JOB_COLUMNS},
	r.interface AS rev_interface, r.created AS rev_created
 FROM recipe_job rj JOIN job j ON j.id = rj.job_id ${JOB_JOINS}
 WHERE rj.recipe_id = ANY($1::int[]) ORDER BY rj.recipe_id, rj.job_name`;

/** A recipe's job as its details show it (Scale's JobRevisionSerializer): revision with interface. */
function serializeRecipeJob(row: RecipeJobRow) {
	// the job's own columns (serializeJob picks its fields, the recipe's id among them unread)
	const { job_name, rev_interface, rev_created, ...job } = row;
	const record = serializeJob(job);
	return {
		job_name,
		job: {
			...record,
			job_type_rev: {
				...record.job_type_rev,
				interface: rev_interface,
				created: formatDatetime(rev_created)
			}
		}
	};
}

/**
 * GET /recipes/{id}/ (Scale's RecipeDetailsSerializer): the record with its type whole (as the
 * recipe type list shows it, definition included), the revision it was scheduled with (with its
 * definition), its event with its rule and description, its data, the files its data gives
 * (oldest id first, as Scale; each as its kind shows it, download URLs under `apiRoot` where the
 * workspace has none) and its jobs by name, each the job record with its revision's interface.
 * NotFoundError (404) for an unknown id.
 */
export async function getRecipeDetails(db: Sequelize, id: number, apiRoot?: string) {
	const details = (await getRecipeDetailsOf(db, [id], apiRoot)).get(id);
	if (!details) throw new NotFoundError(`No recipe with id ${id}`);
	return details;
}

/**
 * The details of these recipes (each as getRecipeDetails answers it), read together: the
 * recipes with their types, revisions and events in one statement, their jobs beside it, then
 * their input files. Ids not found are left out.
 */
export async function getRecipeDetailsOf(db: Sequelize, ids: number[], apiRoot?: string) {
	const [heads, jobRows] = await Promise.all([
		selectPrepared<Record<string, any>>(db, RECIPE_HEAD_SQL, [ids]),
		selectPrepared<RecipeJobRow>(db, RECIPE_JOBS_SQL, [ids])
	]);
	const part = <T>(head: Record<string, any>, prefix: string): T =>
		Object.fromEntries(
			Object.entries(head)
				.filter(([column]) => column.startsWith(prefix))
				.map(([column, value]) => [column.slice(prefix.length), value])
		) as T;
	const recipes = heads.map(head => ({
		recipe: part<RecipeRow>(head, "r_"),
		type: part<RecipeTypeRow>(head, "rt_"),
		rev: part<RecipeTypeRevRow>(head, "rev_"),
		event: part<EventDetailsRow>(head, "ev_")
	}));
	const fileIdsOf = (recipe: RecipeRow) => fileIdsIn(recipe.data);
	const files = await loadFiles(db, [
		...new Set(recipes.flatMap(({ recipe }) => fileIdsOf(recipe)))
	]);
	const jobsOf = new Map<number, RecipeJobRow[]>();
	for (const row of jobRows) {
		const list = jobsOf.get(row.recipe_id) ?? [];
		list.push(row);
		jobsOf.set(row.recipe_id, list);
	}
	return new Map(
		recipes.map(({ recipe, type, rev, event }) => [
			recipe.id,
			{
				id: recipe.id,
				recipe_type: serializeRecipeType(type),
				recipe_type_rev: {
					id: rev.id,
					recipe_type: { id: rev.recipe_type_id },
					revision_num: rev.revision_num,
					definition: rev.definition,
					created: formatDatetime(rev.created)
				},
				event: serializeEventDetails(event),
				created: formatDatetime(recipe.created),
				completed: date(recipe.completed),
				last_modified: formatDatetime(recipe.last_modified),
				data: recipe.data,
				input_files: [...new Set(fileIdsOf(recipe))]
					.flatMap(id => (files.has(id) ? [files.get(id) as ScaleFileRow] : []))
					.sort((a, b) => a.id - b.id)
					.map(file => serializeScaleFile(file, apiRoot)),
				jobs: (jobsOf.get(recipe.id) ?? []).map(serializeRecipeJob)
			}
		])
	);
}
