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
import { queuePending } from "./run";

/**
 * Creating a recipe (Scale's Queue.queue_new_recipe and RecipeManager.create_recipe): the recipe
 * at its type's current revision, every job of the definition PENDING at its job type's current
 * revision, and the jobs with no dependencies queued with their data, in the caller's
 * transaction (its Sql). The REST call and the triggers service come through here.
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
	const [type] = await sql.query<TypeRow>(
		`SELECT rt.id, rt.name, rt.is_active, rev.id AS rev_id, rev.definition
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
	const jobTypes = await sql.query<JobTypeRow>(
		`SELECT t.id, t.name, t.version, t.is_active, rev.id AS rev_id, rev.interface, t.priority,
			t.timeout, t.max_tries, t.cpus_required, t.mem_required, t.disk_out_const_required,
			t.disk_out_mult_required
		 FROM job_type t
		 JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS k(name, version)) k
			ON k.name = t.name AND k.version = t.version
		 JOIN LATERAL (SELECT id, interface FROM job_type_rev WHERE job_type_id = t.id
			ORDER BY revision_num DESC LIMIT 1) rev ON true`,
		[def.jobs.map(j => j.job_type.name), def.jobs.map(j => j.job_type.version)]
	);
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
			: await sql.query<{ id: number; media_type: string }>(
					`SELECT id, media_type FROM scale_file WHERE id = ANY($1::int[]) AND NOT is_deleted`,
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

	const eventId =
		request.eventId ??
		(
			await sql.query<{ id: number }>(
				`INSERT INTO trigger_event (type, description, occurred, processed)
				 VALUES ('USER', '{"user": "Anonymous"}', now(), now()) RETURNING id`,
				[]
			)
		)[0].id;
	const [recipe] = await sql.query<{ id: number }>(
		`INSERT INTO recipe (recipe_type_id, recipe_type_rev_id, event_id, data)
		 VALUES ($1, $2, $3, $4::jsonb) RETURNING id`,
		[type.id, type.rev_id, eventId, JSON.stringify(data)]
	);
	const rows = def.jobs.map((job, i) => {
		const jt = typeOf.get(keys[i]) as JobTypeRow;
		return {
			n: i,
			name: job.name,
			job_type_id: jt.id,
			rev_id: jt.rev_id,
			priority: jt.priority,
			timeout: jt.timeout,
			max_tries: jt.max_tries,
			cpus: jt.cpus_required,
			mem: jt.mem_required
		};
	});
	const jobs = await sql.query<{ id: number; name: string }>( // the ids drawn in `r` (a CTE with a volatile function is computed once), so that the job
		// rows and the recipe's names for them agree without relying on insertion order
		`WITH r AS (
			SELECT r.*, nextval(pg_get_serial_sequence('job', 'id'))::int AS id
			FROM jsonb_to_recordset($1::jsonb) AS r(name text, job_type_id int, rev_id int,
				priority int, timeout int, max_tries int, cpus float8, mem float8, n int)
		 ), j AS (
			INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, last_status_change)
			SELECT id, job_type_id, rev_id, $2, 'PENDING', priority, 0, timeout, max_tries, cpus,
				mem, 0, 0, '{"version": "1.0", "input_data": [], "output_data": []}', now()
			FROM r ORDER BY n
		 ), rj AS (
			INSERT INTO recipe_job (recipe_id, job_name, job_id) SELECT $3, name, id FROM r
		 )
		 SELECT id, name FROM r ORDER BY n`,
		[JSON.stringify(rows), eventId, recipe.id]
	);
	const idOf = new Map(jobs.map(j => [j.name, j.id]));
	const ready = def.jobs.filter(job => job.dependencies.length === 0);
	const queued = await queuePending(
		sql,
		ready.map(job => {
			const jt = typeOf.get(
				`${job.job_type.name}\u0000${job.job_type.version}`
			) as JobTypeRow;
			return {
				jobId: idOf.get(job.name) as number,
				data: recipeJobData(job, jt.interface, data, () => []),
				iface: jt.interface,
				diskOutConst: jt.disk_out_const_required,
				diskOutMult: jt.disk_out_mult_required
			};
		})
	);
	return { recipeId: recipe.id, jobIds: jobs.map(j => j.id), queued, warnings };
}
