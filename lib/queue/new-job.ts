import type { Sequelize, Transaction } from "sequelize";
import { select, writePrepared } from "../db/connection";
import { fileIdsIn, parseJobData, workspaceIdsIn, type JobData } from "../documents/job-data";
import type { InputEntry, JobInterface } from "../documents/types";
import { FieldError } from "../errors";
import type { JobRow } from "../models/job";
import {
	EXE_PART_SQL,
	JOB_TYPE_PART_SQL,
	REV_PART_SQL,
	type DetailsRow
} from "../models/job-details";

/**
 * Creating jobs and putting them on the queue (Scale 3.0's Queue.queue_new_job and
 * JobManager.create_job / populate_job_data), for many jobs at once: the REST call, trigger
 * rules and recipes all come through queueNewJobs inside their own transaction.
 */

/** One job to create and queue. */
export interface NewJobRequest {
	jobTypeId: number;
	/** the job data document as given (checked against the job type's current interface) */
	jobData: unknown;
	/** the trigger event that caused the job; when absent a USER event is created, processed */
	eventId?: number;
	/** field path of the job data in error messages (default `job_data`) */
	dataField?: string;
	/** field path of the job type id in error messages (default `job_type_id`) */
	jobTypeField?: string;
}

/** What was created for one request, in the order of the requests. */
export interface QueuedJob {
	jobId: number;
	jobExeId: number;
	eventId: number;
	/**
	 * The job as written, with the parts of its details (when asked for and the job has a new
	 * USER event): its details without reading them back.
	 */
	details?: DetailsRow;
}

/** A job type with what a new job takes from it: its current revision and resources. */
export interface JobTypeForQueue {
	id: number;
	name: string;
	version: string;
	is_active: boolean;
	priority: number;
	timeout: number;
	max_tries: number;
	cpus_required: number;
	mem_required: number;
	disk_out_const_required: number;
	disk_out_mult_required: number;
	/** the job type's edit counter: every edit raises it, so an unchanged one means unchanged values */
	revision_num: number;
	/** the latest job_type_rev (revision numbers may have gaps) */
	rev_id: number;
	interface: JobInterface;
	/**
	 * The job type's and that revision's parts of job details: exact for a job written at this
	 * revision_num, which the write checks.
	 */
	part_job_type: Record<string, unknown>;
	part_rev: Record<string, unknown>;
}

/** A new job checked and ready to write. */
export interface PreparedJob {
	jobType: JobTypeForQueue;
	data: JobData;
	/** MiB */
	diskIn: number;
	/** MiB */
	diskOut: number;
}

const MIB = 1024 * 1024;

/**
 * Disk a job needs, in MiB rounded up to whole MiB as Scale's populate_job_data does: in = the
 * total size of its distinct input files; out = const + mult × in.
 */
export function diskRequired(
	inputBytes: number,
	constMiB: number,
	mult: number
): { diskIn: number; diskOut: number } {
	const diskIn = Math.ceil(inputBytes / MIB);
	return { diskIn, diskOut: Math.ceil(mult * diskIn + constMiB) };
}

/** The job types with the given ids and their latest revisions, by id, in one query. */
export async function loadJobTypesForQueue(
	db: Sequelize,
	ids: number[],
	t?: Transaction
): Promise<Map<number, JobTypeForQueue>> {
	const wanted = [...new Set(ids)];
	if (wanted.length === 0) return new Map();
	const rows = await select<JobTypeForQueue>(
		db,
		`SELECT jt.id, jt.name, jt.version, jt.is_active, jt.priority, jt.timeout, jt.max_tries,
			jt.cpus_required, jt.mem_required, jt.disk_out_const_required,
			jt.disk_out_mult_required, jt.revision_num, r.id AS rev_id, r.interface,
			${JOB_TYPE_PART_SQL} AS part_job_type, ${REV_PART_SQL} AS part_rev
		 FROM job_type jt
			JOIN LATERAL (
				SELECT id, revision_num, interface, created FROM job_type_rev
				WHERE job_type_id = jt.id ORDER BY revision_num DESC LIMIT 1
			) r ON true
		 WHERE jt.id = ANY($1::int[])`,
		[wanted],
		t
	);
	return new Map(
		rows.map(row => [
			row.id,
			{
				...row,
				cpus_required: Number(row.cpus_required),
				mem_required: Number(row.mem_required),
				disk_out_const_required: Number(row.disk_out_const_required),
				disk_out_mult_required: Number(row.disk_out_mult_required)
			}
		])
	);
}

/**
 * Job types as new jobs last saw them, per database. An entry may be stale: the write of new
 * jobs checks, in the same statement, that each job type is still active at the cached
 * revision_num (every edit raises it) and writes nothing otherwise; the caller then reads the job
 * types again. So the hot path (the same job types over and over) reads nothing before writing.
 */
const jobTypeCache = new WeakMap<Sequelize, Map<number, JobTypeForQueue>>();
/** Job types cached per database at most (the oldest are forgotten). */
const CACHED_JOB_TYPES = 1000;

async function cachedJobTypesForQueue(
	db: Sequelize,
	ids: number[],
	t: Transaction | undefined
): Promise<Map<number, JobTypeForQueue>> {
	let cache = jobTypeCache.get(db);
	if (!cache) jobTypeCache.set(db, (cache = new Map()));
	const found = new Map<number, JobTypeForQueue>();
	const missing: number[] = [];
	for (const id of ids) {
		const hit = cache.get(id);
		if (hit) found.set(id, hit);
		else missing.push(id);
	}
	if (missing.length === 0) return found;
	for (const [id, jobType] of await loadJobTypesForQueue(db, missing, t)) {
		found.set(id, jobType);
		// an archived job type is not cached: its requests fail, and the next read sees a revival
		if (!jobType.is_active) continue;
		cache.delete(id);
		cache.set(id, jobType);
		if (cache.size > CACHED_JOB_TYPES) cache.delete(cache.keys().next().value as number);
	}
	return found;
}

function forgetJobTypes(db: Sequelize, ids: number[]): void {
	const cache = jobTypeCache.get(db);
	for (const id of ids) cache?.delete(id);
}

/** The write found a job type edited or archived since it was read: read again and retry. */
class StaleJobTypes extends Error {}

interface FileFacts {
	id: number;
	media_type: string;
	file_size: string | number;
	is_deleted: boolean;
}

interface WorkspaceFacts {
	id: number;
	name: string;
	is_active: boolean;
}

/** What the checks of job data read from the database, for a whole batch at once. */
export interface DataFacts {
	files: Map<number, FileFacts>;
	workspaces: Map<number, WorkspaceFacts>;
}

/** Reads the files and workspaces the given job data documents name, in two queries. */
export async function loadDataFacts(
	db: Sequelize,
	data: JobData[],
	t?: Transaction
): Promise<DataFacts> {
	const fileIds = [...new Set(data.flatMap(fileIdsIn))];
	const workspaceIds = [...new Set(data.flatMap(workspaceIdsIn))];
	const [files, workspaces] = await Promise.all([
		fileIds.length === 0
			? Promise.resolve([] as FileFacts[])
			: select<FileFacts>(
					db,
					`SELECT id, media_type, file_size, is_deleted FROM scale_file
					 WHERE id = ANY($1::int[])`,
					[fileIds],
					t
				),
		workspaceIds.length === 0
			? Promise.resolve([] as WorkspaceFacts[])
			: select<WorkspaceFacts>(
					db,
					"SELECT id, name, is_active FROM workspace WHERE id = ANY($1::int[])",
					[workspaceIds],
					t
				)
	]);
	return {
		files: new Map(files.map(f => [f.id, f])),
		workspaces: new Map(workspaces.map(w => [w.id, w]))
	};
}

/**
 * Checks parsed job data against what exists (Scale's JobData.validate_input_files and
 * validate_output_files): every file given exists, is not deleted and has a media type its
 * input accepts; every output workspace exists and is active. Answers the total size in bytes of
 * the distinct input files. Throws FieldError naming the entry at fault under `field`.
 */
export function checkDataFacts(
	data: JobData,
	iface: JobInterface,
	facts: DataFacts,
	raw: unknown,
	field = "job_data"
): number {
	const inputs = new Map<string, InputEntry>(iface.input_data.map(i => [i.name, i]));
	const rawInputs = ((raw as { input_data?: unknown[] } | null)?.input_data ?? []) as Record<
		string,
		unknown
	>[];
	const counted = new Set<number>();
	let bytes = 0;
	data.input_data.forEach((entry, i) => {
		if (!("file_id" in entry) && !("file_ids" in entry)) return;
		const ids = "file_id" in entry ? [entry.file_id] : entry.file_ids;
		const input = inputs.get(entry.name) as InputEntry;
		const accepted = input.media_types ?? [];
		ids.forEach((id, k) => {
			// A files input given one file_id is normalised to file_ids; name what was sent.
			const at =
				"file_ids" in entry && rawInputs[i] && rawInputs[i].file_ids !== undefined
					? `${field}.input_data[${i}].file_ids[${k}]`
					: `${field}.input_data[${i}].file_id`;
			const file = facts.files.get(id);
			if (!file) throw new FieldError(at, `no file with id ${id}`);
			if (file.is_deleted) throw new FieldError(at, `file ${id} is deleted`);
			if (accepted.length > 0 && !accepted.includes(file.media_type))
				throw new FieldError(
					at,
					`file ${id} has media type "${file.media_type}", which input "${entry.name}" ` +
						`does not accept (accepted: ${accepted.join(", ")})`
				);
			if (!counted.has(id)) {
				counted.add(id);
				bytes += Number(file.file_size);
			}
		});
	});
	data.output_data.forEach((entry, i) => {
		const at = `${field}.output_data[${i}].workspace_id`;
		const workspace = facts.workspaces.get(entry.workspace_id);
		if (!workspace) throw new FieldError(at, `no workspace with id ${entry.workspace_id}`);
		if (!workspace.is_active)
			throw new FieldError(
				at,
				`workspace "${workspace.name}" (id ${workspace.id}) is not active`
			);
	});
	return bytes;
}

/**
 * Checks new job requests and computes what each job takes, reading the job types, files and
 * workspaces of the whole batch in three queries at most. Throws FieldError (400) at the first
 * problem: an unknown or archived job type (on `job_type_id`), or job data that does not fit the
 * job type's current interface or names files or workspaces that do not fit (under `job_data`).
 * A paused job type is fine: its jobs are queued, just not scheduled.
 */
export async function prepareNewJobs(
	db: Sequelize,
	t: Transaction | undefined,
	requests: NewJobRequest[],
	cached = false
): Promise<PreparedJob[]> {
	const prepared = await prepareEachNewJob(db, t, requests, cached);
	for (const p of prepared) if (p instanceof Error) throw p;
	return prepared as PreparedJob[];
}

/** As prepareNewJobs, answering per request what it takes or the error that refuses it. */
async function prepareEachNewJob(
	db: Sequelize,
	t: Transaction | undefined,
	requests: NewJobRequest[],
	cached: boolean
): Promise<(PreparedJob | Error)[]> {
	const ids = requests.map(r => r.jobTypeId);
	const jobTypes = cached
		? await cachedJobTypesForQueue(db, ids, t)
		: await loadJobTypesForQueue(db, ids, t);
	const parsed = requests.map(request => {
		try {
			const typeField = request.jobTypeField ?? "job_type_id";
			const jobType = jobTypes.get(request.jobTypeId);
			if (!jobType)
				throw new FieldError(typeField, `no job type with id ${request.jobTypeId}`);
			if (!jobType.is_active)
				throw new FieldError(
					typeField,
					`job type "${jobType.name}" version "${jobType.version}" is archived; ` +
						`only active job types take new jobs`
				);
			const data = parseJobData(
				request.jobData ?? {},
				jobType.interface,
				request.dataField ?? "job_data"
			);
			return { jobType, data };
		} catch (error) {
			return error as Error;
		}
	});
	const facts = await loadDataFacts(
		db,
		parsed.flatMap(p => (p instanceof Error ? [] : [p.data])),
		t
	);
	return parsed.map((p, i) => {
		if (p instanceof Error) return p;
		try {
			const bytes = checkDataFacts(
				p.data,
				p.jobType.interface,
				facts,
				requests[i].jobData,
				requests[i].dataField ?? "job_data"
			);
			const disk = diskRequired(
				bytes,
				p.jobType.disk_out_const_required,
				p.jobType.disk_out_mult_required
			);
			return { jobType: p.jobType, data: p.data, ...disk };
		} catch (error) {
			return error as Error;
		}
	});
}

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
	t: Transaction | undefined,
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
	const answers: (QueuedJob | Error)[] = prepared.map(p =>
		p instanceof Error ? p : new Error("not written")
	);
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
 * Queues the requests that are valid inside the caller's transaction and answers, per request
 * in order, what was queued or the error that refused it: trigger rules fire for files one by
 * one, and a file that does not fit one rule's job type must not hold back the others.
 */
export async function queueValidNewJobs(
	db: Sequelize,
	t: Transaction,
	requests: NewJobRequest[]
): Promise<(QueuedJob | Error)[]> {
	const attempt = async (cached: boolean) => {
		const prepared = await prepareEachNewJob(db, t, requests, cached);
		const valid = prepared.flatMap((p, i) => (p instanceof Error ? [] : [i]));
		const answers: (QueuedJob | Error)[] = prepared.map(p =>
			p instanceof Error ? p : new Error("not written")
		);
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
	t: Transaction | undefined,
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
	t: Transaction | undefined,
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
 * Writes new jobs: `$1` is a JSON array of the rows of writeNewJobs. One statement, atomic on its
 * own: the foreign keys between the rows are checked at its end. `fresh` holds when every job
 * type is still active at the revision_num the values were taken from; otherwise nothing is
 * written (every insert reads `r`, which is then empty). The ids are drawn in `r`, which
 * PostgreSQL computes once (a CTE with volatile functions is materialized), in the order of the
 * requests. `details` adds what the details of the new jobs need besides their job type's parts
 * (which the caller holds, exact at the revision_num checked here): the job rows as written, and
 * their event and execution as JSON, built as the details read builds them.
 */
function writeNewJobsSql(details: boolean): string {
	const returning = details ? "RETURNING *" : "";
	return `WITH given AS (
			SELECT * FROM jsonb_to_recordset($1::jsonb) AS g(event_id int,
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
				nextval(pg_get_serial_sequence('job', 'id'))::int AS job_id,
				nextval(pg_get_serial_sequence('job_exe', 'id'))::int AS exe_id,
				coalesce(g.event_id,
					nextval(pg_get_serial_sequence('trigger_event', 'id'))::int) AS eid
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
