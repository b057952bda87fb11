import { entryFileIds, parseJobData, type JobData } from "../documents/job-data";
import type { RecipeDefinition } from "../documents/recipe-definition";
import type { RecipeData } from "../documents/recipe-data";
import type { JobInterface } from "../documents/types";
import { diskRequired } from "../jobs/prepare-job";
import type { Sql } from "../db/run";
import {
	dependentsOf,
	readyJobs,
	recipeJobData,
	successorsOf,
	type ResultOutput
} from "./job-data";

/**
 * A recipe's jobs as they run (Scale's RecipeHandler): a job whose dependencies have all
 * COMPLETED is given its data (recipe inputs, its dependencies' outputs) and queued, in the
 * transaction of the completion that freed it; a job that FAILED for good or was CANCELED blocks
 * the jobs that depend on it (never queued, they become BLOCKED), and a requeue of it lets them
 * wait again (PENDING). Each runs inside its caller's transaction, on its Sql. The recipes
 * concerned are locked (FOR UPDATE, in id order) first: two of a recipe's jobs completing at
 * once are then seen in turn, so the second sees the first COMPLETED and their common dependent
 * is queued once, by it.
 */

interface RecipeRow {
	id: number;
	data: RecipeData;
	definition: RecipeDefinition;
	completed: Date | null;
}

interface RecipeJobRow {
	recipe_id: number;
	job_name: string;
	id: number;
	status: string;
	results: { output_data?: ResultOutput[] } | null;
	interface: JobInterface;
	disk_out_const_required: number;
	disk_out_mult_required: number;
}

/**
 * Locks the recipes of the jobs `jobIds` (an SQL int[] expression) FOR UPDATE, in id order, so
 * that the transactions that change their jobs read them in turn. A statement that completes
 * jobs takes these locks itself, after its updates (`complete` in lib/executions/finish.ts), and
 * its transaction then reads without locking again.
 */
export function lockRecipesSql(jobIds: string): string {
	return `SELECT r.id FROM recipe r
		WHERE r.id IN (SELECT recipe_id FROM recipe_job WHERE job_id = ANY(${jobIds}))
		ORDER BY r.id FOR UPDATE OF r`;
}

/** Recipe locks a transaction holds already: those of these jobs, that many recipes. */
export interface HeldRecipeLocks {
	jobs: ReadonlySet<number>;
	recipes: number;
}

const NO_LOCKS: HeldRecipeLocks = { jobs: new Set(), recipes: 0 };

/** Recipes read with their jobs (readRecipes). */
export interface RecipesRead {
	recipes: RecipeRow[];
	jobs: RecipeJobRow[];
}

/**
 * The recipes of these jobs with their jobs, as they are when the statement runs. Run it after
 * the statement that locked them: it then sees what the lock waited for committed (a statement
 * sees the snapshot it began with, whatever it waits for).
 */
export async function readRecipes(sql: Sql, jobIds: number[]): Promise<RecipesRead> {
	const rows = await sql.query<RecipeRow & { jobs: RecipeJobRow[] }>(
		`SELECT r.id, r.data, rev.definition, r.completed,
			(SELECT json_agg(json_build_object('recipe_id', rj.recipe_id, 'job_name', rj.job_name,
				'id', j.id, 'status', j.status, 'results', j.results,
				'interface', CASE WHEN j.status = 'PENDING' THEN jr.interface END,
				'disk_out_const_required', t.disk_out_const_required,
				'disk_out_mult_required', t.disk_out_mult_required))
			 FROM recipe_job rj JOIN job j ON j.id = rj.job_id
				JOIN job_type_rev jr ON jr.id = j.job_type_rev_id JOIN job_type t ON t.id = j.job_type_id
			 WHERE rj.recipe_id = r.id) AS jobs
		 FROM recipe r JOIN recipe_type_rev rev ON rev.id = r.recipe_type_rev_id
		 WHERE r.id IN (SELECT recipe_id FROM recipe_job WHERE job_id = ANY($1::int[]))
		 ORDER BY r.id`,
		[jobIds]
	);
	return {
		recipes: rows.map(r => ({
			id: r.id,
			data: r.data,
			definition: r.definition,
			completed: r.completed
		})),
		jobs: rows.flatMap(r => r.jobs ?? [])
	};
}

/**
 * The recipes of these jobs, locked, with their jobs (nothing read when none has a recipe). The
 * read is a statement of its own, after the lock (readRecipes).
 */
async function loadRecipes(
	sql: Sql,
	jobIds: number[],
	held: HeldRecipeLocks = NO_LOCKS
): Promise<RecipesRead> {
	const toLock = jobIds.filter(id => !held.jobs.has(id));
	let recipes = held.recipes;
	if (toLock.length > 0)
		recipes += (await sql.query(lockRecipesSql("$1::int[]"), [toLock])).length;
	if (recipes === 0) return { recipes: [], jobs: [] };
	return readRecipes(sql, jobIds);
}

/** Only the recipes that have one of these jobs, and their jobs. */
function recipesOf(read: RecipesRead, jobIds: readonly number[]): RecipesRead {
	const ids = new Set(jobIds);
	const kept = new Set(read.jobs.filter(j => ids.has(j.id)).map(j => j.recipe_id));
	return {
		recipes: read.recipes.filter(r => kept.has(r.id)),
		jobs: read.jobs.filter(j => kept.has(j.recipe_id))
	};
}

/** A PENDING job to queue with its data. */
export interface PendingToQueue {
	jobId: number;
	data: unknown;
	iface: JobInterface;
	diskOutConst: number;
	diskOutMult: number;
	/** the jobs of its recipe that wait on it directly (queue.successors) */
	successors: number;
}

/** The bytes of a job's input files (each as often as an input names it): its disk_in. */
export function inputBytes(data: JobData, sizeOf: (fileId: number) => number): number {
	let bytes = 0;
	for (const input of data.input_data) for (const id of entryFileIds(input)) bytes += sizeOf(id);
	return bytes;
}

/**
 * Queues PENDING jobs of recipes with their data (checked against their revision's interface):
 * the job QUEUED with its disk needs (from its input files' sizes), a new QUEUED execution and
 * its queue row, guarded on PENDING. Answers the ids queued.
 *
 * The queue row takes its place in the queue by its recipe's creation, not by now (the job's own
 * `queued` is now): within a priority, a recipe's later jobs go ahead of work that arrived after
 * the recipe, so recipes under way finish first instead of each waiting for the whole backlog
 * at every step (P6: the time from A's completion to B's start under the load of 1,000 recipes,
 * docs/decisions.md "Recipes"). The recipes `completeRecipes` are marked completed by the same
 * statement.
 */
export async function queuePending(
	sql: Sql,
	items: PendingToQueue[],
	completeRecipes: number[] = [],
	last = false,
	/** called once the queueing statement is sent, to send another right behind it */
	afterSending: () => void = () => undefined
): Promise<number[]> {
	if (items.length === 0 && completeRecipes.length === 0) return [];
	const datas = items.map(item => parseJobData(item.data, item.iface, `job ${item.jobId} data`));
	const fileIds = [...new Set(datas.flatMap(d => d.input_data.flatMap(entryFileIds)))];
	const sizes = new Map<number, number>();
	if (fileIds.length > 0)
		for (const row of await sql.query<{ id: number; file_size: string }>(
			`SELECT id, file_size FROM scale_file WHERE id = ANY($1::int[])`,
			[fileIds]
		))
			sizes.set(row.id, Number(row.file_size));
	const rows = items.map((item, i) => {
		const bytes = inputBytes(datas[i], id => sizes.get(id) ?? 0);
		const disk = diskRequired(bytes, item.diskOutConst, item.diskOutMult);
		return {
			job_id: item.jobId,
			data: datas[i],
			disk_in: disk.diskIn,
			disk_out: disk.diskOut,
			successors: item.successors
		};
	});
	// the jobs by key (`id = ANY($3)`), not a hash over a scan of `job`: lib/scheduling/place.ts
	const run = last && sql.commitWith ? sql.commitWith.bind(sql) : sql.query.bind(sql);
	const queueing = run<{ id: number }>(
		`WITH r AS (
			SELECT * FROM json_to_recordset($1::json)
				AS r(job_id int, data jsonb, disk_in float8, disk_out float8, successors int)
		 ), j AS (
			UPDATE job SET status = 'QUEUED', data = r.data, num_exes = job.num_exes + 1,
				disk_in_required = r.disk_in, disk_out_required = r.disk_out, queued = now(),
				last_status_change = now(), last_modified = now()
			FROM r WHERE job.id = ANY($3::int[]) AND job.id = r.job_id AND job.status = 'PENDING'
			RETURNING job.*
		 ), x AS (
			INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
			SELECT id, job_type_id, 'QUEUED', timeout, now() FROM j ORDER BY id
			RETURNING id, job_id
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued,
				successors)
			SELECT x.id, j.id, j.job_type_id, j.priority, j.cpus_required, j.mem_required,
				j.disk_in_required, j.disk_out_required,
				j.disk_in_required + j.disk_out_required, least(now(), coalesce(rc.created, now())),
				r.successors
			FROM x JOIN j ON j.id = x.job_id JOIN r ON r.job_id = j.id
				LEFT JOIN recipe_job rj ON rj.job_id = j.id
				LEFT JOIN recipe rc ON rc.id = rj.recipe_id
		 ), c AS (
			UPDATE recipe SET completed = now(), last_modified = now() WHERE id = ANY($2::int[])
		 )
		 SELECT id FROM j ORDER BY id`,
		[JSON.stringify(rows), completeRecipes, rows.map(r => r.job_id)]
	);
	afterSending();
	return (await queueing).map(r => r.id);
}

/** What advancing recipes did. */
export interface Advanced {
	queued: number[];
	completedRecipes: number[];
}

/** How advanceRecipes may save round trips. */
export interface AdvanceOptions {
	/**
	 * The recipes already read (readRecipes) after the statement that completed `jobIds` and
	 * locked their recipes (`held`); it may name more jobs, whose recipes are left out.
	 */
	read?: Promise<RecipesRead>;
	/** the queueing statement is the transaction's last: sent with its COMMIT (Sql.commitWith) */
	last?: boolean;
	/**
	 * A statement sent right behind the queueing one, before its answer, given the jobs it
	 * queues (when it queues any; then it is the last instead, when `last`): the hand-off of
	 * lib/scheduling/handoff.ts. Its answer is the caller's to wait for.
	 */
	behind?: (jobIds: number[], last: boolean) => Promise<unknown>;
}

/**
 * After jobs COMPLETED (`jobIds`, in the same transaction): queues each of their recipes' jobs
 * that waits (PENDING) with every dependency COMPLETED, and marks a recipe whose jobs all
 * COMPLETED as completed.
 */
export async function advanceRecipes(
	sql: Sql,
	jobIds: number[],
	held: HeldRecipeLocks = NO_LOCKS,
	opts: AdvanceOptions = {}
): Promise<Advanced> {
	const { recipes, jobs } = opts.read
		? recipesOf(await opts.read, jobIds)
		: await loadRecipes(sql, jobIds, held);
	const toQueue: PendingToQueue[] = [];
	const completedRecipes: number[] = [];
	for (const recipe of recipes) {
		const mine = jobs.filter(j => j.recipe_id === recipe.id);
		const byName = new Map(mine.map(j => [j.job_name, j]));
		const done = new Set(mine.filter(j => j.status === "COMPLETED").map(j => j.job_name));
		if (done.size === mine.length && recipe.completed === null) {
			completedRecipes.push(recipe.id);
			continue;
		}
		for (const job of readyJobs(recipe.definition, done)) {
			const row = byName.get(job.name);
			if (!row || row.status !== "PENDING") continue;
			toQueue.push({
				jobId: row.id,
				data: recipeJobData(
					job,
					row.interface,
					recipe.data,
					name => byName.get(name)?.results?.output_data ?? []
				),
				iface: row.interface,
				diskOutConst: row.disk_out_const_required,
				diskOutMult: row.disk_out_mult_required,
				successors: successorsOf(recipe.definition, job.name)
			});
		}
	}
	const behind = toQueue.length > 0 ? opts.behind : undefined;
	const last = opts.last === true;
	const queued = await queuePending(sql, toQueue, completedRecipes, last && !behind, () => {
		// when the queueing statement fails, this one does too, and is not waited for
		behind?.(
			toQueue.map(item => item.jobId),
			last
		).catch(() => undefined);
	});
	return { queued, completedRecipes };
}

/**
 * After jobs FAILED for good or were CANCELED (`jobIds`): every job of their recipes that depends
 * on one of them and was never queued (PENDING) becomes BLOCKED. Answers the ids blocked.
 */
export async function blockRecipeJobs(sql: Sql, jobIds: number[]): Promise<number[]> {
	const { recipes, jobs } = await loadRecipes(sql, jobIds);
	const ended = new Set(jobIds);
	const toBlock: number[] = [];
	for (const recipe of recipes) {
		const mine = jobs.filter(j => j.recipe_id === recipe.id);
		const names = mine.filter(j => ended.has(j.id)).map(j => j.job_name);
		const blocked = dependentsOf(recipe.definition, names);
		for (const j of mine)
			if (blocked.has(j.job_name) && j.status === "PENDING") toBlock.push(j.id);
	}
	if (toBlock.length === 0) return [];
	const rows = await sql.query<{ id: number }>(
		`UPDATE job SET status = 'BLOCKED', last_status_change = now(), last_modified = now()
		 WHERE id = ANY($1::int[]) AND status = 'PENDING' RETURNING id`,
		[toBlock]
	);
	await sql.query(`UPDATE recipe SET last_modified = now() WHERE id = ANY($1::int[])`, [
		recipes.map(r => r.id)
	]);
	return rows.map(r => r.id);
}

/**
 * After jobs were requeued (`jobIds`): every BLOCKED job of their recipes none of whose
 * ancestors is FAILED or CANCELED waits again (PENDING), to run when its dependencies complete.
 * Answers the ids unblocked.
 */
export async function unblockRecipeJobs(sql: Sql, jobIds: number[]): Promise<number[]> {
	const { recipes, jobs } = await loadRecipes(sql, jobIds);
	const toUnblock: number[] = [];
	for (const recipe of recipes) {
		const mine = jobs.filter(j => j.recipe_id === recipe.id);
		const stopped = mine
			.filter(j => j.status === "FAILED" || j.status === "CANCELED")
			.map(j => j.job_name);
		const stillBlocked = dependentsOf(recipe.definition, stopped);
		for (const j of mine)
			if (j.status === "BLOCKED" && !stillBlocked.has(j.job_name)) toUnblock.push(j.id);
	}
	if (toUnblock.length === 0) return [];
	const rows = await sql.query<{ id: number }>(
		`UPDATE job SET status = 'PENDING', last_status_change = now(), last_modified = now()
		 WHERE id = ANY($1::int[]) AND status = 'BLOCKED' RETURNING id`,
		[toUnblock]
	);
	return rows.map(r => r.id);
}
