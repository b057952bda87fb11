import type { Sequelize } from "sequelize";
import { writePrepared, type Sql } from "../db/run";
import type { JobRow } from "../records/job";
import { EXE_PART_SQL } from "../records/job-details";
import {
	forgetJobTypes,
	prepareEachNewJob,
	prepareNewJobs,
	type DataFacts,
	type PreparedJob
} from "./prepare-job";
import type { NewJobRequest, QueuedJob } from "./types";

/**
 * Creating jobs and putting them on the queue (Scale 3.0's Queue.queue_new_job and
 * JobManager.create_job / populate_job_data), for many jobs at once: the REST call, trigger
 * rules and recipes all come through queueNewJobs inside their own transaction.
 */

/** The write found a job type edited or archived since it was read: read again and retry. */
class StaleJobTypes extends Error {}

/** Rows written per statement: large batches are written in slices of this many jobs. */
const SLICE = 1000;

/**
 * Creates the requested jobs and queues them: for each, a USER trigger_event (processed at once)
 * unless the request names its event, the job (QUEUED, with the job type's latest revision,
 * priority, timeout, max_tries, cpus and mem, the disk it needs, its parsed data, num_exes 1), its
 * first execution (QUEUED) and its `queue` row. The writes are set-based: one statement per slice
 * of SLICE jobs, atomic on its own, so `t` (the caller's transaction) is optional. Answers the new
 * ids in the order of the requests. Emitting `queue.changed` after the commit is the caller's part.
 *
 * Throws FieldError (400) before writing anything when a request is invalid (prepareNewJobs).
 */
export async function queueNewJobs(
	db: Sequelize,
	t: Sql | undefined,
	requests: NewJobRequest[]
): Promise<QueuedJob[]> {
	if (requests.length === 0) return [];
	const queued: QueuedJob[] = [];
	for (let start = 0; start < requests.length; start += SLICE) {
		const slice = requests.slice(start, start + SLICE);
		queued.push(...(await queueSlice(db, t, slice)));
	}
	return queued;
}

/**
 * Queues requests that arrived separately (concurrent `POST /queue/new-job/` calls) in one
 * statement and one commit, each checked on its own so that a bad one fails alone: answers, per
 * request in order, what was queued or the error that refused it. When a job type changed
 * meanwhile, each request is queued on its own instead (see queueSlice).
 */
export async function queueEachNewJob(
	db: Sequelize,
	requests: NewJobRequest[],
	withDetails = false
): Promise<(QueuedJob | Error)[]> {
	const prepared = await prepareEachNewJob(db, undefined, requests, true);
	const valid = prepared.flatMap((p, i) => (p instanceof Error ? [] : [i]));
	const answers = refusalsOnly(prepared);
	if (valid.length === 0) return answers;
	let queued: QueuedJob[];
	try {
		queued = await writeNewJobs(
			db,
			undefined,
			valid.map(i => prepared[i] as PreparedJob),
			valid.map(i => requests[i]),
			false,
			withDetails
		);
	} catch (error) {
		if (!(error instanceof StaleJobTypes)) throw error;
		// a job type changed meanwhile: each request on its own, its job type read afresh
		forgetJobTypes(
			db,
			requests.map(r => r.jobTypeId)
		);
		return Promise.all(
			requests.map(request =>
				queueNewJobs(db, undefined, [request]).then(
					([job]) => job,
					(refusal: Error) => refusal
				)
			)
		);
	}
	valid.forEach((i, k) => (answers[i] = queued[k]));
	return answers;
}

/**
 * The answers of a batch before its write: each refusal as it is, and a hole for each job the
 * caller fills in from the write (not a placeholder Error, which captures a stack: one per job
 * of every batch, ~2–5 µs each).
 */
function refusalsOnly(prepared: (PreparedJob | Error)[]): (QueuedJob | Error)[] {
	return prepared.map(p => (p instanceof Error ? p : null)) as (QueuedJob | Error)[];
}

/**
 * Queues the requests that are valid inside the caller's transaction and answers, per request
 * in order, what was queued or the error that refused it: trigger rules fire for files one by
 * one, and a file that does not fit one rule's job type must not hold back the others.
 * `facts`: the requests' files and workspaces, when the caller has read them in `t` already
 * (prepareEachNewJob).
 */
export async function queueValidNewJobs(
	db: Sequelize,
	t: Sql,
	requests: NewJobRequest[],
	facts?: DataFacts
): Promise<(QueuedJob | Error)[]> {
	const attempt = async (cached: boolean) => {
		const prepared = await prepareEachNewJob(db, t, requests, cached, facts);
		const valid = prepared.flatMap((p, i) => (p instanceof Error ? [] : [i]));
		const answers = refusalsOnly(prepared);
		if (valid.length === 0) return answers;
		// one statement: a stale job type found then leaves nothing written to retry over
		const queued = await writeNewJobs(
			db,
			t,
			valid.map(i => prepared[i] as PreparedJob),
			valid.map(i => requests[i]),
			!cached
		);
		valid.forEach((i, k) => (answers[i] = queued[k]));
		return answers;
	};
	try {
		return await attempt(true);
	} catch (error) {
		if (!(error instanceof StaleJobTypes)) throw error;
		forgetJobTypes(
			db,
			requests.map(r => r.jobTypeId)
		);
		return attempt(false);
	}
}

/** Writes one slice, from cached job types first and from fresh ones when a cached one is stale. */
async function queueSlice(
	db: Sequelize,
	t: Sql | undefined,
	requests: NewJobRequest[]
): Promise<QueuedJob[]> {
	try {
		return await writeNewJobs(db, t, await prepareNewJobs(db, t, requests, true), requests);
	} catch (error) {
		if (!(error instanceof StaleJobTypes)) throw error;
		forgetJobTypes(
			db,
			requests.map(r => r.jobTypeId)
		);
		// read fresh (so an archive now fails with its own message); the guard stays, since the
		// job type may change again between this read and the write
		return writeNewJobs(db, t, await prepareNewJobs(db, t, requests), requests, true);
	}
}

async function writeNewJobs(
	db: Sequelize,
	t: Sql | undefined,
	jobs: PreparedJob[],
	requests: NewJobRequest[],
	lastTry = false,
	withDetails = false
): Promise<QueuedJob[]> {
	const rows = jobs.map((job, i) => ({
		ord: i,
		event_id: requests[i].eventId ?? null,
		job_type_id: job.jobType.id,
		type_revision: job.jobType.revision_num,
		rev_id: job.jobType.rev_id,
		priority: job.jobType.priority,
		timeout: job.jobType.timeout,
		max_tries: job.jobType.max_tries,
		cpus: job.jobType.cpus_required,
		mem: job.jobType.mem_required,
		disk_in: job.diskIn,
		disk_out: job.diskOut,
		data: job.data
	}));
	const written = await writePrepared<WrittenRow | WrittenWithDetails>(
		db,
		withDetails ? WRITE_NEW_JOBS_WITH_DETAILS_SQL : WRITE_NEW_JOBS_SQL,
		[JSON.stringify(rows)],
		t
	);
	if (written.length !== rows.length) {
		if (lastTry)
			throw new Error(
				"the job types of new jobs kept changing while the jobs were written; try again"
			);
		throw new StaleJobTypes();
	}
	if (!withDetails)
		return (written as WrittenRow[]).map(row => ({
			jobId: row.job_id,
			jobExeId: row.exe_id,
			eventId: row.event_id
		}));
	return written.map((row, i) => {
		const { queued_exe_id, part_event, part_exes, ...job } = row as WrittenWithDetails;
		const queued: QueuedJob = { jobId: job.id, jobExeId: queued_exe_id, eventId: job.event_id };
		const jobType = jobs[i].jobType;
		// a job of an event it was given: that event (and its rule) is read with the details
		if (part_event)
			queued.details = {
				...job,
				part_job_type: jobType.part_job_type,
				part_rev: jobType.part_rev,
				part_event,
				part_error: null,
				part_exes,
				part_recipes: []
			};
		return queued;
	});
}

type WrittenRow = { job_id: number; exe_id: number; event_id: number };
type WrittenWithDetails = JobRow & {
	queued_exe_id: number;
	part_event: Record<string, unknown> | null;
	part_exes: Record<string, unknown>[];
};

/**
 * Writes new jobs: `$1` is a JSON array of the rows of writeNewJobs, read as `json`, not `jsonb`:
 * it is read once, and `jsonb` would first build its binary form (~1.6 µs more per row of 13
 * columns; the statements of lib/ingest/record.ts and lib/recipes/ read theirs so too). One
 * statement, atomic on its own; its rows name each other by the ids it draws (no key checks them as
 * they are written: migration 0022). `fresh` holds when every job type is still active at the
 * revision_num the values were taken from; otherwise nothing is written (every insert reads `r`,
 * which is then empty). The ids are drawn in `r`, which PostgreSQL computes once (a CTE with
 * volatile functions is materialized), in the order of the requests, from the sequences the
 * columns' defaults draw from, named (`pg_get_serial_sequence` looked each up again for every row:
 * ~3 µs a call, three per job; test/service/sequences.test.ts checks the names). `details` adds
 * what the details of the new jobs need besides their job type's parts (which the caller holds,
 * exact at the revision_num checked here): the job rows as written, and their event and execution
 * as JSON, built as the details read builds them.
 */
function writeNewJobsSql(details: boolean): string {
	const returning = details ? "RETURNING *" : "";
	return `WITH given AS (
			SELECT * FROM json_to_recordset($1::json) AS g(event_id int,
				job_type_id int, type_revision int, rev_id int, priority int, timeout int,
				max_tries int, cpus float8, mem float8, disk_in float8, disk_out float8, data jsonb,
				ord int)
		 ), fresh AS (
			SELECT NOT EXISTS (
				SELECT 1 FROM given g WHERE NOT EXISTS (
					SELECT 1 FROM job_type jt
					WHERE jt.id = g.job_type_id AND jt.is_active
						AND jt.revision_num = g.type_revision
				)
			) AS ok
		 ), r AS (
			SELECT g.*, g.event_id IS NULL AS new_event,
				nextval('job_id_seq'::regclass)::int AS job_id,
				nextval('job_exe_id_seq'::regclass)::int AS exe_id,
				coalesce(g.event_id,
					nextval('trigger_event_id_seq'::regclass)::int) AS eid
			FROM given g WHERE (SELECT ok FROM fresh) ORDER BY g.ord
		 ), e AS (
			INSERT INTO trigger_event (id, type, rule_id, description, occurred, processed)
			SELECT eid, 'USER', NULL, '{"user": "Anonymous"}'::jsonb, now(), now()
			FROM r WHERE new_event ${returning}
		 ), j AS (
			INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, status, priority,
				num_exes, timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, queued, last_status_change)
			SELECT job_id, job_type_id, rev_id, eid, 'QUEUED', priority, 1, timeout,
				max_tries, cpus, mem, disk_in, disk_out, data, now(), now()
			FROM r ORDER BY job_id ${returning}
		 ), x AS (
			INSERT INTO job_exe (id, job_id, job_type_id, status, timeout, queued)
			SELECT exe_id, job_id, job_type_id, 'QUEUED', timeout, now() FROM r ORDER BY exe_id
			${returning}
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
			SELECT exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out,
				disk_in + disk_out, now()
			FROM r ORDER BY exe_id
		 )
		 ${
				details
					? `SELECT r.exe_id AS queued_exe_id, jj.*,
			(SELECT jsonb_build_object('id', ev.id, 'type', ev.type, 'rule_id', ev.rule_id,
				'occurred', ev.occurred, 'description', ev.description, 'rule_type', NULL,
				'rule_name', NULL, 'rule_is_active', NULL, 'rule_configuration', NULL)
			 FROM e ev WHERE ev.id = r.eid) AS part_event,
			(SELECT jsonb_build_array(${EXE_PART_SQL}) FROM x WHERE x.id = r.exe_id) AS part_exes
		 FROM r JOIN j jj ON jj.id = r.job_id ORDER BY r.ord`
					: "SELECT job_id, exe_id, eid AS event_id FROM r ORDER BY ord"
			}`;
}

const WRITE_NEW_JOBS_SQL = writeNewJobsSql(false);
const WRITE_NEW_JOBS_WITH_DETAILS_SQL = writeNewJobsSql(true);
