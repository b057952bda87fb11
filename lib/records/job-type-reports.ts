import type { Sequelize } from "sequelize";
import { select, selectPrepared, write, type Sql, transaction } from "../db/run";
import { AnswerCache, generationsSql } from "../list/answer-cache";
import { buildEnvelope, envelopeHead, type Envelope } from "../list/envelope";
import { formatDatetime } from "../validation/schema";
import { parseListQuery, type ListSpec, type ParsedList } from "../list/params";
import { JOB_TYPE_BASE_FIELDS, jobTypeBaseOf, type JobTypeBaseColumns } from "./job";
import { errorsAt, generationOf, jobTypesAt } from "./kept-records";

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

interface StatusRow {
	__generation: string;
	job_type_id: number | null;
	status: string;
	category: string | null;
	count: number;
	most_recent: Date;
}

/**
 * Every job type (by last_modified, then id, as Scale ordered them), each with its jobs counted
 * by status, and FAILED ones by error category too: jobs whose last status change lies in
 * [started, ended], plus every RUNNING job whatever its time. `started` defaults to 3 hours
 * before now, `ended` to now; each is an ISO-8601 datetime or a duration back from now. The
 * envelope's JSON, UTF-8: the job types are the kept records (lib/records/kept-records.ts).
 */
export async function getJobTypeStatus(db: Sequelize, req: ReportRequest): Promise<Buffer> {
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
	// Two branches, each on its own index: RUNNING jobs on the jobs' (status, ...) index, the
	// others in range on last_status_change. The job type generation comes in the same statement
	// (one row, whatever the counts), so the job types shown are at least as new as the counts.
	// The range is read through sub-selects: bound directly, PostgreSQL planned the statement
	// afresh at every request (custom plans, as the range's bounds change the estimates; ~0.5 ms)
	// rather than reuse one; this way it reuses the generic plan after five, which reads the
	// range on the index, as a range of both bounds is taken to be narrow (a one-sided one is
	// not). The range ends after the millisecond `ended` names, as the node status report's does.
	const rows = await selectPrepared<StatusRow>(
		db,
		`SELECT g.__generation, c.job_type_id, c.status, c.category, c.count, c.most_recent
		 FROM (SELECT ${generationOf("job_type")} AS __generation) g
		 LEFT JOIN (
			SELECT jobs.job_type_id, jobs.status,
				CASE WHEN jobs.status = 'FAILED' THEN e.category END AS category,
				count(*)::int AS count, max(jobs.last_status_change) AS most_recent
			FROM (
				SELECT j.job_type_id, j.status, j.error_id, j.last_status_change
				FROM job j WHERE j.status = 'RUNNING'
				UNION ALL
				SELECT j.job_type_id, j.status, j.error_id, j.last_status_change
				FROM job j
				WHERE j.status <> 'RUNNING' AND j.last_status_change >= (SELECT $1::timestamptz)
					AND j.last_status_change < (SELECT $2::timestamptz + interval '1 millisecond')
			) jobs LEFT JOIN error e ON e.id = jobs.error_id
			GROUP BY 1, 2, 3
		 ) c ON true
		 ORDER BY c.job_type_id, c.status, c.category`,
		[p.started, p.ended]
	);
	const jobTypes = await jobTypesAt(db, rows[0].__generation);
	const counts = new Map<number, unknown[]>();
	for (const row of rows) {
		if (row.job_type_id === null) continue;
		const list = counts.get(row.job_type_id) ?? [];
		list.push({
			status: row.status,
			count: row.count,
			most_recent: date(row.most_recent),
			category: row.category
		});
		counts.set(row.job_type_id, list);
	}
	const shown = jobTypes.ordered.slice(p.offset, p.offset + p.limit);
	return envelopeJson(
		req,
		p,
		jobTypes.ordered.length,
		jobTypes.ordered.length > p.offset + p.limit,
		shown.map(
			jt =>
				`{"job_type":${jt.json},"job_counts":${JSON.stringify(counts.get(jt.row.job_type_id) ?? [])}}`
		)
	);
}

/** The envelope's JSON (UTF-8) with `entries` (JSON texts) as its results. */
function envelopeJson(
	req: ReportRequest,
	p: ParsedList,
	count: number,
	hasMore: boolean,
	entries: string[]
): Buffer {
	const head = envelopeHead(req, p, count, hasMore);
	return Buffer.from(`${head}${entries.join(",")}]}`);
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

interface FailureRow {
	__job_type_generation: string;
	__error_generation: string;
	__total: number | null;
	job_type_id: number | null;
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
export async function foldFailedJobDeltas(db: Sequelize, t?: Sql): Promise<number> {
	const fold = async (tx: Sql) => {
		const [lock] = await select<{ got: boolean }>(
			db,
			`SELECT pg_try_advisory_xact_lock(hashtext('failed_job_delta')) AS got`,
			[],
			tx
		);
		if (!lock.got) return 0;
		// nothing to fold: no write, so the counts' generation (migration 0014) stays as it is
		const [pending] = await select<{ any: boolean }>(
			db,
			`SELECT EXISTS (SELECT FROM failed_job_delta) AS any`,
			[],
			tx
		);
		if (!pending.any) return 0;
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
	return t ? fold(t) : transaction(db, fold);
}

/**
 * Each job type and SYSTEM error its FAILED jobs failed with: the count and the first and last
 * time (the jobs' last status change), the latest error first (then by type and error id). The
 * answer (JSON) is kept while the FAILED jobs, job types and errors are as they were: a web UI
 * polls it, and failures are rare beside the polls.
 */
export async function getSystemFailures(db: Sequelize, req: ReportRequest): Promise<Buffer> {
	const p = parsePaging(req.query);
	let state = await failuresState(db);
	if (state.deltas > FOLD_DELTAS) {
		await foldFailedJobDeltas(db);
		state = await failuresState(db);
	}
	let cache = failureAnswers.get(db);
	if (cache === undefined)
		failureAnswers.set(db, (cache = new AnswerCache(FAILURE_ANSWER_BYTES)));
	const key = JSON.stringify([p.page, p.pageSize, req.baseUrl, req.path, req.query]);
	const kept = cache.get(key, state.version);
	if (kept !== undefined) return kept;
	// read after the state: a change meanwhile makes this answer kept under an older state
	const json = await systemFailures(db, req, p);
	cache.set(key, state.version, json);
	return json;
}

/** Answers kept per database: 4 MiB each at most. */
const FAILURE_ANSWER_BYTES = 4 * 1024 * 1024;
const failureAnswers = new WeakMap<Sequelize, AnswerCache>();

/**
 * The state the report is made from, named exactly (migration 0014): the counts' generation
 * (raised by every fold) and the number of deltas (between folds they are only added to), with
 * the job types' and errors' generations.
 */
async function failuresState(db: Sequelize): Promise<{ version: string; deltas: number }> {
	const [state] = await selectPrepared<{ generations: string; deltas: number }>(
		db,
		`SELECT ${generationsSql("$1")} AS generations,
			(SELECT count(*) FROM failed_job_delta)::int AS deltas`,
		[["failed_job_count", "job_type", "error"]]
	);
	return { version: `${state.generations}/${state.deltas}`, deltas: state.deltas };
}

async function systemFailures(db: Sequelize, req: ReportRequest, p: ParsedList): Promise<Buffer> {
	// One row at least (the generations), the page's groups beside it.
	const rows = await selectPrepared<FailureRow>(
		db,
		`SELECT g.*, f.job_type_id, f.error_id, f.count, f.first_error, f.last_error, f.__total
		 FROM (
			SELECT ${generationOf("job_type")} AS __job_type_generation,
				${generationOf("error")} AS __error_generation
		 ) g LEFT JOIN (
			SELECT f.*, count(*) OVER ()::int AS __total FROM (${FAILURE_GROUPS}) f
			ORDER BY f.last_error DESC NULLS LAST, f.job_type_id, f.error_id LIMIT $1 OFFSET $2
		 ) f ON true
		 ORDER BY f.last_error DESC NULLS LAST, f.job_type_id, f.error_id`,
		[p.limit + 1, p.offset]
	);
	const [first] = rows;
	const jobTypes = await jobTypesAt(db, first.__job_type_generation);
	const errors = await errorsAt(db, first.__error_generation);
	const groups = rows.filter(row => row.job_type_id !== null);
	const hasMore = groups.length > p.limit;
	if (hasMore) groups.pop();
	const count = groups.length > 0 ? first.__total! : await countOf(db, FAILURE_GROUPS);
	const entries: string[] = [];
	for (const row of groups) {
		const jobType = jobTypes.byId.get(row.job_type_id!);
		const error = errors.byId.get(row.error_id);
		// gone since the counts were read (a newer generation): not shown
		if (jobType === undefined || error === undefined) continue;
		const numbers = JSON.stringify({
			count: row.count,
			first_error: date(row.first_error),
			last_error: date(row.last_error)
		});
		entries.push(`{"job_type":${jobType.json},"error":${error.json},${numbers.slice(1)}`);
	}
	return envelopeJson(req, p, count, hasMore, entries);
}
