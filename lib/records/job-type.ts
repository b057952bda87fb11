import type { Sequelize } from "sequelize";
import { select, type Sql } from "../db/run";
import { errorNamesIn } from "../documents/error-mapping";
import type { ErrorMapping, JobInterface } from "../documents/types";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import { serializeError, type ErrorRow } from "./error";
import {
	exportTriggerRule,
	loadTriggerRules,
	serializeTriggerRule,
	triggerRuleReference,
	type TriggerRuleRow
} from "./trigger-rule";

/**
 * Job types (Scale 3.0's job/models.py JobType and JobTypeManager, job/views.py, job/serializers.py):
 * what a job runs, its interface, error mapping, resources and the rule that triggers it.
 * Every edit increments revision_num; an edit of the interface also writes a job_type_rev row
 * with that revision_num, which jobs created afterwards reference. Here: the row, its serializers,
 * lists, lookups and the configuration export; creating, editing and validating them is in
 * job-type-save.ts.
 */

export interface JobTypeRow {
	id: number;
	name: string;
	version: string;
	title: string | null;
	description: string | null;
	category: string | null;
	author_name: string | null;
	author_url: string | null;
	is_system: boolean;
	is_long_running: boolean;
	is_active: boolean;
	is_operational: boolean;
	is_paused: boolean;
	icon_code: string | null;
	uses_docker: boolean;
	docker_privileged: boolean;
	docker_image: string | null;
	/** only in rows read with all columns */
	interface?: JobInterface;
	error_mapping?: ErrorMapping;
	revision_num: number;
	trigger_rule_id: number | null;
	priority: number;
	timeout: number;
	max_scheduled: number | null;
	max_tries: number;
	/** double precision; converted with Number() in case a driver answers text */
	cpus_required: number | string;
	mem_required: number | string;
	disk_out_const_required: number | string;
	disk_out_mult_required: number | string;
	created: Date;
	archived: Date | null;
	paused: Date | null;
	last_modified: Date;
}

// ---- serialization ------------------------------------------------------------------------

/** Scale's JobTypeBaseSerializer: the summary jobs and recipe type details embed. */
export function serializeJobTypeBase(row: JobTypeRow) {
	return {
		id: row.id,
		name: row.name,
		version: row.version,
		title: row.title,
		description: row.description,
		category: row.category,
		author_name: row.author_name,
		author_url: row.author_url,
		is_system: row.is_system,
		is_long_running: row.is_long_running,
		is_active: row.is_active,
		is_operational: row.is_operational,
		is_paused: row.is_paused,
		icon_code: row.icon_code
	};
}

/** A job type as listed (Scale's JobTypeSerializer), with its rule as a reference. */
export function serializeJobType(row: JobTypeRow) {
	return Object.assign(serializeJobTypeBase(row), {
		uses_docker: row.uses_docker,
		docker_privileged: row.docker_privileged,
		docker_image: row.docker_image,
		revision_num: row.revision_num,
		priority: row.priority,
		max_scheduled: row.max_scheduled,
		timeout: row.timeout,
		max_tries: row.max_tries,
		cpus_required: Number(row.cpus_required),
		mem_required: Number(row.mem_required),
		disk_out_const_required: Number(row.disk_out_const_required),
		disk_out_mult_required: Number(row.disk_out_mult_required),
		created: formatDatetime(row.created),
		archived: row.archived ? formatDatetime(row.archived) : null,
		paused: row.paused ? formatDatetime(row.paused) : null,
		last_modified: formatDatetime(row.last_modified),
		trigger_rule: triggerRuleReference(row.trigger_rule_id)
	});
}

/** One entry of job_counts_6h/12h/24h. */
export interface JobCount {
	status: string;
	count: number;
	most_recent: string;
	/** the error category, for FAILED only */
	category: string | null;
}

export interface JobCounts {
	job_counts_6h: JobCount[];
	job_counts_12h: JobCount[];
	job_counts_24h: JobCount[];
}

/** A job type's details (Scale's JobTypeDetailsSerializer). */
export function serializeJobTypeDetails(
	row: JobTypeRow,
	errors: ErrorRow[],
	rule: TriggerRuleRow | null,
	counts: JobCounts
) {
	return Object.assign(serializeJobType(row), {
		interface: row.interface,
		error_mapping: row.error_mapping,
		trigger_rule: rule ? serializeTriggerRule(rule) : null,
		errors: errors.map(serializeError),
		...counts
	});
}

const LIST_FIELDS = [
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
	"icon_code",
	"uses_docker",
	"docker_privileged",
	"docker_image",
	"revision_num",
	"priority",
	"max_scheduled",
	"timeout",
	"max_tries",
	"cpus_required",
	"mem_required",
	"disk_out_const_required",
	"disk_out_mult_required",
	"created",
	"archived",
	"paused",
	"last_modified"
];

export const JOB_TYPE_LIST: ListSource = {
	from: "job_type",
	// The documents are not listed, so they are not read either.
	columns: [...LIST_FIELDS, "trigger_rule_id"].join(", "),
	orderable: Object.fromEntries(LIST_FIELDS.map(f => [f, f])),
	// Scale's JobTypesView orders by name, then version, unless told otherwise.
	defaultOrder: ["name", "version"],
	timeColumn: "last_modified",
	filters: {
		name: { column: "name", type: "string" },
		category: { column: "category", type: "string" }
	}
};

// ---- reads --------------------------------------------------------------------------------

export async function getJobType(db: Sequelize, id: number, t?: Sql): Promise<JobTypeRow> {
	const [row] = await select<JobTypeRow>(db, "SELECT * FROM job_type WHERE id = $1", [id], t);
	if (!row) throw new NotFoundError(`No job type with id ${id}`);
	return row;
}

/** The id of the job type with this name and version, or null. */
export async function findJobTypeId(
	db: Sequelize,
	name: string,
	version: string,
	t?: Sql
): Promise<number | null> {
	const [row] = await select<{ id: number }>(
		db,
		"SELECT id FROM job_type WHERE name = $1 AND version = $2",
		[name, version],
		t
	);
	return row ? row.id : null;
}

export interface JobTypeKey {
	name: string;
	version: string;
}

/**
 * The job types with the given names and versions (all columns), in one query. With `lock`, the
 * rows are share-locked until the transaction ends, so their interfaces cannot change under a
 * recipe type definition being checked against them.
 */
export async function loadJobTypesByKey(
	db: Sequelize,
	keys: JobTypeKey[],
	t?: Sql,
	opts: { lock?: boolean } = {}
): Promise<JobTypeRow[]> {
	if (keys.length === 0) return [];
	return select<JobTypeRow>(
		db,
		`SELECT * FROM job_type
		 WHERE (name, version) IN (SELECT * FROM unnest($1::text[], $2::text[]))
		 ORDER BY id${opts.lock ? " FOR SHARE" : ""}`,
		[keys.map(k => k.name), keys.map(k => k.version)],
		t
	);
}

/** `name` and `version` as one map key. */
export function jobTypeKey(name: string, version: string): string {
	return JSON.stringify([name, version]);
}

/**
 * Counts of the type's jobs by status (and error category for FAILED) over the past 6, 12 and
 * 24 hours, by the time of their last status change (Scale's get_performance), in one query.
 */
export async function getJobCounts(db: Sequelize, jobTypeId: number, t?: Sql): Promise<JobCounts> {
	const rows = await select<{
		status: string;
		category: string | null;
		count_6h: number;
		recent_6h: Date | null;
		count_12h: number;
		recent_12h: Date | null;
		count_24h: number;
		recent_24h: Date;
	}>(
		db,
		// last_modified is never older than last_status_change (every UPDATE sets it), so the
		// condition on it only lets the (job_type_id, last_modified) index narrow the scan.
		`SELECT j.status,
			CASE WHEN j.status = 'FAILED' THEN e.category END AS category,
			count(*) FILTER (WHERE j.last_status_change >= now() - interval '6 hours')::int AS count_6h,
			max(j.last_status_change) FILTER (WHERE j.last_status_change >= now() - interval '6 hours') AS recent_6h,
			count(*) FILTER (WHERE j.last_status_change >= now() - interval '12 hours')::int AS count_12h,
			max(j.last_status_change) FILTER (WHERE j.last_status_change >= now() - interval '12 hours') AS recent_12h,
			count(*)::int AS count_24h,
			max(j.last_status_change) AS recent_24h
		 FROM job j LEFT JOIN error e ON e.id = j.error_id
		 WHERE j.job_type_id = $1
			AND j.last_modified >= now() - interval '24 hours'
			AND j.last_status_change >= now() - interval '24 hours'
		 GROUP BY 1, 2
		 ORDER BY 1, 2`,
		[jobTypeId],
		t
	);
	const window = (hours: 6 | 12 | 24): JobCount[] =>
		rows
			.filter(row => row[`count_${hours}h`] > 0)
			.map(row => ({
				status: row.status,
				count: row[`count_${hours}h`],
				most_recent: formatDatetime(row[`recent_${hours}h`] as Date),
				category: row.category
			}));
	return {
		job_counts_6h: window(6),
		job_counts_12h: window(12),
		job_counts_24h: window(24)
	};
}

/** The details of a job type: its documents, the errors its mapping names, rule and counts. */
export async function getJobTypeDetails(db: Sequelize, id: number, t?: Sql) {
	const row = await getJobType(db, id, t);
	const names = errorNamesIn(row.error_mapping as ErrorMapping);
	const [errors, rules, counts] = await Promise.all([
		names.length === 0
			? Promise.resolve([] as ErrorRow[])
			: select<ErrorRow>(
					db,
					"SELECT * FROM error WHERE name = ANY($1::text[]) ORDER BY name",
					[names],
					t
				),
		loadTriggerRules(db, [row.trigger_rule_id], t),
		getJobCounts(db, id, t)
	]);
	const rule = row.trigger_rule_id === null ? null : (rules.get(row.trigger_rule_id) ?? null);
	return serializeJobTypeDetails(row, errors, rule, counts);
}

// ---- configuration export -------------------------------------------------------------------

export interface JobTypeExportFilter {
	ids?: number[];
	names?: string[];
	categories?: string[];
	/** only these names and versions (e.g. those the exported recipe types use) */
	keys?: JobTypeKey[];
}

/**
 * The job types as the configuration export writes them (Scale's ConfigurationJobTypeSerializer:
 * no id, no read-only fields; trigger_rule as {type, name, is_active, configuration} or null),
 * ordered by name and version. System job types (is_system, or category "system") are never
 * exported. Each filter given (even empty) must match; filters left undefined match all.
 */
export async function exportJobTypes(
	db: Sequelize,
	filter: JobTypeExportFilter = {},
	t?: Sql
): Promise<object[]> {
	const rows = await select<JobTypeRow>(
		db,
		`SELECT * FROM job_type
		 WHERE NOT is_system AND category IS DISTINCT FROM 'system'
			AND ($1::int[] IS NULL OR id = ANY($1::int[]))
			AND ($2::text[] IS NULL OR name = ANY($2::text[]))
			AND ($3::text[] IS NULL OR category = ANY($3::text[]))
			AND ($4::text[] IS NULL
				OR (name, version) IN (SELECT * FROM unnest($4::text[], $5::text[])))
		 ORDER BY name, version, id`,
		[
			filter.ids ?? null,
			filter.names ?? null,
			filter.categories ?? null,
			filter.keys ? filter.keys.map(k => k.name) : null,
			filter.keys ? filter.keys.map(k => k.version) : null
		],
		t
	);
	const rules = await loadTriggerRules(
		db,
		rows.map(r => r.trigger_rule_id),
		t
	);
	return rows.map(row => {
		const rule = row.trigger_rule_id === null ? undefined : rules.get(row.trigger_rule_id);
		return {
			name: row.name,
			version: row.version,
			title: row.title,
			description: row.description,
			category: row.category,
			author_name: row.author_name,
			author_url: row.author_url,
			is_operational: row.is_operational,
			icon_code: row.icon_code,
			docker_privileged: row.docker_privileged,
			docker_image: row.docker_image,
			priority: row.priority,
			timeout: row.timeout,
			max_scheduled: row.max_scheduled,
			max_tries: row.max_tries,
			cpus_required: Number(row.cpus_required),
			mem_required: Number(row.mem_required),
			disk_out_const_required: Number(row.disk_out_const_required),
			disk_out_mult_required: Number(row.disk_out_mult_required),
			interface: row.interface,
			error_mapping: row.error_mapping,
			trigger_rule: rule ? exportTriggerRule(rule) : null
		};
	});
}
