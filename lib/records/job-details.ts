import { entryFileIds, fileIdsIn } from "../documents/job-data";
import type { Sequelize } from "sequelize";
import { selectPrepared, type Sql } from "../db/run";
import type { JobInterface } from "../documents/types";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import { serializeError, type ErrorRow } from "./error";
import { serializeJobType, type JobTypeRow } from "./job-type";
import { loadFiles, serializeScaleFile, type ScaleFileRow } from "./scale-file";
import { serializeRecipe, type RecipeListRow } from "./recipe-record";
import { jobScalars, serializeJobExeBase, type JobExeRow, type JobRow } from "./job";

/**
 * A job's details (Scale 3.0's JobDetailsSerializer): the job with its job type, revision, event
 * (and rule), recipe, data and results merged with the interface, input and output files, and
 * every execution; read for one job or many in one statement.
 */

/** The ids of the files a job results document names, in order of appearance. */
function resultFileIds(results: JobRow["results"]): number[] {
	return [...new Set(((results?.output_data ?? []) as unknown[]).flatMap(entryFileIds))];
}

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
	/** the ids of the job's products, by id (absent for jobs just written: none yet) */
	product_ids?: number[];
}

/** A row read as JSON, its named timestamp fields (JSON text) made Dates as `pg` gives them. */
function revive<T>(json: Json, dates: readonly string[]): T {
	const row: Json = { ...json };
	for (const key of dates) if (typeof row[key] === "string") row[key] = new Date(row[key]);
	return row as T;
}

/**
 * The parts of job details, as SQL over a `job_type` row `jt`, a `job_type_rev` row `r` and a
 * `job_exe` row `x`; shared with the write of new jobs (lib/jobs/new-job.ts), which builds the
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
	 WHERE rj.job_id = j.id) AS part_recipes,
	(SELECT coalesce(array_agg(f.id ORDER BY f.id), '{}') FROM scale_file f
	 WHERE f.job_id = j.id AND f.file_type = 'PRODUCT') AS product_ids
FROM job j WHERE j.id = ANY($1::int[])`;

/** How job details are read: `t` to read inside a transaction (what it has written included),
 * `apiRoot` the API root of the request, for the download URLs of files whose workspace has no
 * base URL. */
export interface DetailsOptions {
	t?: Sql;
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
		rows.flatMap(row => [
			...fileIdsIn(row.data),
			...resultFileIds(row.results),
			...(row.product_ids ?? [])
		]),
		opts.t
	);
	return new Map(rows.map(row => [row.id, serializeJobDetails(row, files, opts.apiRoot)]));
}

/** The records of the files with these ids that exist, in the order given. */
function fileRecords(ids: number[], files: Map<number, ScaleFileRow>, apiRoot: string | undefined) {
	return ids.flatMap(id => {
		const file = files.get(id);
		return file ? [serializeScaleFile(file, apiRoot)] : [];
	});
}

/**
 * Job types serialized, by the part they were serialized from: the jobs written together share
 * their job type's part (lib/jobs/new-job.ts), so it is serialized once, and the answers share
 * the result (they are only ever turned into JSON).
 */
const serializedJobTypes = new WeakMap<Json, ReturnType<typeof serializeJobType>>();

function serializeJobDetails(
	row: DetailsRow,
	files: Map<number, ScaleFileRow>,
	apiRoot: string | undefined
) {
	const {
		part_job_type,
		part_rev,
		part_event,
		part_error,
		part_exes,
		part_recipes,
		product_ids,
		...job
	} = row;
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
		),
		// Scale 3.0's deprecated members, kept for the clients that read them: the input files
		// and the job's products, each by id
		input_files: fileRecords(
			[...new Set(fileIdsIn(job.data))].sort((a, b) => a - b),
			files,
			apiRoot
		),
		products: fileRecords(product_ids ?? [], files, apiRoot)
	};
}
