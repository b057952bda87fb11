import type { Sequelize } from "sequelize";
import { select, type Sql } from "../db/run";
import { fileIdsIn, type JobData } from "../documents/job-data";
import { formatDatetime } from "../validation/schema";
import type { ListFilter } from "../list/params";
import type { RecordSpec } from "../list/record-spec";
import type { ListSource } from "../list/types";

/**
 * Jobs (Scale 3.0's job/models.py Job and JobManager, job/serializers.py): the job record as
 * lists show it, the updates list and the job list source, and executions as a job shows them;
 * the details record is in job-details.ts.
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
export function jobScalars(row: JobFields) {
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
		error__title: "er.title",
		error__category: "er.category",
		// the web UI's duration column: how long it ran (so far, while it runs); never started last
		duration: "coalesce(j.ended, now()) - j.started"
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
	version: "j.last_modified",
	versionJoins: "",
	generations: ["job_type", "error"],
	record: row => serializeJob(row)
};

/** Job update records without their input files, which are kept apart (INPUT_FILES). */
export const JOB_UPDATE_RECORD: RecordSpec<JobListRow> = {
	...JOB_RECORD,
	name: "job-update",
	refs: row => fileIdsIn(row.data)
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

/** Job records (JobListRow) by id, in one query; ids not found are absent. */
export async function loadJobRows(
	db: Sequelize,
	ids: number[],
	t?: Sql
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
	// Object.assign, not a spread (see serializeScaleFileBase)
	return Object.assign(jobExeScalars(row), {
		job: { id: row.job_id },
		node: row.node_id === null ? null : { id: row.node_id },
		error: row.error_id === null ? null : { id: row.error_id }
	});
}
