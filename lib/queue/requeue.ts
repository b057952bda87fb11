import type { Sequelize } from "sequelize";
import { select, write, type Sql } from "../db/run";
import { NotFoundError } from "../errors";
import { parseListQuery, type ListSpec } from "../list/params";
import { JOB_FROM, type JobStatus } from "../records/job";
import { advanceRecipes, unblockRecipeJobs } from "../recipes/run";

/**
 * Putting existing jobs (back) on the queue (Scale 3.0's Queue.requeue_jobs, _queue_jobs and
 * JobManager.queue_jobs), set-based.
 */

export interface QueueExistingOptions {
	/** only jobs in one of these statuses are queued (a guard against races) */
	fromStatuses: JobStatus[];
	/** a new priority for the jobs (and their queue rows); default: each job's own */
	priority?: number | null;
	/**
	 * raise max_tries so that another try is allowed, as Scale's requeue does:
	 * max_tries = num_exes + the job type's max_tries
	 */
	raiseMaxTries?: boolean;
}

/**
 * Queues the given existing jobs that are in one of `fromStatuses`, in one statement inside
 * the caller's transaction: each job becomes QUEUED (error cleared, queued and
 * last_status_change now, started and ended cleared, num_exes + 1), gets a new QUEUED execution
 * and a `queue` row. The job's data must already be set (disk_in/out_required too). Lock order
 * as everywhere: the caller may hold the job rows; nothing here touches other jobs. Answers the
 * queued jobs with their new executions; emitting `queue.changed` after the commit is the
 * caller's part.
 */
export async function queueExistingJobs(
	db: Sequelize,
	t: Sql,
	jobIds: number[],
	opts: QueueExistingOptions
): Promise<{ jobId: number; jobExeId: number }[]> {
	if (jobIds.length === 0) return [];
	const rows = await write<{ job_id: number; job_exe_id: number }>(
		db,
		`WITH j AS (
			UPDATE job SET status = 'QUEUED', error_id = NULL, queued = now(), started = NULL,
				ended = NULL, last_status_change = now(), num_exes = job.num_exes + 1,
				priority = COALESCE($3::int, job.priority),
				max_tries = CASE WHEN $4::boolean THEN job.num_exes + jt.max_tries
					ELSE job.max_tries END,
				last_modified = now()
			FROM job_type jt
			WHERE jt.id = job.job_type_id AND job.id = ANY($1::int[])
				AND job.status = ANY($2::text[])
			RETURNING job.id, job.job_type_id, job.priority, job.timeout, job.cpus_required,
				job.mem_required, job.disk_in_required, job.disk_out_required
		 ), x AS (
			INSERT INTO job_exe (job_id, job_type_id, status, timeout, queued)
			SELECT id, job_type_id, 'QUEUED', timeout, now() FROM j ORDER BY id
			RETURNING id, job_id
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
			SELECT x.id, j.id, j.job_type_id, j.priority, COALESCE(j.cpus_required, 0),
				COALESCE(j.mem_required, 0), COALESCE(j.disk_in_required, 0),
				COALESCE(j.disk_out_required, 0),
				COALESCE(j.disk_in_required, 0) + COALESCE(j.disk_out_required, 0), now()
			FROM x JOIN j ON j.id = x.job_id
			ORDER BY x.id
			RETURNING job_exe_id
		 )
		 SELECT x.job_id, x.id AS job_exe_id FROM x JOIN q ON q.job_exe_id = x.id ORDER BY x.job_id`,
		[[...new Set(jobIds)], opts.fromStatuses, opts.priority ?? null, !!opts.raiseMaxTries],
		t
	);
	return rows.map(row => ({ jobId: row.job_id, jobExeId: row.job_exe_id }));
}

/** The body of POST /queue/requeue-jobs/ (all optional). */
export interface RequeueFilters {
	started?: string;
	ended?: string;
	status?: "FAILED" | "CANCELED";
	job_ids?: number[];
	job_type_ids?: number[];
	job_type_names?: string[];
	job_type_categories?: string[];
	error_categories?: string[];
	priority?: number | null;
}

export const REQUEUE_STATUSES: JobStatus[] = ["FAILED", "CANCELED"];

/** The filters of a requeue as a list spec: the same range (on last_modified) as job lists. */
const REQUEUE_SPEC: ListSpec = {
	orderable: { id: "j.id" },
	defaultOrder: ["id"],
	timeColumn: "j.last_modified",
	filters: {
		status: { column: "j.status", type: "enum", values: REQUEUE_STATUSES },
		job_ids: { column: "j.id", type: "integer" },
		job_type_ids: { column: "j.job_type_id", type: "integer" },
		job_type_names: { column: "jt.name", type: "string" },
		job_type_categories: { column: "jt.category", type: "string" },
		error_categories: {
			column: "er.category",
			type: "enum",
			values: ["SYSTEM", "ALGORITHM", "DATA"]
		}
	}
};

export interface RequeueResult {
	/** every job matching the filters, whatever its status (what the response lists) */
	matchedIds: number[];
	/** the jobs put back on the queue */
	queued: { jobId: number; jobExeId: number }[];
	/** FAILED or CANCELED jobs never queued (recipe jobs): now BLOCKED, for their recipe to advance */
	blockedIds: number[];
	/** recipe jobs queued because a requeue let them run (their dependencies had completed) */
	recipeQueued: number[];
}

/**
 * Requeues the FAILED and CANCELED jobs matching the filters (Scale's RequeueJobsView and
 * Queue.requeue_jobs), inside the caller's transaction: a job queued before goes back on the
 * queue with its failure allowance raised (max_tries = num_exes + the job type's max_tries) and
 * the new priority if one is given; a job never queued (a recipe job canceled before its turn)
 * becomes BLOCKED. Jobs matching in other statuses are left as they are. Throws NotFoundError
 * when nothing matches, as Scale does, and FieldError for bad filters.
 */
export async function requeueJobs(
	db: Sequelize,
	t: Sql,
	filters: RequeueFilters,
	now: Date = new Date()
): Promise<RequeueResult> {
	const query: Record<string, unknown> = {};
	for (const key of [
		"started",
		"ended",
		"status",
		"job_ids",
		"job_type_ids",
		"job_type_names",
		"job_type_categories",
		"error_categories"
	] as const)
		if (filters[key] !== undefined && filters[key] !== null) query[key] = filters[key];
	const p = parseListQuery(query, REQUEUE_SPEC, now);
	const matched = await select<{ id: number; status: JobStatus; num_exes: number }>(
		db,
		`SELECT j.id, j.status, j.num_exes FROM ${JOB_FROM} WHERE ${p.where} ORDER BY j.id`,
		p.bind,
		t
	);
	if (matched.length === 0) throw new NotFoundError("No jobs match the filters");
	const candidates = matched.filter(m => REQUEUE_STATUSES.includes(m.status)).map(m => m.id);
	// Lock the candidates (in id order, so concurrent requeues cannot deadlock) and read them
	// again: a status may have changed since they matched.
	const locked =
		candidates.length === 0
			? []
			: await select<{ id: number; status: JobStatus; num_exes: number }>(
					db,
					`SELECT id, status, num_exes FROM job WHERE id = ANY($1::int[])
					 ORDER BY id FOR UPDATE`,
					[candidates],
					t
				);
	const ready = locked.filter(j => REQUEUE_STATUSES.includes(j.status));
	const toQueue = ready.filter(j => j.num_exes > 0).map(j => j.id);
	const toBlock = ready.filter(j => j.num_exes === 0).map(j => j.id);
	const queued = await queueExistingJobs(db, t, toQueue, {
		fromStatuses: REQUEUE_STATUSES,
		priority: filters.priority ?? null,
		raiseMaxTries: true
	});
	if (toBlock.length > 0)
		await write(
			db,
			`UPDATE job SET status = 'BLOCKED', error_id = NULL, ended = NULL,
				last_status_change = now(), last_modified = now()
			 WHERE id = ANY($1::int[]) AND status = ANY($2::text[])`,
			[toBlock, REQUEUE_STATUSES],
			t
		);
	// Their recipes: dependents blocked by these jobs wait again, and a never-queued job whose
	// dependencies have completed is queued now (lib/recipes/run.ts)
	const requeued = [...queued.map(q => q.jobId), ...toBlock];
	await unblockRecipeJobs(t, requeued);
	const { queued: recipeQueued } = await advanceRecipes(t, requeued);
	return { matchedIds: matched.map(m => m.id), queued, blockedIds: toBlock, recipeQueued };
}
