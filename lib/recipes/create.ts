import type { RecipeDefinition } from "../documents/recipe-definition";
import {
	checkRecipeFiles,
	checkRecipeWorkspace,
	fileIdsIn,
	parseRecipeData,
	type RecipeData
} from "../documents/recipe-data";
import type { JobInterface, Warning } from "../documents/types";
import { FieldError } from "../errors";
import type { Sql } from "../scheduling/sql";
import { recipeJobData } from "./job-data";
import { parseJobData } from "../documents/job-data";
import { diskRequired } from "../queue/new-job";
import { inputBytes } from "./run";

/**
 * Creating a recipe (Scale's Queue.queue_new_recipe and RecipeManager.create_recipe): the recipe
 * at its type's current revision, every job of the definition PENDING at its job type's current
 * revision, and the jobs with no dependencies queued with their data, written by one statement
 * (atomic on its own) after reads that check the request. The REST call (on the pool: no
 * transaction is needed around one write) and the triggers service (in its transaction) come
 * through here.
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

interface JobTypeRow {
	id: number;
	name: string;
	version: string;
	is_active: boolean;
	rev_id: number;
	interface: JobInterface;
	priority: number;
	timeout: number;
	max_tries: number;
	cpus_required: number;
	mem_required: number;
	disk_out_const_required: number;
	disk_out_mult_required: number;
}

/** Checks a new recipe's data and writes it with its jobs; throws FieldError (400) before writing. */
export async function createRecipe(sql: Sql, request: NewRecipeRequest): Promise<CreatedRecipe> {
	// the type, its current revision and the job types its definition names, in one statement
	const [type] = await sql.query<TypeRow & { job_types: JobTypeRow[] }>(
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
		 WHERE rt.id = $1`,
		[request.recipeTypeId]
	);
	if (!type)
		throw new FieldError("recipe_type_id", `no recipe type with id ${request.recipeTypeId}`);
	if (!type.is_active)
		throw new FieldError(
			"recipe_type_id",
			`recipe type "${type.name}" is archived; only active recipe types take new recipes`
		);
	const def = type.definition;
	const data: RecipeData = parseRecipeData(request.data ?? {}, def, "recipe_data");

	const keys = def.jobs.map(j => `${j.job_type.name}\u0000${j.job_type.version}`);
	const jobTypes = type.job_types;
	const typeOf = new Map(jobTypes.map(jt => [`${jt.name}\u0000${jt.version}`, jt]));
	def.jobs.forEach((job, i) => {
		const jt = typeOf.get(keys[i]);
		if (!jt || !jt.is_active)
			throw new FieldError(
				"recipe_type_id",
				`job "${job.name}" of the recipe type needs job type "${job.job_type.name}" version "${job.job_type.version}", which is ${jt ? "archived" : "missing"}`
			);
	});

	const fileIds = fileIdsIn(data);
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
	const warnings = checkRecipeFiles(data, def, files);
	checkRecipeWorkspace(
		data,
		def,
		(name, version) => typeOf.get(`${name}\u0000${version}`)?.interface ?? null
	);
	if (data.workspace_id !== undefined) {
		const [ws] = await sql.query<{ is_active: boolean }>(
			`SELECT is_active FROM workspace WHERE id = $1`,
			[data.workspace_id]
		);
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
	const rows = def.jobs.map((job, i) => {
		const jt = typeOf.get(keys[i]) as JobTypeRow;
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
			disk_out: ready ? disk.diskOut : 0
		};
	});
	// the event (unless the trigger's), the recipe, its jobs and their names, and the ready
	// jobs' executions and queue rows, in one statement (atomic on its own; the foreign keys
	// between its rows are checked at its end); the job ids drawn in `r` (a CTE with a volatile
	// function is computed once), so that the job rows and the recipe's names for them agree
	// without relying on insertion order
	const jobs = await sql.query<{ id: number; name: string; recipe_id: number; ready: boolean }>(
		`WITH e AS (
			INSERT INTO trigger_event (type, description, occurred, processed)
			SELECT 'USER', '{"user": "Anonymous"}', now(), now() WHERE $3::int IS NULL
			RETURNING id
		 ), rc AS (
			INSERT INTO recipe (recipe_type_id, recipe_type_rev_id, event_id, data, completed)
			VALUES ($4, $5, coalesce($3::int, (SELECT id FROM e)), $2::jsonb,
				CASE WHEN $6::boolean THEN now() END)
			RETURNING id, event_id
		 ), r AS (
			SELECT r.*, nextval(pg_get_serial_sequence('job', 'id'))::int AS id
			FROM jsonb_to_recordset($1::jsonb) AS r(name text, job_type_id int, rev_id int,
				priority int, timeout int, max_tries int, cpus float8, mem float8, n int,
				ready boolean, data jsonb, disk_in float8, disk_out float8)
		 ), j AS (
			INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, queued, last_status_change)
			SELECT r.id, job_type_id, rev_id, rc.event_id,
				CASE WHEN ready THEN 'QUEUED' ELSE 'PENDING' END, priority,
				CASE WHEN ready THEN 1 ELSE 0 END, timeout, max_tries, cpus, mem, disk_in,
				disk_out,
				coalesce(data, '{"version": "1.0", "input_data": [], "output_data": []}'),
				CASE WHEN ready THEN now() END, now()
			FROM r, rc ORDER BY n
		 ), rj AS (
			INSERT INTO recipe_job (recipe_id, job_name, job_id) SELECT rc.id, name, r.id FROM r, rc
		 ), x AS (
			INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
			SELECT id, job_type_id, 'QUEUED', timeout, now() FROM r WHERE ready ORDER BY id
			RETURNING id, job_id
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
			SELECT x.id, r.id, r.job_type_id, r.priority, r.cpus, r.mem, r.disk_in, r.disk_out,
				r.disk_in + r.disk_out, now()
			FROM x JOIN r ON r.id = x.job_id
		 )
		 SELECT r.id, r.name, r.ready, rc.id AS recipe_id FROM rc LEFT JOIN r ON true ORDER BY r.n`,
		[
			JSON.stringify(rows),
			JSON.stringify(data),
			request.eventId ?? null,
			type.id,
			type.rev_id,
			// a definition without jobs makes a recipe with none, complete at once
			def.jobs.length === 0
		]
	);
	const recipeId = jobs[0].recipe_id;
	if (def.jobs.length === 0) return { recipeId, jobIds: [], queued: [], warnings };
	const queued = jobs.filter(j => j.ready).map(j => j.id);
	return { recipeId, jobIds: jobs.map(j => j.id), queued, warnings };
}
