import type { Sequelize, Transaction } from "sequelize";
import { select, write } from "../db/connection";
import { fileIdsIn, parseJobData, workspaceIdsIn, type JobData } from "../documents/job-data";
import type { InputEntry, JobInterface } from "../documents/types";
import { FieldError } from "../errors";

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
	/** the latest job_type_rev (revision numbers may have gaps) */
	rev_id: number;
	interface: JobInterface;
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
			jt.disk_out_mult_required, r.id AS rev_id, r.interface
		 FROM job_type jt
			JOIN LATERAL (
				SELECT id, interface FROM job_type_rev WHERE job_type_id = jt.id
				ORDER BY revision_num DESC LIMIT 1
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
 * workspaces of the whole batch in three queries. Throws FieldError (400) at the first problem:
 * an unknown or archived job type (on `job_type_id`), or job data that does not fit the job
 * type's current interface or names files or workspaces that do not fit (under `job_data`). A
 * paused job type is fine: its jobs are queued, just not scheduled.
 */
export async function prepareNewJobs(
	db: Sequelize,
	t: Transaction | undefined,
	requests: NewJobRequest[]
): Promise<PreparedJob[]> {
	const jobTypes = await loadJobTypesForQueue(
		db,
		requests.map(r => r.jobTypeId),
		t
	);
	const parsed = requests.map(request => {
		const typeField = request.jobTypeField ?? "job_type_id";
		const jobType = jobTypes.get(request.jobTypeId);
		if (!jobType) throw new FieldError(typeField, `no job type with id ${request.jobTypeId}`);
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
	});
	const facts = await loadDataFacts(
		db,
		parsed.map(p => p.data),
		t
	);
	return parsed.map(({ jobType, data }, i) => {
		const bytes = checkDataFacts(
			data,
			jobType.interface,
			facts,
			requests[i].jobData,
			requests[i].dataField ?? "job_data"
		);
		const disk = diskRequired(
			bytes,
			jobType.disk_out_const_required,
			jobType.disk_out_mult_required
		);
		return { jobType, data, ...disk };
	});
}

/** Rows written per statement: large batches are written in slices of this many jobs. */
const SLICE = 1000;

/**
 * Creates the requested jobs and queues them, inside the caller's transaction `t`: for each, a
 * USER trigger_event (processed at once) unless the request names its event, the job (QUEUED,
 * with the job type's latest revision, priority, timeout, max_tries, cpus and mem, the disk it
 * needs, its parsed data, num_exes 1), its first execution (QUEUED) and its `queue` row. The
 * writes are set-based: one statement per slice of SLICE jobs. Answers the new ids in the order
 * of the requests. Emitting `queue.changed` after the commit is the caller's part.
 *
 * Throws FieldError (400) before writing anything when a request is invalid (prepareNewJobs).
 */
export async function queueNewJobs(
	db: Sequelize,
	t: Transaction,
	requests: NewJobRequest[]
): Promise<QueuedJob[]> {
	if (requests.length === 0) return [];
	const prepared = await prepareNewJobs(db, t, requests);
	const queued: QueuedJob[] = [];
	for (let start = 0; start < prepared.length; start += SLICE) {
		const slice = prepared.slice(start, start + SLICE);
		const sliceRequests = requests.slice(start, start + SLICE);
		queued.push(...(await writeNewJobs(db, t, slice, sliceRequests)));
	}
	return queued;
}

async function writeNewJobs(
	db: Sequelize,
	t: Transaction,
	jobs: PreparedJob[],
	requests: NewJobRequest[]
): Promise<QueuedJob[]> {
	const newEvents = requests.filter(r => r.eventId === undefined).length;
	// Ids are drawn first so that each request knows its rows; nextval never hands one out twice.
	const [ids, eventIds] = await Promise.all([
		select<{ job_id: number; exe_id: number }>(
			db,
			`SELECT nextval(pg_get_serial_sequence('job', 'id'))::int AS job_id,
				nextval(pg_get_serial_sequence('job_exe', 'id'))::int AS exe_id
			 FROM generate_series(1, $1::int)`,
			[jobs.length],
			t
		),
		newEvents === 0
			? Promise.resolve([] as { id: number }[])
			: select<{ id: number }>(
					db,
					`SELECT nextval(pg_get_serial_sequence('trigger_event', 'id'))::int AS id
					 FROM generate_series(1, $1::int)`,
					[newEvents],
					t
				)
	]);
	let nextEvent = 0;
	const rows = jobs.map((job, i) => {
		const request = requests[i];
		const isNewEvent = request.eventId === undefined;
		const eventId = isNewEvent ? eventIds[nextEvent++].id : (request.eventId as number);
		return {
			job_id: ids[i].job_id,
			exe_id: ids[i].exe_id,
			event_id: eventId,
			new_event: isNewEvent,
			job_type_id: job.jobType.id,
			rev_id: job.jobType.rev_id,
			priority: job.jobType.priority,
			timeout: job.jobType.timeout,
			max_tries: job.jobType.max_tries,
			cpus: job.jobType.cpus_required,
			mem: job.jobType.mem_required,
			disk_in: job.diskIn,
			disk_out: job.diskOut,
			data: job.data
		};
	});
	// One statement: the foreign keys between the rows are checked at its end.
	await write(
		db,
		`WITH r AS (
			SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(job_id int, exe_id int, event_id int,
				new_event boolean, job_type_id int, rev_id int, priority int, timeout int,
				max_tries int, cpus float8, mem float8, disk_in float8, disk_out float8, data jsonb)
		 ), e AS (
			INSERT INTO trigger_event (id, type, rule_id, description, occurred, processed)
			SELECT event_id, 'USER', NULL, '{"user": "Anonymous"}'::jsonb, now(), now()
			FROM r WHERE new_event
			RETURNING id
		 ), j AS (
			INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, status, priority,
				num_exes, timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, queued, last_status_change)
			SELECT job_id, job_type_id, rev_id, event_id, 'QUEUED', priority, 1, timeout,
				max_tries, cpus, mem, disk_in, disk_out, data, now(), now()
			FROM r ORDER BY job_id
			RETURNING id
		 ), x AS (
			INSERT INTO job_exe (id, job_id, status, timeout, queued)
			SELECT exe_id, job_id, 'QUEUED', timeout, now() FROM r ORDER BY exe_id
			RETURNING id
		 ), q AS (
			INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
				mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
			SELECT exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out,
				disk_in + disk_out, now()
			FROM r ORDER BY exe_id
			RETURNING id
		 )
		 SELECT (SELECT count(*) FROM e) AS events, (SELECT count(*) FROM j) AS jobs,
			(SELECT count(*) FROM x) AS exes, (SELECT count(*) FROM q) AS queued`,
		[JSON.stringify(rows)],
		t
	);
	return rows.map(row => ({ jobId: row.job_id, jobExeId: row.exe_id, eventId: row.event_id }));
}
