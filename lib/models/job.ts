import type { Sequelize, Transaction } from "sequelize";
import { select, selectPrepared } from "../db/connection";
import type { JobData } from "../documents/job-data";
import type { JobInterface } from "../documents/types";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../list/iso8601";
import type { ListFilter } from "../list/params";
import type { RecordSpec } from "../list/cached-list";
import type { ListSource } from "../list/run";
import { serializeError, type ErrorRow } from "./error";
import { serializeJobType, type JobTypeRow } from "./job-type";
import { loadFiles, serializeScaleFile, type ScaleFileRow } from "./scale-file";
import { serializeRecipe, type RecipeListRow } from "./recipe-record";

/**
 * Jobs (Scale 3.0's job/models.py Job and JobManager, job/serializers.py): the job record as
 * lists show it, the details record, the updates list and the job list source.
 */

export const JOB_STATUSES = [
	"PENDING",
	"BLOCKED",
	"QUEUED",
	"RUNNING",
	"FAILED",
	"COMPLETED",
	"CANCELED"
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses a job leaves only by a transition of its own (never by time). */
export const UNFINISHED_JOB_STATUSES: JobStatus[] = ["PENDING", "BLOCKED", "QUEUED", "RUNNING"];

const ERROR_CATEGORIES = ["SYSTEM", "ALGORITHM", "DATA"];

/** The job type fields a job summary embeds (Scale's JobTypeBaseSerializer). */
export const JOB_TYPE_BASE_FIELDS = [
	"id",
	"name",
	"version",
	"title",
	"description",
	"category",
	"author_name",
	"author_url",
	"is_system",
	"is_long_running",
	"is_active",
	"is_operational",
	"is_paused",
	"icon_code"
] as const;

const ERROR_BASE_FIELDS = ["id", "name", "title", "description", "category", "is_builtin"] as const;

/** The job's own columns a job record shows (not its documents). */
const JOB_FIELDS = [
	"id",
	"job_type_id",
	"job_type_rev_id",
	"event_id",
	"error_id",
	"status",
	"priority",
	"num_exes",
	"timeout",
	"max_tries",
	"cpus_required",
	"mem_required",
	"disk_in_required",
	"disk_out_required",
	"created",
	"queued",
	"started",
	"ended",
	"last_status_change",
	"last_modified"
] as const;

/** The job columns of a job record (the `job` table's own, without data and results). */
export interface JobFields {
	id: number;
	job_type_id: number;
	job_type_rev_id: number;
	event_id: number;
	error_id: number | null;
	status: JobStatus;
	priority: number;
	num_exes: number;
	timeout: number;
	max_tries: number;
	cpus_required: number | null;
	mem_required: number | null;
	disk_in_required: number | null;
	disk_out_required: number | null;
	created: Date;
	queued: Date | null;
	started: Date | null;
	ended: Date | null;
	last_status_change: Date | null;
	last_modified: Date;
}

/** A `job` row read whole. */
export interface JobRow extends JobFields {
	data: JobData;
	results: { version?: string; output_data?: unknown[] } | null;
}

/** A job read with JOB_COLUMNS: its columns, and its type, revision, event and error joined. */
export interface JobListRow extends JobFields {
	jt_name: string;
	jt_version: string;
	jt_title: string | null;
	jt_description: string | null;
	jt_category: string | null;
	jt_author_name: string | null;
	jt_author_url: string | null;
	jt_is_system: boolean;
	jt_is_long_running: boolean;
	jt_is_active: boolean;
	jt_is_operational: boolean;
	jt_is_paused: boolean;
	jt_icon_code: string | null;
	rev_num: number;
	ev_type: string;
	ev_rule_id: number | null;
	ev_occurred: Date;
	er_name: string | null;
	er_title: string | null;
	er_description: string | null;
	er_category: string | null;
	er_is_builtin: boolean | null;
	/** only in rows of the updates list */
	data?: JobData;
}

/** The joins of job records: the job (`j`) with its type (`jt`), revision (`r`), event (`ev`) and error (`er`). */
export const JOB_JOINS = `LEFT JOIN job_type jt ON jt.id = j.job_type_id
	LEFT JOIN job_type_rev r ON r.id = j.job_type_rev_id
	LEFT JOIN trigger_event ev ON ev.id = j.event_id
	LEFT JOIN error er ON er.id = j.error_id`;

/** FROM clause of job records. */
export const JOB_FROM = `job j ${JOB_JOINS}`;

/**
 * Filters by job type name or category on a list table's own job type column (`column`): the
 * types' ids are looked up first (see ListFilter).
 */
export const jobTypeNameFilter = (column: string): ListFilter => ({
	column,
	type: "string",
	lookup: "SELECT id FROM job_type WHERE name = ANY($1::text[])",
	lookupTable: "job_type"
});
export const jobTypeCategoryFilter = (column: string): ListFilter => ({
	column,
	type: "string",
	lookup: "SELECT id FROM job_type WHERE category = ANY($1::text[])",
	lookupTable: "job_type"
});

/** The SELECT list of JobListRow over JOB_FROM. */
export const JOB_COLUMNS = [
	...JOB_FIELDS.map(f => `j.${f}`),
	...JOB_TYPE_BASE_FIELDS.filter(f => f !== "id").map(f => `jt.${f} AS jt_${f}`),
	"r.revision_num AS rev_num",
	"ev.type AS ev_type",
	"ev.rule_id AS ev_rule_id",
	"ev.occurred AS ev_occurred",
	...ERROR_BASE_FIELDS.filter(f => f !== "id").map(f => `er.${f} AS er_${f}`)
].join(", ");

function date(d: Date | null | undefined): string | null {
	return d ? formatDatetime(d) : null;
}

function num(v: number | string | null | undefined): number | null {
	return v === null || v === undefined ? null : Number(v);
}

/** The job type columns (`jt_`) of a row with the type's id. */
export type JobTypeBaseColumns = Pick<
	JobListRow,
	| "job_type_id"
	| "jt_name"
	| "jt_version"
	| "jt_title"
	| "jt_description"
	| "jt_category"
	| "jt_author_name"
	| "jt_author_url"
	| "jt_is_system"
	| "jt_is_long_running"
	| "jt_is_active"
	| "jt_is_operational"
	| "jt_is_paused"
	| "jt_icon_code"
>;

/** The job type summary of a job row (Scale's JobTypeBaseSerializer). */
export function jobTypeBaseOf(row: JobTypeBaseColumns) {
	return {
		id: row.job_type_id,
		name: row.jt_name,
		version: row.jt_version,
		title: row.jt_title,
		description: row.jt_description,
		category: row.jt_category,
		author_name: row.jt_author_name,
		author_url: row.jt_author_url,
		is_system: row.jt_is_system,
		is_long_running: row.jt_is_long_running,
		is_active: row.jt_is_active,
		is_operational: row.jt_is_operational,
		is_paused: row.jt_is_paused,
		icon_code: row.jt_icon_code
	};
}

/** The error summary of a job row (Scale's ErrorBaseSerializer), or null. */
function errorBaseOf(row: JobListRow) {
	if (row.error_id === null) return null;
	return {
		id: row.error_id,
		name: row.er_name,
		title: row.er_title,
		description: row.er_description,
		category: row.er_category,
		is_builtin: row.er_is_builtin
	};
}

/** The scalar fields of a job record after its references, in Scale's order. */
function jobScalars(row: JobFields) {
	return {
		status: row.status,
		priority: row.priority,
		num_exes: row.num_exes,
		timeout: row.timeout,
		max_tries: row.max_tries,
		cpus_required: num(row.cpus_required),
		mem_required: num(row.mem_required),
		disk_in_required: num(row.disk_in_required),
		disk_out_required: num(row.disk_out_required),
		created: formatDatetime(row.created),
		queued: date(row.queued),
		started: date(row.started),
		ended: date(row.ended),
		last_status_change: date(row.last_status_change),
		last_modified: formatDatetime(row.last_modified)
	};
}

/** A job as executions embed it (Scale's JobBaseSerializer). */
export function serializeJobBase(row: JobListRow) {
	return {
		id: row.id,
		job_type: jobTypeBaseOf(row),
		job_type_rev: { id: row.job_type_rev_id },
		event: { id: row.event_id },
		error: row.error_id === null ? null : { id: row.error_id },
		status: row.status,
		priority: row.priority,
		num_exes: row.num_exes
	};
}

/** A job record as lists show it (Scale's JobSerializer). */
export function serializeJob(row: JobListRow) {
	return {
		id: row.id,
		job_type: jobTypeBaseOf(row),
		job_type_rev: {
			id: row.job_type_rev_id,
			job_type: { id: row.job_type_id },
			revision_num: row.rev_num
		},
		event: {
			id: row.event_id,
			type: row.ev_type,
			rule: row.ev_rule_id === null ? null : { id: row.ev_rule_id },
			occurred: formatDatetime(row.ev_occurred)
		},
		error: errorBaseOf(row),
		...jobScalars(row)
	};
}

const ORDERABLE_JOB_FIELDS = JOB_FIELDS.filter(
	f => !["job_type_id", "job_type_rev_id", "event_id", "error_id"].includes(f)
);

export const JOB_LIST: ListSource = {
	from: "job j",
	joins: JOB_JOINS,
	key: "j.id",
	columns: JOB_COLUMNS,
	orderable: {
		...Object.fromEntries(ORDERABLE_JOB_FIELDS.map(f => [f, `j.${f}`])),
		job_type: "j.job_type_id",
		job_type_rev: "j.job_type_rev_id",
		event: "j.event_id",
		error: "j.error_id",
		job_type__id: "j.job_type_id",
		job_type__name: "jt.name",
		job_type__version: "jt.version",
		job_type__title: "jt.title",
		job_type__category: "jt.category",
		job_type__priority: "jt.priority",
		error__name: "er.name",
		error__category: "er.category"
	},
	// Scale's JobManager.get_jobs orders by last_modified unless told otherwise.
	defaultOrder: ["last_modified"],
	timeColumn: "j.last_modified",
	filters: {
		status: { column: "j.status", type: "enum", values: [...JOB_STATUSES] },
		job_id: { column: "j.id", type: "integer" },
		job_type_id: { column: "j.job_type_id", type: "integer" },
		job_type_name: jobTypeNameFilter("j.job_type_id"),
		job_type_category: jobTypeCategoryFilter("j.job_type_id"),
		error_category: {
			column: "j.error_id",
			type: "enum",
			values: ERROR_CATEGORIES,
			lookup: "SELECT id FROM error WHERE category = ANY($1::text[])",
			lookupTable: "error"
		}
	}
};

/**
 * Job records are current while the job's row (its `last_modified`, which every UPDATE changes:
 * migration 0016), the job types and the errors are unchanged: a revision never changes, and an
 * event's fields are fixed before any of its jobs is visible (the transaction that processes it
 * creates them).
 */
export const JOB_RECORD: RecordSpec<JobListRow> = {
	name: "job",
	version: "j.last_modified::text",
	versionJoins: "",
	generations: ["job_type", "error"],
	record: row => serializeJob(row)
};

/** Job update records without their input files, which are kept apart (INPUT_FILES). */
export const JOB_UPDATE_RECORD: RecordSpec<JobListRow> = {
	...JOB_RECORD,
	name: "job-update",
	refs: row => inputFileIds(row.data)
};

/**
 * GET /jobs/updates/: jobs whose status changed in the range (on last_status_change, which its
 * own index serves), oldest change first as in Scale, each with its input files.
 */
export const JOB_UPDATES_LIST: ListSource = {
	...JOB_LIST,
	columns: `${JOB_COLUMNS}, j.data`,
	orderable: JOB_LIST.orderable,
	defaultOrder: ["last_status_change"],
	timeColumn: "j.last_status_change",
	filters: {
		status: JOB_LIST.filters.status,
		job_type_id: JOB_LIST.filters.job_type_id,
		job_type_name: JOB_LIST.filters.job_type_name,
		job_type_category: JOB_LIST.filters.job_type_category
	}
};

/** The ids of the files a job data document gives to inputs, in order of appearance. */
export function inputFileIds(data: JobData | null | undefined): number[] {
	const ids: number[] = [];
	for (const input of data?.input_data ?? []) {
		if ("file_id" in input && typeof input.file_id === "number") ids.push(input.file_id);
		else if ("file_ids" in input && Array.isArray(input.file_ids)) ids.push(...input.file_ids);
	}
	return [...new Set(ids)];
}

/** The ids of the files a job results document names, in order of appearance. */
function resultFileIds(results: JobRow["results"]): number[] {
	const ids: number[] = [];
	for (const output of (results?.output_data ?? []) as Record<string, unknown>[]) {
		if (typeof output.file_id === "number") ids.push(output.file_id);
		else if (Array.isArray(output.file_ids))
			ids.push(...output.file_ids.filter((id): id is number => typeof id === "number"));
	}
	return [...new Set(ids)];
}

/** Job records (JobListRow) by id, in one query; ids not found are absent. */
export async function loadJobRows(
	db: Sequelize,
	ids: number[],
	t?: Transaction
): Promise<Map<number, JobListRow>> {
	if (ids.length === 0) return new Map();
	const rows = await select<JobListRow>(
		db,
		`SELECT ${JOB_COLUMNS} FROM ${JOB_FROM} WHERE j.id = ANY($1::int[])`,
		[[...new Set(ids)]],
		t
	);
	return new Map(rows.map(row => [row.id, row]));
}

// ---- executions as a job lists them ---------------------------------------------------------

export const JOB_EXE_STATUSES = ["QUEUED", "RUNNING", "FAILED", "COMPLETED", "CANCELED"] as const;
export type JobExeStatus = (typeof JOB_EXE_STATUSES)[number];

/** A `job_exe` row read whole. */
export interface JobExeRow {
	id: number;
	job_id: number;
	status: JobExeStatus;
	error_id: number | null;
	command_arguments: string | null;
	timeout: number;
	node_id: number | null;
	agent_id: string | null;
	environment: unknown;
	cpus_scheduled: number | null;
	mem_scheduled: number | null;
	disk_in_scheduled: number | null;
	disk_out_scheduled: number | null;
	disk_total_scheduled: number | null;
	pre_started: Date | null;
	pre_completed: Date | null;
	pre_exit_code: number | null;
	job_started: Date | null;
	job_completed: Date | null;
	job_exit_code: number | null;
	post_started: Date | null;
	post_completed: Date | null;
	post_exit_code: number | null;
	results: unknown;
	results_manifest: unknown;
	created: Date;
	queued: Date;
	started: Date | null;
	ended: Date | null;
	last_modified: Date;
}

/** The execution's own columns a record shows (neither documents nor scheduled resources). */
export const JOB_EXE_BASE_FIELDS = [
	"id",
	"job_id",
	"node_id",
	"error_id",
	"status",
	"command_arguments",
	"timeout",
	"pre_started",
	"pre_completed",
	"pre_exit_code",
	"job_started",
	"job_completed",
	"job_exit_code",
	"post_started",
	"post_completed",
	"post_exit_code",
	"created",
	"queued",
	"started",
	"ended",
	"last_modified"
] as const;

export type JobExeBaseFields = Pick<JobExeRow, (typeof JOB_EXE_BASE_FIELDS)[number]>;

/** The scalar fields of an execution record, in Scale's order. */
export function jobExeScalars(row: JobExeBaseFields) {
	return {
		id: row.id,
		status: row.status,
		command_arguments: row.command_arguments,
		timeout: row.timeout,
		pre_started: date(row.pre_started),
		pre_completed: date(row.pre_completed),
		pre_exit_code: row.pre_exit_code,
		job_started: date(row.job_started),
		job_completed: date(row.job_completed),
		job_exit_code: row.job_exit_code,
		post_started: date(row.post_started),
		post_completed: date(row.post_completed),
		post_exit_code: row.post_exit_code,
		created: formatDatetime(row.created),
		queued: date(row.queued),
		started: date(row.started),
		ended: date(row.ended),
		last_modified: formatDatetime(row.last_modified)
	};
}

/** An execution with its references as ids (Scale's JobExecutionBaseSerializer). */
export function serializeJobExeBase(row: JobExeBaseFields) {
	return {
		...jobExeScalars(row),
		job: { id: row.job_id },
		node: row.node_id === null ? null : { id: row.node_id },
		error: row.error_id === null ? null : { id: row.error_id }
	};
}

// ---- details ------------------------------------------------------------------------------

export interface EventDetailsRow {
	id: number;
	type: string;
	rule_id: number | null;
	occurred: Date;
	description: unknown;
	rule_type: string | null;
	rule_name: string | null;
	rule_is_active: boolean | null;
	rule_configuration: unknown;
}

/** An event as details show it (Scale's TriggerEventDetailsSerializer): job and recipe details. */
export function serializeEventDetails(event: EventDetailsRow) {
	return {
		id: event.id,
		type: event.type,
		rule:
			event.rule_id === null
				? null
				: {
						id: event.rule_id,
						type: event.rule_type,
						name: event.rule_name,
						is_active: event.rule_is_active,
						configuration: event.rule_configuration
					},
		occurred: formatDatetime(event.occurred),
		description: event.description
	};
}

interface NamedEntry {
	name: string;
	type: string;
}

/**
 * Interface entries merged with the values given to them (Scale's JobManager._merge_job_data):
 * `{name, type, value}`, the value a property's string, a file record, or a list of them; null
 * when the entry has no value. Ids of files that no longer exist are left out.
 */
function mergeValues(
	entries: NamedEntry[],
	values: Record<string, unknown>[],
	files: Map<number, ScaleFileRow>,
	apiRoot: string | undefined
) {
	const byName = new Map(values.map(v => [v.name as string, v]));
	const file = (id: unknown) => {
		const row = typeof id === "number" ? files.get(id) : undefined;
		return row ? serializeScaleFile(row, apiRoot) : null;
	};
	return entries.map(entry => {
		const given = byName.get(entry.name);
		let value: unknown = null;
		if (given) {
			if ("value" in given) value = given.value;
			else if ("file_id" in given)
				value =
					entry.type === "files"
						? [file(given.file_id)].filter(Boolean)
						: file(given.file_id);
			else if (Array.isArray(given.file_ids)) {
				const list = given.file_ids.map(file).filter(Boolean);
				value = entry.type === "file" ? (list[0] ?? null) : list;
			}
		}
		return { name: entry.name, type: entry.type, value };
	});
}

const EXE_DATES = [
	"pre_started",
	"pre_completed",
	"job_started",
	"job_completed",
	"post_started",
	"post_completed",
	"created",
	"queued",
	"started",
	"ended",
	"last_modified"
];

type Json = Record<string, unknown>;

/** A job row with the parts of its details, as JSON (built by the SQL fragments below). */
export interface DetailsRow extends JobRow {
	part_job_type: Json;
	part_rev: Json;
	part_event: Json;
	part_error: Json | null;
	part_exes: Json[];
	part_recipes: Json[];
}

/** A row read as JSON, its named timestamp fields (JSON text) made Dates as `pg` gives them. */
function revive<T>(json: Json, dates: readonly string[]): T {
	const row: Json = { ...json };
	for (const key of dates) if (typeof row[key] === "string") row[key] = new Date(row[key]);
	return row as T;
}

/**
 * The parts of job details, as SQL over a `job_type` row `jt`, a `job_type_rev` row `r` and a
 * `job_exe` row `x`; shared with the write of new jobs (lib/queue/new-job.ts), which builds the
 * details of the jobs it writes from the same parts.
 */
export const JOB_TYPE_PART_SQL = `to_jsonb(jt) - 'interface' - 'error_mapping'`;
export const REV_PART_SQL = `jsonb_build_object('id', r.id, 'revision_num', r.revision_num,
		'interface', r.interface, 'created', r.created)`;
export const EXE_PART_SQL = `to_jsonb(x) - 'environment' - 'results' - 'results_manifest'`;

const JOB_DETAILS_SQL = `SELECT j.*,
	(SELECT ${JOB_TYPE_PART_SQL} FROM job_type jt WHERE jt.id = j.job_type_id) AS part_job_type,
	(SELECT ${REV_PART_SQL} FROM job_type_rev r WHERE r.id = j.job_type_rev_id) AS part_rev,
	(SELECT jsonb_build_object('id', ev.id, 'type', ev.type, 'rule_id', ev.rule_id,
		'occurred', ev.occurred, 'description', ev.description, 'rule_type', ru.type,
		'rule_name', ru.name, 'rule_is_active', ru.is_active,
		'rule_configuration', ru.configuration)
	 FROM trigger_event ev LEFT JOIN trigger_rule ru ON ru.id = ev.rule_id
	 WHERE ev.id = j.event_id) AS part_event,
	(SELECT to_jsonb(er) FROM error er WHERE er.id = j.error_id) AS part_error,
	(SELECT coalesce(jsonb_agg(${EXE_PART_SQL} ORDER BY x.created DESC, x.id DESC), '[]')
	 FROM job_exe x WHERE x.job_id = j.id) AS part_exes,
	(SELECT coalesce(jsonb_agg(jsonb_build_object('id', rc.id,
		'recipe_type_id', rc.recipe_type_id, 'rt_name', rt.name, 'rt_version', rt.version,
		'rt_title', rt.title, 'rt_description', rt.description,
		'recipe_type_rev_id', rc.recipe_type_rev_id, 'rr_revision_num', rr.revision_num,
		'event_id', rc.event_id, 'ev_type', ev.type, 'ev_rule_id', ev.rule_id,
		'ev_occurred', ev.occurred, 'created', rc.created, 'completed', rc.completed,
		'last_modified', rc.last_modified) ORDER BY rc.last_modified, rc.id), '[]')
	 FROM recipe_job rj
		JOIN recipe rc ON rc.id = rj.recipe_id
		JOIN recipe_type rt ON rt.id = rc.recipe_type_id
		JOIN recipe_type_rev rr ON rr.id = rc.recipe_type_rev_id
		JOIN trigger_event ev ON ev.id = rc.event_id
	 WHERE rj.job_id = j.id) AS part_recipes
FROM job j WHERE j.id = ANY($1::int[])`;

/** How job details are read: `t` to read inside a transaction (what it has written included),
 * `apiRoot` the API root of the request, for the download URLs of files whose workspace has no
 * base URL. */
export interface DetailsOptions {
	t?: Transaction;
	apiRoot?: string;
}

/**
 * The details of a job (Scale's JobDetailsSerializer): the record with its whole job type,
 * revision (with interface), event (with rule and description) and error, its data and results
 * documents, its recipes, its executions (newest first), and its interface's inputs and outputs
 * merged with their values.
 */
export async function getJobDetails(db: Sequelize, id: number, opts: DetailsOptions = {}) {
	const details = (await getJobsDetails(db, [id], opts)).get(id);
	if (!details) throw new NotFoundError(`No job with id ${id}`);
	return details;
}

export type JobDetails = ReturnType<typeof serializeJobDetails>;

/** The details of several jobs, by id (ids not found are absent), in two statements at most. */
export async function getJobsDetails(
	db: Sequelize,
	ids: number[],
	opts: DetailsOptions = {}
): Promise<Map<number, JobDetails>> {
	if (ids.length === 0) return new Map();
	// One statement (a round trip costs more than building the JSON): the job rows as they are,
	// the parts they reference as JSON, their timestamps turned back into Dates when serialized.
	return jobsDetailsFromRows(
		db,
		await selectPrepared<DetailsRow>(db, JOB_DETAILS_SQL, [ids], opts.t),
		opts
	);
}

/** The details of jobs from their rows and parts, by id (reading the files their data names). */
export async function jobsDetailsFromRows(
	db: Sequelize,
	rows: DetailsRow[],
	opts: DetailsOptions = {}
): Promise<Map<number, JobDetails>> {
	const files = await loadFiles(
		db,
		rows.flatMap(row => [...inputFileIds(row.data), ...resultFileIds(row.results)]),
		opts.t
	);
	return new Map(rows.map(row => [row.id, serializeJobDetails(row, files, opts.apiRoot)]));
}

/**
 * Job types serialized, by the part they were serialized from: the jobs written together share
 * their job type's part (lib/queue/new-job.ts), so it is serialized once, and the answers share
 * the result (they are only ever turned into JSON).
 */
const serializedJobTypes = new WeakMap<Json, ReturnType<typeof serializeJobType>>();

function serializeJobDetails(
	row: DetailsRow,
	files: Map<number, ScaleFileRow>,
	apiRoot: string | undefined
) {
	const { part_job_type, part_rev, part_event, part_error, part_exes, part_recipes, ...job } =
		row;
	let jobType = serializedJobTypes.get(part_job_type);
	if (!jobType) {
		jobType = serializeJobType(
			revive<JobTypeRow>(part_job_type, ["created", "archived", "paused", "last_modified"])
		);
		serializedJobTypes.set(part_job_type, jobType);
	}
	const rev = revive<{
		id: number;
		revision_num: number;
		interface: JobInterface;
		created: Date;
	}>(part_rev, ["created"]);
	const event = revive<EventDetailsRow>(part_event, ["occurred"]);
	const errors = part_error ? [revive<ErrorRow>(part_error, ["created", "last_modified"])] : [];
	const exes = part_exes.map(x => revive<JobExeRow>(x, EXE_DATES));
	const recipes = part_recipes.map(r =>
		revive<RecipeListRow>(r, ["ev_occurred", "created", "completed", "last_modified"])
	);
	const iface = rev.interface;
	return {
		id: job.id,
		job_type: jobType,
		job_type_rev: {
			id: rev.id,
			job_type: { id: job.job_type_id },
			revision_num: rev.revision_num,
			interface: iface,
			created: formatDatetime(rev.created)
		},
		event: serializeEventDetails(event),
		error: errors[0] ? serializeError(errors[0]) : null,
		...jobScalars(job),
		data: job.data,
		// Scale 3.0 stored {} for a job without results (its model default), and its web UI reads
		// results.output_data: null would leave its job details page loading forever.
		results: job.results ?? {},
		recipes: recipes.map(serializeRecipe),
		job_exes: exes.map(serializeJobExeBase),
		inputs: mergeValues(
			iface.input_data ?? [],
			(job.data?.input_data ?? []) as unknown as Record<string, unknown>[],
			files,
			apiRoot
		),
		outputs: mergeValues(
			iface.output_data ?? [],
			(job.results?.output_data ?? []) as Record<string, unknown>[],
			files,
			apiRoot
		)
	};
}
