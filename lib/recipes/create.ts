import type { RecipeDefinition } from "../documents/recipe-definition";
import {
	checkRecipeFiles,
	checkRecipeWorkspace,
	parseRecipeData,
	type RecipeData
} from "../documents/recipe-data";
import type { Warning } from "../documents/types";
import { FieldError } from "../errors";
import type { Sql } from "../db/run";
import { recipeJobData, successorsOf } from "./job-data";
import { fileIdsIn } from "../documents/job-data";
import { parseJobData } from "../documents/job-data";
import { diskRequired, type JobTypeQueueFields } from "../jobs/prepare-job";
import { inputBytes } from "./run";

/**
 * Creating a recipe (Scale's Queue.queue_new_recipe and RecipeManager.create_recipe): the recipe
 * at its type's current revision, every job of the definition PENDING at its job type's current
 * revision, and the jobs with no dependencies queued with their data, written by one statement
 * (atomic on its own) after reads that check the request. The REST calls (batched across
 * requests, on the pool: no transaction is needed around one write) and the triggers service (in
 * its transaction, the recipes of its claimed events together) come through createRecipes.
 */

export interface NewRecipeRequest {
	recipeTypeId: number;
	/** the recipe data document as given */
	data: unknown;
	/** the trigger event that caused it; when absent a USER event is recorded, processed */
	eventId?: number;
}

export interface CreatedRecipe {
	recipeId: number;
	jobIds: number[];
	/** jobs queued at once (those without dependencies) */
	queued: number[];
	warnings: Warning[];
}

interface TypeRow {
	id: number;
	name: string;
	is_active: boolean;
	rev_id: number;
	definition: RecipeDefinition;
}

type JobTypeRow = JobTypeQueueFields;

/** A recipe checked and ready to be written: its data and its jobs' rows. */
interface CheckedRecipe {
	request: NewRecipeRequest;
	type: TypeRow;
	data: RecipeData;
	warnings: Warning[];
	rows: JobRow[];
}

type JobRow = {
	n: number;
	name: string;
	job_type_id: number;
	rev_id: number;
	priority: number;
	timeout: number;
	max_tries: number;
	cpus: number;
	mem: number;
	ready: boolean;
	data: unknown;
	disk_in: number;
	disk_out: number;
	/** the jobs of the recipe that wait on it directly (queue.successors) */
	successors: number;
};

/**
 * Checks each request and writes the recipes of those that pass, all in one statement; answers,
 * per request in order, the recipe created or the FieldError (400) that refused it, nothing of
 * it written. Requests posted together (POST /queue/new-recipe/, batched across requests by the
 * queue service) share each read (their types, files and workspaces) and the write: written
 * one at a time, each recipe paid a statement's fixed cost and the job table's indexes for its
 * two or three rows (P6, docs/decisions.md "Recipes").
 */
export async function createRecipes(
	sql: Sql,
	requests: NewRecipeRequest[]
): Promise<(CreatedRecipe | Error)[]> {
	const answers: (CreatedRecipe | Error)[] = requests.map(() => new Error("not written"));
	// the types, their current revisions and the job types their definitions name
	const types = new Map(
		(
			await sql.query<TypeRow & { job_types: JobTypeRow[] }>(
				`SELECT rt.id, rt.name, rt.is_active, rev.id AS rev_id, rev.definition,
				(SELECT coalesce(json_agg(json_build_object('id', t.id, 'name', t.name,
					'version', t.version, 'is_active', t.is_active, 'rev_id', tr.id,
					'interface', tr.interface, 'priority', t.priority, 'timeout', t.timeout,
					'max_tries', t.max_tries, 'cpus_required', t.cpus_required,
					'mem_required', t.mem_required,
					'disk_out_const_required', t.disk_out_const_required,
					'disk_out_mult_required', t.disk_out_mult_required)), '[]')
				 FROM job_type t
				 JOIN LATERAL (SELECT id, interface FROM job_type_rev WHERE job_type_id = t.id
					ORDER BY revision_num DESC LIMIT 1) tr ON true
				 WHERE (t.name, t.version) IN (
					SELECT j->'job_type'->>'name', j->'job_type'->>'version'
					FROM jsonb_array_elements(rev.definition->'jobs') j)) AS job_types
			 FROM recipe_type rt
			 JOIN LATERAL (SELECT id, definition FROM recipe_type_rev WHERE recipe_type_id = rt.id
				ORDER BY revision_num DESC LIMIT 1) rev ON true
			 WHERE rt.id = ANY($1::int[])`,
				[[...new Set(requests.map(r => r.recipeTypeId))]]
			)
		).map(t => [t.id, t])
	);
	const parsed = requests.map((request, i) => {
		try {
			return parseRequest(request, types.get(request.recipeTypeId));
		} catch (error) {
			if (!(error instanceof FieldError)) throw error;
			answers[i] = error;
			return null;
		}
	});
	const fileIds = [...new Set(parsed.flatMap(p => (p ? fileIdsIn(p.data) : [])))];
	const files = new Map(
		(fileIds.length === 0
			? []
			: await sql.query<{ id: number; media_type: string; file_size: string }>(
					`SELECT id, media_type, file_size FROM scale_file
					 WHERE id = ANY($1::int[]) AND NOT is_deleted`,
					[fileIds]
				)
		).map(f => [f.id, f])
	);
	const workspaceIds = [
		...new Set(
			parsed.flatMap(p => (p?.data.workspace_id === undefined ? [] : [p.data.workspace_id]))
		)
	];
	const workspaces = new Map(
		(workspaceIds.length === 0
			? []
			: await sql.query<{ id: number; is_active: boolean }>(
					`SELECT id, is_active FROM workspace WHERE id = ANY($1::int[])`,
					[workspaceIds]
				)
		).map(w => [w.id, w])
	);
	const checked: { i: number; recipe: CheckedRecipe }[] = [];
	parsed.forEach((p, i) => {
		if (p === null) return;
		try {
			checked.push({ i, recipe: checkRecipe(requests[i], p, files, workspaces) });
		} catch (error) {
			if (!(error instanceof FieldError)) throw error;
			answers[i] = error;
		}
	});
	if (checked.length === 0) return answers;
	const written = await writeRecipes(
		sql,
		checked.map(c => c.recipe)
	);
	checked.forEach(({ i }, k) => (answers[i] = written[k]));
	return answers;
}

interface ParsedRequest {
	type: TypeRow;
	data: RecipeData;
	typeOf: Map<string, JobTypeRow>;
}

const typeKey = (name: string, version: string) => `${name}\u0000${version}`;

/** The request's type (active, its job types active) and its data checked against the definition. */
function parseRequest(
	request: NewRecipeRequest,
	type: (TypeRow & { job_types: JobTypeRow[] }) | undefined
): ParsedRequest {
	if (!type)
		throw new FieldError("recipe_type_id", `no recipe type with id ${request.recipeTypeId}`);
	if (!type.is_active)
		throw new FieldError(
			"recipe_type_id",
			`recipe type "${type.name}" is archived; only active recipe types take new recipes`
		);
	const def = type.definition;
	const data: RecipeData = parseRecipeData(request.data ?? {}, def, "recipe_data");
	const typeOf = new Map(type.job_types.map(jt => [typeKey(jt.name, jt.version), jt]));
	for (const job of def.jobs) {
		const jt = typeOf.get(typeKey(job.job_type.name, job.job_type.version));
		if (!jt || !jt.is_active)
			throw new FieldError(
				"recipe_type_id",
				`job "${job.name}" of the recipe type needs job type "${job.job_type.name}" version "${job.job_type.version}", which is ${jt ? "archived" : "missing"}`
			);
	}
	return { type, data, typeOf };
}

/** The request's files and workspace checked, and its jobs' rows. */
function checkRecipe(
	request: NewRecipeRequest,
	{ type, data, typeOf }: ParsedRequest,
	files: Map<number, { id: number; media_type: string; file_size: string }>,
	workspaces: Map<number, { is_active: boolean }>
): CheckedRecipe {
	const def = type.definition;
	const warnings = checkRecipeFiles(data, def, files);
	checkRecipeWorkspace(
		data,
		def,
		(name, version) => typeOf.get(typeKey(name, version))?.interface ?? null
	);
	if (data.workspace_id !== undefined) {
		const ws = workspaces.get(data.workspace_id);
		if (!ws)
			throw new FieldError(
				"recipe_data.workspace_id",
				`workspace ${data.workspace_id} does not exist`
			);
		if (!ws.is_active)
			throw new FieldError(
				"recipe_data.workspace_id",
				`workspace ${data.workspace_id} is not active`
			);
	}

	// The jobs without dependencies are written QUEUED, with their data, execution and queue
	// row, in the statement that creates them: written PENDING and then queued (a second
	// statement, a second version of each job row and of its index entries) they cost
	// PostgreSQL twice as much (P6, docs/decisions.md "Recipes").
	const rows = def.jobs.map((job, i): JobRow => {
		const jt = typeOf.get(typeKey(job.job_type.name, job.job_type.version)) as JobTypeRow;
		const ready = job.dependencies.length === 0;
		const jobData = ready
			? parseJobData(
					recipeJobData(job, jt.interface, data, () => []),
					jt.interface,
					`job "${job.name}" data`
				)
			: null;
		const bytes =
			jobData === null ? 0 : inputBytes(jobData, id => Number(files.get(id)?.file_size ?? 0));
		const disk = diskRequired(bytes, jt.disk_out_const_required, jt.disk_out_mult_required);
		return {
			n: i,
			name: job.name,
			job_type_id: jt.id,
			rev_id: jt.rev_id,
			priority: jt.priority,
			timeout: jt.timeout,
			max_tries: jt.max_tries,
			cpus: jt.cpus_required,
			mem: jt.mem_required,
			ready,
			data: jobData,
			disk_in: ready ? disk.diskIn : 0,
			disk_out: ready ? disk.diskOut : 0,
			successors: successorsOf(def, job.name)
		};
	});
	return { request, type, data, warnings, rows };
}

/**
 * Writes checked recipes in one statement (atomic on its own; of the keys between its rows, the
 * recipe's event and its jobs' names are checked at its end, the others not at all: migration
 * 0022): each recipe's event (unless a trigger's), the recipe, its jobs and
 * their names, and the ready jobs' executions and queue rows. The event, recipe and job ids are
 * drawn in CTEs (a CTE with a volatile function is computed once), so that each row names the
 * others without relying on insertion order. Each recipe is created a microsecond after the one
 * before it in the batch (its `created`, and its first jobs' place in the queue): a recipe's later
 * jobs take their place by its creation (queuePending), and recipes written together would tie,
 * the tie going by queue row id to the first jobs of the batch's later recipes.
 */
async function writeRecipes(sql: Sql, recipes: CheckedRecipe[]): Promise<CreatedRecipe[]> {
	const rows = await sql.query<{
		k: number;
		recipe_id: number;
		id: number | null;
		ready: boolean | null;
	}>(
		`WITH s AS (
			SELECT s.*, nextval('recipe_id_seq'::regclass)::int AS recipe_id,
				CASE WHEN s.event_id IS NULL
					THEN nextval('trigger_event_id_seq'::regclass)::int END AS new_event_id
			FROM json_to_recordset($1::json) AS s(k int, data jsonb, event_id int, type_id int,
				rev_id int, empty boolean)
		 ), e AS (
			INSERT INTO trigger_event (id, type, description, occurred, processed)
			SELECT new_event_id, 'USER', '{"user": "Anonymous"}', now(), now()
			FROM s WHERE new_event_id IS NOT NULL ORDER BY k
		 ), rc AS (
			INSERT INTO recipe (id, recipe_type_id, recipe_type_rev_id, event_id, data, completed,
				created)
			SELECT recipe_id, type_id, rev_id, coalesce(event_id, new_event_id), data,
				CASE WHEN empty THEN now() END, now() + k * interval '1 microsecond'
			FROM s ORDER BY k
		 ), r AS (
			SELECT r.*, nextval('job_id_seq'::regclass)::int AS id
			FROM json_to_recordset($2::json) AS r(k int, name text, job_type_id int, rev_id int,
				priority int, timeout int, max_tries int, cpus float8, mem float8, n int,
				ready boolean, data jsonb, disk_in float8, disk_out float8, successors int)
		 ), j AS (
			INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, queued, last_status_change)
			SELECT r.id, r.job_type_id, r.rev_id, coalesce(s.event_id, s.new_event_id),
				CASE WHEN ready THEN 'QUEUED' ELSE 'PENDING' END, priority,
				CASE WHEN ready THEN 1 ELSE 0 END, timeout, max_tries, cpus, mem, disk_in,
				disk_out,
				coalesce(r.data, '{"version": "1.0", "input_data": [], "output_data": []}'),
				CASE WHEN ready THEN now() END, now()
			FROM r JOIN s ON s.k = r.k ORDER BY r.id
		 ), rj AS (
			INSERT INTO recipe_job (recipe_id, job_name, job_id)
			SELECT s.recipe_id, r.name, r.id FROM r JOIN s ON s.k = r.k
		 ), x AS (
			INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
			SELECT id, job_type_id, 'QUEUED', timeout, now() FROM r WHERE ready ORDER BY id
			RETURNING id, job_id
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued,
				successors)
			SELECT x.id, r.id, r.job_type_id, r.priority, r.cpus, r.mem, r.disk_in, r.disk_out,
				r.disk_in + r.disk_out, now() + r.k * interval '1 microsecond', r.successors
			FROM x JOIN r ON r.id = x.job_id
		 )
		 SELECT s.k, s.recipe_id, r.id, r.ready FROM s LEFT JOIN r ON r.k = s.k ORDER BY s.k, r.n`,
		[
			JSON.stringify(
				recipes.map((recipe, k) => ({
					k,
					data: recipe.data,
					event_id: recipe.request.eventId ?? null,
					type_id: recipe.type.id,
					rev_id: recipe.type.rev_id,
					// a definition without jobs makes a recipe with none, complete at once
					empty: recipe.rows.length === 0
				}))
			),
			JSON.stringify(recipes.flatMap((recipe, k) => recipe.rows.map(row => ({ ...row, k }))))
		]
	);
	const created: CreatedRecipe[] = recipes.map(recipe => ({
		recipeId: 0,
		jobIds: [],
		queued: [],
		warnings: recipe.warnings
	}));
	for (const row of rows) {
		const recipe = created[row.k];
		recipe.recipeId = row.recipe_id;
		if (row.id === null) continue; // a recipe without jobs
		recipe.jobIds.push(row.id);
		if (row.ready) recipe.queued.push(row.id);
	}
	return created;
}

/**
 * Recipes created together for different callers (REST requests of the same moment, a trigger's
 * events), by `create` (createRecipes on some connection): a failure of the shared write (a
 * database error, not a refusal, which createRecipes answers without writing) must not fail the
 * others, so each is then tried alone and answered its own result or error. Where `create` runs
 * inside a transaction it must run each call in a savepoint of its own.
 */
export async function createEachRecipe(
	create: (batch: NewRecipeRequest[]) => Promise<(CreatedRecipe | Error)[]>,
	requests: NewRecipeRequest[]
): Promise<(CreatedRecipe | Error)[]> {
	if (requests.length === 0) return [];
	try {
		return await create(requests);
	} catch (error) {
		if (requests.length === 1) return [error as Error];
		const answers: (CreatedRecipe | Error)[] = [];
		for (const request of requests)
			answers.push(
				await create([request]).then(
					([answer]) => answer,
					(alone: Error) => alone
				)
			);
		return answers;
	}
}
