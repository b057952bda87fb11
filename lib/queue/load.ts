import type { Sequelize } from "sequelize";
import { select, selectPrepared, write, type Sql } from "../db/run";
import { buildEnvelope, type Envelope } from "../list/envelope";
import { formatDatetime } from "../validation/schema";
import { parseBoundedRange } from "../list/bounded-range";
import type { ListSpec } from "../list/params";

/**
 * The job load history behind GET /load/ (Scale 3.0's JobLoad, JobLoadProcessor and
 * JobLoadView): once a minute the counts of PENDING, QUEUED and RUNNING jobs per job type are
 * recorded in `job_load`; the view sums them by measurement time.
 */

/**
 * Records the load of the current minute inside the caller's transaction, once per minute
 * however many replicas try: under a transaction-level advisory lock, the rows are written only
 * when none exists for `date_trunc('minute', now())`. One row per job type with jobs in PENDING,
 * QUEUED or RUNNING; when there are none, one placeholder row with no job type and zero counts
 * (as Scale does), so the history shows the idle minutes. Answers the number of rows written (0
 * when this minute was already recorded).
 */
export async function recordJobLoad(db: Sequelize, t: Sql): Promise<number> {
	await select(db, "SELECT pg_advisory_xact_lock(hashtext('scale.job_load'))", [], t);
	const rows = await write<{ id: number }>(
		db,
		`WITH counts AS (
			SELECT job_type_id,
				count(*) FILTER (WHERE status = 'PENDING')::int AS pending,
				count(*) FILTER (WHERE status = 'QUEUED')::int AS queued,
				count(*) FILTER (WHERE status = 'RUNNING')::int AS running,
				count(*)::int AS total
			FROM job WHERE status IN ('PENDING', 'QUEUED', 'RUNNING')
			GROUP BY job_type_id
		 ), fresh AS (
			SELECT NOT EXISTS (
				SELECT 1 FROM job_load WHERE measured = date_trunc('minute', now())
			) AS ok
		 )
		 INSERT INTO job_load (measured, job_type_id, pending_count, queued_count, running_count,
			total_count)
		 SELECT date_trunc('minute', now()), job_type_id, pending, queued, running, total
		 FROM counts, fresh WHERE fresh.ok
		 UNION ALL
		 SELECT date_trunc('minute', now()), NULL, 0, 0, 0, 0
		 FROM fresh WHERE fresh.ok AND NOT EXISTS (SELECT 1 FROM counts)
		 RETURNING id`,
		[],
		t
	);
	return rows.length;
}

const LOAD_SPEC: ListSpec = {
	orderable: {
		time: "l.measured",
		pending_count: "sum(l.pending_count)",
		queued_count: "sum(l.queued_count)",
		running_count: "sum(l.running_count)"
	},
	defaultOrder: ["time"],
	timeColumn: "l.measured",
	filters: {
		job_type_id: { column: "l.job_type_id", type: "integer" },
		job_type_name: { column: "jt.name", type: "string" },
		job_type_category: { column: "jt.category", type: "string" },
		job_type_priority: { column: "jt.priority", type: "integer" }
	}
};

/** The query parameters GET /load/ filters on (all repeatable). */
export const LOAD_FILTERS = Object.keys(LOAD_SPEC.filters);

export interface LoadEntry {
	time: string;
	pending_count: number;
	queued_count: number;
	running_count: number;
}

export interface LoadRequest {
	query: Record<string, unknown>;
	baseUrl: string;
	path: string;
	now?: Date;
}

/**
 * GET /load/: the recorded counts summed over the matching job types per measurement time, in
 * the list envelope. `started` defaults to a week back and `ended` to now; a range longer than
 * 31 days is refused (FieldError on `started`). One statement for the page and its count.
 */
export async function getJobLoad(db: Sequelize, req: LoadRequest): Promise<Envelope<LoadEntry>> {
	const p = parseBoundedRange(req.query, LOAD_SPEC, req.now ?? new Date());
	const from = "job_load l LEFT JOIN job_type jt ON jt.id = l.job_type_id";
	const rows = await selectPrepared<{
		time: Date;
		pending_count: number;
		queued_count: number;
		running_count: number;
		__total: number;
	}>(
		db,
		`SELECT l.measured AS time, sum(l.pending_count)::int AS pending_count,
			sum(l.queued_count)::int AS queued_count, sum(l.running_count)::int AS running_count,
			count(*) OVER ()::int AS __total
		 FROM ${from} WHERE ${p.where}
		 GROUP BY l.measured
		 ORDER BY ${p.orderBy}, l.measured
		 LIMIT ${p.limit + 1} OFFSET ${p.offset}`,
		p.bind
	);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	let count: number;
	if (rows.length > 0) count = rows[0].__total;
	else if (p.offset === 0) count = 0;
	else {
		const [row] = await select<{ n: number }>(
			db,
			`SELECT count(DISTINCT l.measured)::int AS n FROM ${from} WHERE ${p.where}`,
			p.bind
		);
		count = row.n;
	}
	return buildEnvelope({
		count,
		page: p.page,
		pageSize: p.pageSize,
		hasMore,
		results: rows.map(row => ({
			time: formatDatetime(row.time),
			pending_count: row.pending_count,
			queued_count: row.queued_count,
			running_count: row.running_count
		})),
		baseUrl: req.baseUrl,
		path: req.path,
		query: req.query
	});
}
