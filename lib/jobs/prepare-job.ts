import type { Sequelize } from "sequelize";
import { select, type Sql } from "../db/run";
import { fileIdsIn, parseJobData, workspaceIdsIn, type JobData } from "../documents/job-data";
import type { InputEntry, JobInterface } from "../documents/types";
import { FieldError } from "../errors";
import { JOB_TYPE_PART_SQL, REV_PART_SQL } from "../records/job-details";
import type { NewJobRequest } from "./types";

/**
 * New jobs checked before they are written (Scale 3.0's Queue.queue_new_job checks): each
 * request's job type (active, at its current revision, kept per database between requests), its
 * job data against the interface, the files and workspaces it names, and the disk it needs.
 */

/** A job type's identity and what a new job of it takes from it as its own (both kinds of queueing). */
export interface JobTypeQueueFields {
	id: number;
	name: string;
	version: string;
	is_active: boolean;
	/** the latest job_type_rev (revision numbers may have gaps) */
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

/** A job type with what a new job takes from it: its current revision and resources. */
export interface JobTypeForQueue extends JobTypeQueueFields {
	/** the job type's edit counter: every edit raises it, so an unchanged one means unchanged values */
	revision_num: number;
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
	t?: Sql
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
	t: Sql | undefined
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

export function forgetJobTypes(db: Sequelize, ids: number[]): void {
	const cache = jobTypeCache.get(db);
	for (const id of ids) cache?.delete(id);
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
export async function loadDataFacts(db: Sequelize, data: JobData[], t?: Sql): Promise<DataFacts> {
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
 * The job data of a request whose document differs from the others of its template only in its
 * file ids (NewJobRequest.dataTemplate): the template's first document is checked, once, and each
 * document takes that result with its own ids. Why: a burst of files matching one trigger rule
 * checked the same document shape thousands of times (the schema's validator, the text checks,
 * the interface's names), and the optimizing compiler compiled those checks during the burst.
 */
function fromTemplate(
	templates: Map<string, JobData | Error>,
	key: string,
	doc: unknown,
	iface: JobInterface,
	field: string
): JobData {
	let template = templates.get(key);
	if (template === undefined) {
		try {
			template = parseJobData(doc, iface, field);
		} catch (error) {
			template = error as Error;
		}
		templates.set(key, template);
	}
	if (template instanceof Error) throw template;
	const given = (doc as { input_data: { file_id?: number; file_ids?: number[] }[] }).input_data;
	return {
		version: template.version,
		input_data: template.input_data.map((entry, i) => {
			if ("file_id" in entry)
				return { name: entry.name, file_id: given[i].file_id as number };
			if ("file_ids" in entry)
				return {
					name: entry.name,
					file_ids: given[i].file_ids
						? [...given[i].file_ids!]
						: [given[i].file_id as number]
				};
			return entry;
		}),
		output_data: template.output_data
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
	// where a file at fault was given, spelled out only then: a files input given one file_id is
	// normalised to file_ids, so name what was sent
	const fileAt = (i: number, k: number) =>
		"file_ids" in data.input_data[i] && rawInputs[i] && rawInputs[i].file_ids !== undefined
			? `${field}.input_data[${i}].file_ids[${k}]`
			: `${field}.input_data[${i}].file_id`;
	const counted = new Set<number>();
	let bytes = 0;
	data.input_data.forEach((entry, i) => {
		if (!("file_id" in entry) && !("file_ids" in entry)) return;
		const ids = "file_id" in entry ? [entry.file_id] : entry.file_ids;
		const input = inputs.get(entry.name) as InputEntry;
		const accepted = input.media_types ?? [];
		ids.forEach((id, k) => {
			const file = facts.files.get(id);
			if (!file) throw new FieldError(fileAt(i, k), `no file with id ${id}`);
			if (file.is_deleted) throw new FieldError(fileAt(i, k), `file ${id} is deleted`);
			if (accepted.length > 0 && !accepted.includes(file.media_type))
				throw new FieldError(
					fileAt(i, k),
					`file ${id} has media type "${file.media_type}", which input "${entry.name}" ` +
						`does not accept (accepted: ${accepted.join(", ")})`
				);
			if (!counted.has(id)) {
				counted.add(id);
				bytes += Number(file.file_size);
			}
		});
	});
	const workspaceAt = (i: number) => `${field}.output_data[${i}].workspace_id`;
	data.output_data.forEach((entry, i) => {
		const workspace = facts.workspaces.get(entry.workspace_id);
		if (!workspace)
			throw new FieldError(workspaceAt(i), `no workspace with id ${entry.workspace_id}`);
		if (!workspace.is_active)
			throw new FieldError(
				workspaceAt(i),
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
	t: Sql | undefined,
	requests: NewJobRequest[],
	cached = false
): Promise<PreparedJob[]> {
	const prepared = await prepareEachNewJob(db, t, requests, cached);
	for (const p of prepared) if (p instanceof Error) throw p;
	return prepared as PreparedJob[];
}

/**
 * As prepareNewJobs, answering per request what it takes or the error that refuses it. `given`
 * are the files and workspaces the requests name, when the caller read them in this transaction
 * already (the triggers service, from its events' files and its rules' workspaces).
 */
export async function prepareEachNewJob(
	db: Sequelize,
	t: Sql | undefined,
	requests: NewJobRequest[],
	cached: boolean,
	given?: DataFacts
): Promise<(PreparedJob | Error)[]> {
	const ids = requests.map(r => r.jobTypeId);
	const jobTypes = cached
		? await cachedJobTypesForQueue(db, ids, t)
		: await loadJobTypesForQueue(db, ids, t);
	const templates = new Map<string, JobData | Error>();
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
			const field = request.dataField ?? "job_data";
			const data =
				request.dataTemplate === undefined
					? parseJobData(request.jobData ?? {}, jobType.interface, field)
					: fromTemplate(
							templates,
							`${jobType.id}\0${request.dataTemplate}`,
							request.jobData,
							jobType.interface,
							field
						);
			return { jobType, data };
		} catch (error) {
			return error as Error;
		}
	});
	const facts =
		given ??
		(await loadDataFacts(
			db,
			parsed.flatMap(p => (p instanceof Error ? [] : [p.data])),
			t
		));
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
