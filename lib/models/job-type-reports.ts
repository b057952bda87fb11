import type { Sequelize, Transaction } from "sequelize";
import { select, selectPrepared, write } from "../db/connection";
import { buildEnvelope, type Envelope } from "../list/envelope";
import { formatDatetime } from "../list/iso8601";
import { parseListQuery, type ListSpec, type ParsedList } from "../list/params";
import { serializeError, type ErrorRow } from "./error";
import { JOB_TYPE_BASE_FIELDS, jobTypeBaseOf, type JobTypeBaseColumns } from "./job";

/**
 * Scale 3.0's job type reports (JobTypeManager.get_status, get_running_status and
 * get_failed_status; JobTypesStatusView, JobTypesRunningView, JobTypesSystemFailuresView):
 * GET /job-types/status/, /job-types/running/ and /job-types/system-failures/. Each is one
 * set-based statement (GROUP BY over the job table's indexes) answering a page and the total.
 */

export interface ReportRequest {
	query: Record<string, unknown>;
	baseUrl: string;
	path: string;
	now?: Date;
}

/** The default start of the status report's range: 3 hours back (Scale's PT3H0M0S). */
export const STATUS_DEFAULT_SPAN_MS = 3 * 3600 * 1000;

/** The job type columns of a report row, as `jt_` beside `job_type_id`. */
const JT_COLUMNS = [
	"jt.id AS job_type_id",
	...JOB_TYPE_BASE_FIELDS.filter(f => f !== "id").map(f => `jt.${f} AS jt_${f}`)
].join(", ");

/** started/ended (status only) and paging; no order, no filters. */
function reportSpec(timeColumn: string | null): ListSpec {
	return { orderable: {}, defaultOrder: [], timeColumn, filters: {} };
}

/** Paging only (the running and system failure reports take no range, as Scale's). */
function parsePaging(query: Record<string, unknown>): ParsedList {
	const { page, page_size } = query;
	return parseListQuery({ page, page_size }, reportSpec(null));
}

function envelope<T>(
	req: ReportRequest,
	p: ParsedList,
	count: number,
	hasMore: boolean,
	results: T[]
): Envelope<T> {
	return buildEnvelope({
		count,
		page: p.page,
		pageSize: p.pageSize,
		hasMore,
		results,
		baseUrl: req.baseUrl,
		path: req.path,
		query: req.query
	});
}

function date(d: Date | null): string | null {
	return d === null ? null : formatDatetime(d);
}

// ---- GET /job-types/status/ -------------------------------------------------------------------

/** The page's columns, by which its job types' counts are gathered. */
const PAGE_COLUMNS = [
	"job_type_id",
	...JOB_TYPE_BASE_FIELDS.filter(f => f !== "id").map(f => `jt_${f}`),
	"__total",
	"__order"
]
	.map(c => `page.${c}`)
	.join(", ");

interface StatusRow extends JobTypeBaseColumns {
	__total: number;
	statuses: (string | null)[];
	categories: (string | null)[];
	counts: (number | null)[];
	most_recents: (Date | null)[];
}

/**
 * Every job type (by last_modified, then id, as Scale ordered them), each with its jobs counted
 * by status, and FAILED ones by error category too: jobs whose last status change lies in
 * [started, ended], plus every RUNNING job whatever its time. `started` defaults to 3 hours
 * before now, `ended` to now; each is an ISO-8601 datetime or a duration back from now.
 */
export async function getJobTypeStatus(
	db: Sequelize,
	req: ReportRequest
): Promise<Envelope<unknown>> {
	const now = req.now ?? new Date();
	const { page, page_size, started, ended } = req.query;
	const given = started !== undefined && started !== null && started !== "";
	const p = parseListQuery(
		{
			page,
			page_size,
			started: given
				? started
				: formatDatetime(new Date(now.getTime() - STATUS_DEFAULT_SPAN_MS)),
			ended
		},
		reportSpec("j.last_status_change"),
		now
	);
	// Two branches, each on its own index: RUNNING jobs on the partial index of unfinished jobs
	// by type, the others in range on (job_type_id, last_status_change, id).
	const rows = await selectPrepared<StatusRow>(
		db,
		`WITH page AS (
			SELECT ${JT_COLUMNS}, count(*) OVER ()::int AS __total,
				row_number() OVER (ORDER BY jt.last_modified, jt.id) AS __order
			FROM job_type jt ORDER BY jt.last_modified, jt.id LIMIT $3 OFFSET $4
		 ), jobs AS (
			SELECT j.job_type_id, j.status, j.error_id, j.last_status_change
			FROM job j
			WHERE j.status = 'RUNNING' AND j.job_type_id IN (SELECT job_type_id FROM page)
			UNION ALL
			SELECT j.job_type_id, j.status, j.error_id, j.last_status_change
			FROM job j
			WHERE j.status <> 'RUNNING' AND j.job_type_id IN (SELECT job_type_id FROM page)
				AND j.last_status_change >= $1 AND j.last_status_change <= $2
		 ), counts AS (
			SELECT jobs.job_type_id, jobs.status,
				CASE WHEN jobs.status = 'FAILED' THEN e.category END AS category,
				count(*)::int AS count, max(jobs.last_status_change) AS most_recent
			FROM jobs LEFT JOIN error e ON e.id = jobs.error_id
			GROUP BY 1, 2, 3
		 )
		 SELECT ${PAGE_COLUMNS},
			array_agg(c.status ORDER BY c.status, c.category) AS statuses,
			array_agg(c.category ORDER BY c.status, c.category) AS categories,
			array_agg(c.count ORDER BY c.status, c.category) AS counts,
			array_agg(c.most_recent ORDER BY c.status, c.category) AS most_recents
		 FROM page LEFT JOIN counts c ON c.job_type_id = page.job_type_id
		 GROUP BY ${PAGE_COLUMNS}
		 ORDER BY page.__order`,
		[p.started, p.ended, p.limit + 1, p.offset]
	);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	const count = rows.length > 0 ? rows[0].__total : await countOf(db, "SELECT id FROM job_type");
	return envelope(
		req,
		p,
		count,
		hasMore,
		rows.map(row => ({
			job_type: jobTypeBaseOf(row),
			job_counts: row.statuses.flatMap((status, i) =>
				status === null
					? []
					: [
							{
								status,
								count: row.counts[i],
								most_recent: date(row.most_recents[i]),
								category: row.categories[i]
							}
						]
			)
		}))
	);
}

/** The total of a report whose page came back empty (past its end, or none at all). */
async function countOf(db: Sequelize, sql: string): Promise<number> {
	const [row] = await selectPrepared<{ n: number }>(
		db,
		`SELECT count(*)::int AS n FROM (${sql}) t`
	);
	return row.n;
}

// ---- GET /job-types/running/ ------------------------------------------------------------------

interface RunningRow extends JobTypeBaseColumns {
	__total: number;
	count: number;
	longest_running: Date | null;
}

const RUNNING_GROUPS = `SELECT j.job_type_id, count(*)::int AS count, min(j.started) AS longest_running
	FROM job j WHERE j.status = 'RUNNING' GROUP BY j.job_type_id`;

/**
 * Each job type with RUNNING jobs: their count and the earliest `started` among them, the
 * longest running first (then by type id).
 */
export async function getRunningJobTypes(
	db: Sequelize,
	req: ReportRequest
): Promise<Envelope<unknown>> {
	const p = parsePaging(req.query);
	const rows = await selectPrepared<RunningRow>(
		db,
		`WITH running AS (${RUNNING_GROUPS})
		 SELECT ${JT_COLUMNS}, r.count, r.longest_running, count(*) OVER ()::int AS __total
		 FROM running r JOIN job_type jt ON jt.id = r.job_type_id
		 ORDER BY r.longest_running NULLS LAST, jt.id LIMIT $1 OFFSET $2`,
		[p.limit + 1, p.offset]
	);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	const count = rows.length > 0 ? rows[0].__total : await countOf(db, RUNNING_GROUPS);
	return envelope(
		req,
		p,
		count,
		hasMore,
		rows.map(row => ({
			job_type: jobTypeBaseOf(row),
			count: row.count,
			longest_running: date(row.longest_running)
		}))
	);
}

// ---- GET /job-types/system-failures/ ----------------------------------------------------------

interface FailureRow extends JobTypeBaseColumns {
	__total: number;
	__deltas: number;
	error_id: number;
	count: number;
	first_error: Date | null;
	last_error: Date | null;
}

/** A group's first and last times read off the FAILED jobs' index: two probes. */
const probe = (fn: "min" | "max", g: string) =>
	`(SELECT ${fn}(j.last_status_change) FROM job j WHERE j.status = 'FAILED'
		AND j.error_id = ${g}.error_id AND j.job_type_id = ${g}.job_type_id)`;

/** Deltas (of `from`, chosen by `where`) by group: added count, widened times, any removal. */
const deltaGroups = (from: string, where = "") => `SELECT job_type_id, error_id,
		sum(delta)::int AS n, min(at) FILTER (WHERE delta > 0) AS lo,
		max(at) FILTER (WHERE delta > 0) AS hi, bool_or(delta < 0) AS removed
	FROM ${from} ${where} GROUP BY job_type_id, error_id`;

const SYSTEM = "error_id IN (SELECT id FROM error WHERE category = 'SYSTEM')";

/**
 * The FAILED jobs of SYSTEM errors by job type and error (migration 0013): each group's kept
 * count and times, with its deltas not yet folded in; a group with a removal among them reads its
 * times off the index (the removed job may have been its first or last).
 */
const FAILURE_GROUPS = `SELECT g.job_type_id, g.error_id, g.count,
		CASE WHEN g.removed THEN ${probe("min", "g")} ELSE g.first_error END AS first_error,
		CASE WHEN g.removed THEN ${probe("max", "g")} ELSE g.last_error END AS last_error
	FROM (
		SELECT COALESCE(k.job_type_id, d.job_type_id) AS job_type_id,
			COALESCE(k.error_id, d.error_id) AS error_id,
			COALESCE(k.count, 0) + COALESCE(d.n, 0) AS count,
			LEAST(k.first_error, d.lo) AS first_error, GREATEST(k.last_error, d.hi) AS last_error,
			COALESCE(d.removed, false) AS removed
		FROM (SELECT * FROM failed_job_count WHERE ${SYSTEM}) k
			FULL JOIN (${deltaGroups("failed_job_delta", `WHERE ${SYSTEM}`)}) d
			ON d.job_type_id = k.job_type_id AND d.error_id = k.error_id
	) g
	WHERE g.count > 0`;

/** Deltas beyond which a reader folds them into the counts (~0.1 ms of reading per 1,000). */
export const FOLD_DELTAS = 1000;

/**
 * Folds the deltas into the counts (in `t`, or a transaction of its own), unless another
 * transaction is doing so (a transaction-level advisory lock: two folds at once could wait on
 * each other's count rows). The rows deleted are those this statement sees committed; any
 * committed later stay for the next fold. Answers the deltas folded. Readers of the report fold
 * past FOLD_DELTAS; the clock's `scale-job-load` rule folds every minute.
 */
export async function foldFailedJobDeltas(db: Sequelize, t?: Transaction): Promise<number> {
	const fold = async (tx: Transaction) => {
		const [lock] = await select<{ got: boolean }>(
			db,
			`SELECT pg_try_advisory_xact_lock(hashtext('failed_job_delta')) AS got`,
			[],
			tx
		);
		if (!lock.got) return 0;
		const [row] = await write<{
			n: number;
			removed: { job_type_id: number; error_id: number }[];
		}>(
			db,
			`WITH folded AS (DELETE FROM failed_job_delta RETURNING *),
			 d AS (${deltaGroups("folded")}),
			 kept AS (
				INSERT INTO failed_job_count (job_type_id, error_id, count, first_error, last_error)
				SELECT job_type_id, error_id, n, lo, hi FROM d
				ON CONFLICT (error_id, job_type_id) DO UPDATE SET
					count = failed_job_count.count + EXCLUDED.count,
					first_error = LEAST(failed_job_count.first_error, EXCLUDED.first_error),
					last_error = GREATEST(failed_job_count.last_error, EXCLUDED.last_error)
			 )
			 SELECT (SELECT count(*) FROM folded)::int AS n,
				COALESCE((SELECT json_agg(json_build_object('job_type_id', job_type_id,
					'error_id', error_id)) FROM d WHERE removed), '[]') AS removed`,
			[],
			tx
		);
		// A removed job may have been its group's first or last: those read again off the index
		// (a statement of its own: the fold's changes are not visible inside its own statement).
		await write(db, `DELETE FROM failed_job_count WHERE count = 0`, [], tx);
		await write(
			db,
			`UPDATE failed_job_count c SET first_error = ${probe("min", "c")},
				last_error = ${probe("max", "c")}
			 FROM json_to_recordset($1::json) AS r(job_type_id int, error_id int)
			 WHERE c.job_type_id = r.job_type_id AND c.error_id = r.error_id`,
			[JSON.stringify(row.removed)],
			tx
		);
		return row.n;
	};
	return t ? fold(t) : db.transaction(fold);
}

/**
 * Each job type and SYSTEM error its FAILED jobs failed with: the count and the first and last
 * time (the jobs' last status change), the latest error first (then by type and error id).
 */
export async function getSystemFailures(
	db: Sequelize,
	req: ReportRequest
): Promise<Envelope<unknown>> {
	const p = parsePaging(req.query);
	const rows = await selectPrepared<FailureRow & { [k: `er_${string}`]: unknown }>(
		db,
		`WITH failures AS (${FAILURE_GROUPS})
		 SELECT ${JT_COLUMNS}, f.error_id, f.count, f.first_error, f.last_error,
			e.name AS er_name, e.title AS er_title, e.description AS er_description,
			e.category AS er_category, e.is_builtin AS er_is_builtin, e.created AS er_created,
			e.last_modified AS er_last_modified, count(*) OVER ()::int AS __total,
			(SELECT count(*) FROM (SELECT FROM failed_job_delta LIMIT $3) d)::int AS __deltas
		 FROM failures f JOIN job_type jt ON jt.id = f.job_type_id JOIN error e ON e.id = f.error_id
		 ORDER BY f.last_error DESC NULLS LAST, jt.id, e.id LIMIT $1 OFFSET $2`,
		[p.limit + 1, p.offset, FOLD_DELTAS + 1]
	);
	const deltas =
		rows.length > 0
			? rows[0].__deltas
			: (
					await selectPrepared<{ n: number }>(
						db,
						`SELECT count(*)::int AS n FROM (SELECT FROM failed_job_delta LIMIT $1) d`,
						[FOLD_DELTAS + 1]
					)
				)[0].n;
	if (deltas > FOLD_DELTAS) await foldFailedJobDeltas(db);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	const count = rows.length > 0 ? rows[0].__total : await countOf(db, FAILURE_GROUPS);
	return envelope(
		req,
		p,
		count,
		hasMore,
		rows.map(row => ({
			job_type: jobTypeBaseOf(row),
			error: serializeError({
				id: row.error_id,
				name: row.er_name,
				title: row.er_title,
				description: row.er_description,
				category: row.er_category,
				is_builtin: row.er_is_builtin,
				created: row.er_created,
				last_modified: row.er_last_modified
			} as ErrorRow),
			count: row.count,
			first_error: date(row.first_error),
			last_error: date(row.last_error)
		}))
	);
}
