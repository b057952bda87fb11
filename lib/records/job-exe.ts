import type { Sequelize } from "sequelize";
import { NODE_COLUMNS, serializeNode, type NodeRow } from "./node";
import { select, type Sql } from "../db/run";
import { NotFoundError } from "../errors";
import type { RecordSpec } from "../list/record-spec";
import type { ListSource } from "../list/types";
import { serializeError, type ErrorRow } from "./error";
import {
	JOB_EXE_BASE_FIELDS,
	JOB_EXE_STATUSES,
	JOB_TYPE_BASE_FIELDS,
	jobTypeCategoryFilter,
	jobTypeNameFilter,
	jobExeScalars,
	jobTypeBaseOf,
	loadJobRows,
	serializeJob,
	type JobExeBaseFields,
	type JobExeRow,
	type JobListRow
} from "./job";

export { JOB_EXE_STATUSES, serializeJobExeBase, type JobExeRow, type JobExeStatus } from "./job";

/**
 * Job executions (Scale 3.0's JobExecution, job/serializers.py): the execution record as lists
 * show it, its details, and what its logs view is built from.
 */

/** Executions that ended: their logs are in job_exe_log and no longer change. */
export const ENDED_EXE_STATUSES = ["FAILED", "COMPLETED", "CANCELED"];

const ERROR_BASE_FIELDS = ["name", "title", "description", "category", "is_builtin"] as const;

/**
 * An execution read with JOB_EXE_COLUMNS: its columns, its job's summary columns (`j_`, with
 * the job type's as `jt_`), its node's (`n_`) and its error's (`er_`).
 */
export interface JobExeListRow extends JobExeBaseFields {
	agent_id: string | null;
	/** the job's type, which the execution carries */
	job_type_id: number;
	j_job_type_rev_id: number;
	j_event_id: number;
	j_error_id: number | null;
	j_status: JobListRow["status"];
	j_priority: number;
	j_num_exes: number;
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
	n_hostname: string | null;
	n_port: number | null;
	n_slave_id: string | null;
	er_name: string | null;
	er_title: string | null;
	er_description: string | null;
	er_category: string | null;
	er_is_builtin: boolean | null;
}

/** The joins of execution records: the execution (`x`) with its job, job type, node and error. */
const JOB_EXE_JOINS = `LEFT JOIN job j ON j.id = x.job_id
	LEFT JOIN job_type jt ON jt.id = x.job_type_id
	LEFT JOIN node n ON n.id = x.node_id
	LEFT JOIN error er ON er.id = x.error_id`;

/** FROM clause of execution records. */
export const JOB_EXE_FROM = `job_exe x ${JOB_EXE_JOINS}`;

export const JOB_EXE_COLUMNS = [
	...JOB_EXE_BASE_FIELDS.map(f => `x.${f}`),
	"x.agent_id",
	"x.job_type_id",
	...["job_type_rev_id", "event_id", "error_id", "status", "priority", "num_exes"].map(
		f => `j.${f} AS j_${f}`
	),
	...JOB_TYPE_BASE_FIELDS.filter(f => f !== "id").map(f => `jt.${f} AS jt_${f}`),
	"n.hostname AS n_hostname",
	"n.port AS n_port",
	"n.slave_id AS n_slave_id",
	...ERROR_BASE_FIELDS.map(f => `er.${f} AS er_${f}`)
].join(", ");

/** The job summary of an execution row (Scale's JobBaseSerializer). */
function jobBaseOf(row: JobExeListRow) {
	return {
		id: row.job_id,
		job_type: jobTypeBaseOf(row),
		job_type_rev: { id: row.j_job_type_rev_id },
		event: { id: row.j_event_id },
		error: row.j_error_id === null ? null : { id: row.j_error_id },
		status: row.j_status,
		priority: row.j_priority,
		num_exes: row.j_num_exes
	};
}

/** An execution record as lists show it (Scale's JobExecutionSerializer). */
export function serializeJobExe(row: JobExeListRow) {
	// Object.assign, not a spread (see serializeScaleFileBase)
	return Object.assign(jobExeScalars(row), {
		job: jobBaseOf(row),
		node:
			row.node_id === null
				? null
				: {
						id: row.node_id,
						hostname: row.n_hostname,
						port: row.n_port,
						slave_id: row.n_slave_id
					},
		error:
			row.error_id === null
				? null
				: {
						id: row.error_id,
						name: row.er_name,
						title: row.er_title,
						description: row.er_description,
						category: row.er_category,
						is_builtin: row.er_is_builtin
					}
	});
}

const ORDERABLE_EXE_FIELDS = JOB_EXE_BASE_FIELDS.filter(
	f => !["job_id", "node_id", "error_id"].includes(f)
);

/**
 * Execution records are current while the execution's row (its `last_modified`, which every
 * UPDATE changes: migration 0016), its job's (`xmin`), the job types, the errors and the nodes'
 * hostnames, ports and slave_ids (the `node` generation, migration 0017: a node's row changes
 * at every heartbeat; the record shows only these) are unchanged. The job's `xmin` is a
 * sub-select rather than a join: each execution has a job of its own, and the planner's cache
 * of a joined row's lookups (Memoize) only added its cost (~80 µs a page).
 */
export const JOB_EXE_RECORD: RecordSpec<JobExeListRow> = {
	name: "job-exe",
	version: `concat(x.last_modified, '|', (SELECT j.xmin FROM job j WHERE j.id = x.job_id))`,
	versionJoins: "",
	generations: ["job_type", "error", "node"],
	record: row => serializeJobExe(row)
};

export const JOB_EXE_LIST: ListSource = {
	from: "job_exe x",
	joins: JOB_EXE_JOINS,
	key: "x.id",
	columns: JOB_EXE_COLUMNS,
	orderable: {
		...Object.fromEntries(ORDERABLE_EXE_FIELDS.map(f => [f, `x.${f}`])),
		job: "x.job_id",
		node: "x.node_id",
		error: "x.error_id",
		job__id: "x.job_id",
		job__status: "j.status",
		job__priority: "j.priority",
		job__num_exes: "j.num_exes",
		job__job_type__id: "x.job_type_id",
		job__job_type__name: "jt.name",
		job__job_type__version: "jt.version",
		job__job_type__category: "jt.category",
		job_type__id: "x.job_type_id",
		job_type__name: "jt.name",
		job_type__version: "jt.version",
		job_type__category: "jt.category",
		node__id: "x.node_id",
		node__hostname: "n.hostname",
		error__name: "er.name",
		error__title: "er.title",
		error__category: "er.category",
		// the web UI's duration column: how long it ran (so far, while it runs); never started last
		duration: "coalesce(x.ended, now()) - x.started"
	},
	// Scale's JobExecutionManager.get_exes orders by last_modified unless told otherwise.
	defaultOrder: ["last_modified"],
	timeColumn: "x.last_modified",
	filters: {
		status: { column: "x.status", type: "enum", values: [...JOB_EXE_STATUSES] },
		job_id: { column: "x.job_id", type: "integer" },
		job_type_id: { column: "x.job_type_id", type: "integer" },
		job_type_name: jobTypeNameFilter("x.job_type_id"),
		job_type_category: jobTypeCategoryFilter("x.job_type_id"),
		node_id: { column: "x.node_id", type: "integer" }
	}
};

/** One execution as the list reads it, or NotFoundError. */
export async function getJobExeListRow(db: Sequelize, id: number, t?: Sql): Promise<JobExeListRow> {
	const [row] = await select<JobExeListRow>(
		db,
		`SELECT ${JOB_EXE_COLUMNS} FROM ${JOB_EXE_FROM} WHERE x.id = $1`,
		[id],
		t
	);
	if (!row) throw new NotFoundError(`No job execution with id ${id}`);
	return row;
}

function num(v: number | string | null): number | null {
	return v === null ? null : Number(v);
}

/**
 * Where the logs of a running execution are read live: this service's logs view, one stream as
 * text/plain. Null once the execution is not running (Scale clears the URLs when its task ends).
 */
export function currentLogUrl(
	apiRoot: string | undefined,
	row: { id: number; status: string },
	stream: "stdout" | "stderr"
): string | null {
	if (row.status !== "RUNNING") return null;
	return `${apiRoot ?? "/api"}/job-executions/${row.id}/logs/?stream=${stream}`;
}

/**
 * The details of an execution (Scale's JobExecutionDetailsSerializer): the record with its whole
 * job record, node and error, the environment, the resources scheduled, the results and results
 * manifest, and the URLs of its current logs.
 */
export async function getJobExeDetails(
	db: Sequelize,
	id: number,
	opts: { apiRoot?: string; t?: Sql } = {}
) {
	const [exe] = await select<JobExeRow>(db, "SELECT * FROM job_exe WHERE id = $1", [id], opts.t);
	if (!exe) throw new NotFoundError(`No job execution with id ${id}`);
	const [jobs, nodes, errors] = await Promise.all([
		loadJobRows(db, [exe.job_id], opts.t),
		exe.node_id === null
			? Promise.resolve([] as NodeRow[])
			: select<NodeRow>(
					db,
					`SELECT ${NODE_COLUMNS} FROM node WHERE id = $1`,
					[exe.node_id],
					opts.t
				),
		exe.error_id === null
			? Promise.resolve([] as ErrorRow[])
			: select<ErrorRow>(db, "SELECT * FROM error WHERE id = $1", [exe.error_id], opts.t)
	]);
	const job = jobs.get(exe.job_id) as JobListRow;
	return Object.assign(jobExeScalars(exe), {
		job: serializeJob(job),
		node: nodes[0] ? serializeNode(nodes[0]) : null,
		error: errors[0] ? serializeError(errors[0]) : null,
		environment: exe.environment ?? null,
		cpus_scheduled: num(exe.cpus_scheduled),
		mem_scheduled: num(exe.mem_scheduled),
		disk_in_scheduled: num(exe.disk_in_scheduled),
		disk_out_scheduled: num(exe.disk_out_scheduled),
		disk_total_scheduled: num(exe.disk_total_scheduled),
		results: exe.results ?? {},
		current_stdout_url: currentLogUrl(opts.apiRoot, exe, "stdout"),
		current_stderr_url: currentLogUrl(opts.apiRoot, exe, "stderr"),
		results_manifest: exe.results_manifest ?? {}
	});
}

export interface StoredLogs {
	stdout: string;
	stderr: string;
}

/** The logs kept for an execution in job_exe_log (empty strings when none were kept). */
/** Executions' status and agent, by id (what a follower of their logs waits on). */
export async function readExeStates(
	db: Sequelize,
	ids: number[]
): Promise<{ id: number; status: string; agent_id: string | null }[]> {
	return select(db, "SELECT id, status, agent_id FROM job_exe WHERE id = ANY($1::int[])", [ids]);
}

export async function loadStoredLogs(
	db: Sequelize,
	id: number,
	t?: Sql
): Promise<StoredLogs | null> {
	const [row] = await select<{ stdout: string | null; stderr: string | null }>(
		db,
		"SELECT stdout, stderr FROM job_exe_log WHERE job_exe_id = $1",
		[id],
		t
	);
	return row ? { stdout: row.stdout ?? "", stderr: row.stderr ?? "" } : null;
}

/** The logs view (Scale's JobExecutionLogSerializer): the list record with the logs. */
export function serializeJobExeLogs(
	row: JobExeListRow,
	logs: StoredLogs & { is_finished: boolean }
) {
	return Object.assign(serializeJobExe(row), {
		is_finished: logs.is_finished,
		stdout: logs.stdout,
		stderr: logs.stderr
	});
}
