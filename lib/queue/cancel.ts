import type { Sequelize } from "sequelize";
import { select, write, type Sql, transaction } from "../db/run";
import { BadRequestError, NotFoundError } from "../errors";
import type { JobStatus } from "../records/job";
import { blockRecipeJobs } from "../recipes/run";

/**
 * Canceling a job (Scale 3.0's Queue.handle_job_cancellation). A job can be canceled unless it
 * is COMPLETED or already CANCELED (Scale's Job.can_be_canceled): PENDING, BLOCKED, QUEUED,
 * RUNNING and FAILED jobs become CANCELED (a FAILED one too, as in Scale, its error cleared).
 */

export const CANCELABLE_STATUSES: JobStatus[] = [
	"PENDING",
	"BLOCKED",
	"QUEUED",
	"RUNNING",
	"FAILED"
];

export interface CancelResult {
	jobId: number;
	/** "name:version" */
	jobType: string;
	/** the job's status before the cancel */
	previous: JobStatus;
	/** the execution that was live (QUEUED or RUNNING) and is now CANCELED, if there was one */
	canceledExe: { id: number; previous: "QUEUED" | "RUNNING"; agentId: string | null } | null;
}

/** The spec answers job update errors in text/plain. */
const PLAIN = { plainText: true };

function refuse(jobId: number, status: string): BadRequestError {
	return new BadRequestError(`Job ${jobId} cannot be canceled when in status ${status}`, PLAIN);
}

/**
 * A job gained a live execution while it was being canceled: a requeue (of a failed execution by
 * the scheduler, or POST /queue/requeue-jobs/) committed between the cancel's look at the queue
 * and its lock on the job. The transaction must be run again; cancelJobTransaction does.
 */
export class JobRequeuedDuringCancelError extends Error {
	constructor(jobId: number) {
		super(`Job ${jobId} was requeued while it was being canceled`);
		this.name = "JobRequeuedDuringCancelError";
	}
}

/**
 * Cancels a job inside the caller's transaction, every step guarded on the old state, taking
 * row locks in the order the scheduler's placing statement does (queue row, then execution, then
 * job: applyPlacements in lib/scheduling/place.ts): its queue row is deleted, its live execution
 * (if any) becomes CANCELED (ended now), and the job CANCELED (ended and last_status_change now). Throws NotFoundError for an unknown job and
 * BadRequestError for a COMPLETED or CANCELED one (both text/plain); a refusal rolls back.
 *
 * A requeue creates the job's next execution and queue row while it holds the job row, so one
 * that committed after the first two steps looked is seen once the job row is ours: then nothing
 * live may be left, or JobRequeuedDuringCancelError is thrown (to be run again, see
 * cancelJobTransaction). The job row is not taken first: a placement takes it last, after the
 * queue row and the execution, and the two would deadlock. Once the job is CANCELED under our lock, the
 * scheduler's requeue cannot follow (it is guarded on RUNNING); a user's requeue that waited for
 * the lock comes after the cancel, as it should.
 *
 * Killing the process of an execution that was RUNNING is the caller's part, after the commit:
 * `node-agent.cancel` targeted at `canceledExe.agentId`.
 */
export async function cancelJob(db: Sequelize, t: Sql, jobId: number): Promise<CancelResult> {
	const [job] = await select<{ status: JobStatus; name: string; version: string }>(
		db,
		`SELECT j.status, t.name, t.version FROM job j JOIN job_type t ON t.id = j.job_type_id
		 WHERE j.id = $1`,
		[jobId],
		t
	);
	if (!job) throw new NotFoundError(`Job ${jobId} not found`, PLAIN);
	if (!CANCELABLE_STATUSES.includes(job.status)) throw refuse(jobId, job.status);

	await write(db, "DELETE FROM queue WHERE job_id = $1 RETURNING id", [jobId], t);
	const [exe] = await write<{
		id: number;
		previous: "QUEUED" | "RUNNING";
		agent_id: string | null;
	}>(
		db,
		`WITH live AS (
			SELECT id, status, agent_id FROM job_exe
			WHERE job_id = $1 AND status IN ('QUEUED', 'RUNNING')
			FOR UPDATE
		 )
		 UPDATE job_exe x SET status = 'CANCELED', ended = now(), last_modified = now()
		 FROM live WHERE x.id = live.id
		 RETURNING x.id, live.status AS previous, live.agent_id`,
		[jobId],
		t
	);
	// the status it had under the lock: the one it is canceled from
	const [updated] = await write<{ id: number; previous: JobStatus }>(
		db,
		`WITH old AS (SELECT id, status FROM job WHERE id = $1 FOR UPDATE)
		 UPDATE job SET status = 'CANCELED', error_id = NULL, ended = now(),
			last_status_change = now(), last_modified = now()
		 FROM old WHERE job.id = old.id AND old.status = ANY($2::text[])
		 RETURNING job.id, old.status AS previous`,
		[jobId, CANCELABLE_STATUSES],
		t
	);
	if (!updated) {
		// The job finished between the first read and the lock: nothing is changed.
		const [now] = await select<{ status: string }>(
			db,
			"SELECT status FROM job WHERE id = $1",
			[jobId],
			t
		);
		throw refuse(jobId, now?.status ?? "unknown");
	}
	// A statement of its own, so that it sees what committed while the job row was waited for.
	const [left] = await select<{ left: boolean }>(
		db,
		`SELECT EXISTS (SELECT 1 FROM queue WHERE job_id = $1)
			OR EXISTS (SELECT 1 FROM job_exe WHERE job_id = $1 AND status IN ('QUEUED', 'RUNNING'))
			AS left`,
		[jobId],
		t
	);
	if (left?.left) throw new JobRequeuedDuringCancelError(jobId);
	// its recipe's jobs that wait for it will not run: BLOCKED (lib/recipes/run.ts)
	await blockRecipeJobs(t, [jobId]);
	return {
		jobId,
		jobType: `${job.name}:${job.version}`,
		previous: updated.previous,
		canceledExe: exe ? { id: exe.id, previous: exe.previous, agentId: exe.agent_id } : null
	};
}

/**
 * Cancels a job in a transaction of its own and runs `then` in it before the commit (to read
 * the job as the answer shows it). A requeue that slipped in (JobRequeuedDuringCancelError)
 * rolls the transaction back and runs it again, which then finds the new execution; each repeat
 * needs another requeue to have committed meanwhile, so a few attempts are plenty. A deadlock
 * is run again the same way: a cancel of a recipe's job takes the job's row, then its recipe's
 * (blockRecipeJobs), while a report ending another job of the recipe takes the recipe's, then
 * the jobs it blocks; PostgreSQL ends one of the two.
 */
export async function cancelJobTransaction<T>(
	db: Sequelize,
	jobId: number,
	then: (t: Sql, result: CancelResult) => Promise<T>,
	attempts = 5
): Promise<{ result: CancelResult; value: T }> {
	const retry = { attempts, also: (e: unknown) => e instanceof JobRequeuedDuringCancelError };
	return transaction(db, { retry }, async t => {
		const result = await cancelJob(db, t, jobId);
		return { result, value: await then(t, result) };
	});
}

/**
 * Checks a job update body as Scale's JobDetailsView.patch does: only `status`, and only
 * CANCELED. Every refusal is a text/plain 400.
 */
export function checkJobUpdate(body: Record<string, unknown>): void {
	const fields = Object.keys(body);
	if (fields.length === 0)
		throw new BadRequestError('No fields specified for update (allowed: "status")', PLAIN);
	const unexpected = fields.filter(f => f !== "status");
	if (unexpected.length > 0)
		throw new BadRequestError(
			`Unexpected fields: ${unexpected.join(", ")} (only "status" may be updated)`,
			PLAIN
		);
	if (body.status !== "CANCELED")
		throw new BadRequestError(
			`Invalid or read-only status ${JSON.stringify(body.status)}. Allowed values: CANCELED`,
			PLAIN
		);
}
