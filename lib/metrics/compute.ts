import type { Sequelize } from "sequelize";
import { write, type Sql, transaction } from "../db/run";
import { FieldError } from "../errors";

/**
 * Scale 3.0's daily metrics (scale/metrics/models.py, MetricsJobTypeManager,
 * MetricsIngestManager and MetricsErrorManager .calculate) for one UTC day, each table in one
 * set-based statement. A day is replaced as Scale replaces it: its rows are upserted on
 * (occurred, <choice>_id) and the day's rows of choices with nothing left that day are deleted,
 * so computing a day twice gives the same rows (ids and `created` kept).
 *
 * Times are whole seconds (each duration clamped at 0 as Scale does, sums/min/max/avg of the
 * exact durations truncated to integers as Django's IntegerField truncates Scale's floats);
 * averages are over the items that had the duration (Scale divides by the day's completed job
 * count, which is the same when each completed job has its one completed execution).
 */

/** The day's bounds, [lo, hi), in UTC, from bind $1 (YYYY-MM-DD). */
const BOUNDS = `bounds AS (
	SELECT ($1::date)::timestamp AT TIME ZONE 'UTC' AS lo,
		($1::date + 1)::timestamp AT TIME ZONE 'UTC' AS hi
)`;

/** Seconds from `a` to `b`, at least 0, or NULL when either is missing. */
const secs = (a: string, b: string) =>
	`CASE WHEN ${a} IS NOT NULL AND ${b} IS NOT NULL
		THEN GREATEST(EXTRACT(EPOCH FROM (${b} - ${a})), 0) END`;

/** sum/min/max/avg of a column of seconds as whole seconds (NULL when none). */
const aggregates = (name: string, cast = "int") =>
	["sum", "min", "max", "avg"]
		.map(f => `floor(${f}(${name}_v)::numeric)::${cast} AS ${name}_${f}`)
		.join(",\n\t\t");

const stats = (name: string) => ["sum", "min", "max", "avg"].map(f => `${name}_${f}`);

/** The upsert of `rows` (a CTE) into `table`, deleting the day's other rows first. */
function upsert(table: string, choice: string, columns: string[]): string {
	return `gone AS (
		DELETE FROM ${table} m
		WHERE m.occurred = $1::date
			AND NOT EXISTS (SELECT 1 FROM rows r WHERE r.${choice} = m.${choice})
	)
	INSERT INTO ${table} (occurred, ${choice}, ${columns.join(", ")})
	SELECT $1::date, ${choice}, ${columns.join(", ")} FROM rows
	ON CONFLICT (occurred, ${choice}) DO UPDATE SET
		${columns.map(c => `${c} = EXCLUDED.${c}`).join(",\n\t\t")}
	RETURNING id`;
}

const TIMES = ["queue", "pre", "job", "post", "run", "stage"].map(t => `${t}_time`);
const JOB_COUNTS = [
	"completed_count",
	"failed_count",
	"canceled_count",
	"total_count",
	"error_system_count",
	"error_data_count",
	"error_algorithm_count"
];

/**
 * Jobs: those COMPLETED, FAILED or CANCELED whose `ended` is in the day, counted per job type and
 * per category of the job's error. Times: the executions COMPLETED (ended in the day), grouped
 * by their job's type (job_exe.job_type_id, the job's, kept on the execution since 0003). A job type with completed executions but no finished job that day gets a
 * row with zero counts (Scale would fail on it).
 */
const JOB_TYPE_SQL = `WITH ${BOUNDS},
	jobs AS (
		SELECT j.job_type_id,
			count(*) FILTER (WHERE j.status = 'COMPLETED')::int AS completed_count,
			count(*) FILTER (WHERE j.status = 'FAILED')::int AS failed_count,
			count(*) FILTER (WHERE j.status = 'CANCELED')::int AS canceled_count,
			count(*)::int AS total_count,
			count(*) FILTER (WHERE e.category = 'SYSTEM')::int AS error_system_count,
			count(*) FILTER (WHERE e.category = 'DATA')::int AS error_data_count,
			count(*) FILTER (WHERE e.category = 'ALGORITHM')::int AS error_algorithm_count
		FROM job j CROSS JOIN bounds b LEFT JOIN error e ON e.id = j.error_id
		WHERE j.status IN ('COMPLETED', 'FAILED', 'CANCELED') AND j.ended >= b.lo AND j.ended < b.hi
		GROUP BY j.job_type_id
	),
	exes AS (
		SELECT x.job_type_id,
			${secs("x.queued", "x.started")} AS queue_time_v,
			${secs("x.pre_started", "x.pre_completed")} AS pre_time_v,
			${secs("x.job_started", "x.job_completed")} AS job_time_v,
			${secs("x.post_started", "x.post_completed")} AS post_time_v,
			${secs("x.started", "x.ended")} AS run_time_v
		FROM job_exe x CROSS JOIN bounds b
		WHERE x.status = 'COMPLETED' AND x.ended >= b.lo AND x.ended < b.hi
	),
	staged AS (
		SELECT *, CASE WHEN run_time_v IS NOT NULL THEN GREATEST(
			run_time_v - (COALESCE(pre_time_v, 0) + COALESCE(job_time_v, 0) + COALESCE(post_time_v, 0)), 0) END AS stage_time_v
		FROM exes
	),
	times AS (
		SELECT job_type_id,
		${TIMES.map(t => aggregates(t)).join(",\n\t\t")}
		FROM staged GROUP BY job_type_id
	),
	rows AS (
		SELECT COALESCE(jobs.job_type_id, times.job_type_id) AS job_type_id,
			${JOB_COUNTS.map(c => `COALESCE(jobs.${c}, 0) AS ${c}`).join(",\n\t\t\t")},
			${TIMES.flatMap(stats).join(", ")}
		FROM jobs FULL JOIN times ON times.job_type_id = jobs.job_type_id
	),
	${upsert("metrics_job_type", "job_type_id", [...JOB_COUNTS, ...TIMES.flatMap(stats)])}`;

const INGEST_COUNTS = [
	"deferred_count",
	"ingested_count",
	"errored_count",
	"duplicate_count",
	"total_count"
];
const INGEST_STATS = [...stats("file_size"), ...stats("transfer_time"), ...stats("ingest_time")];

/**
 * Ingests DEFERRED, INGESTED, ERRORED or DUPLICATE that ended in the day, per strike (a scan's
 * are not a strike's). Scale
 * takes `ingest_ended`; here an ingest set aside before ingesting (DEFERRED, DUPLICATE, ERRORED
 * from TRANSFERRED) has none, so its end is its `transfer_ended`. File sizes count when non-zero,
 * transfer times for every status, ingest times for INGESTED only, as in Scale.
 */
const INGEST_SQL = `WITH ${BOUNDS},
	ingests AS (
		SELECT i.strike_id, i.status,
			NULLIF(i.file_size, 0) AS file_size_v,
			${secs("i.transfer_started", "i.transfer_ended")} AS transfer_time_v,
			CASE WHEN i.status = 'INGESTED'
				THEN ${secs("i.ingest_started", "i.ingest_ended")} END AS ingest_time_v
		FROM ingest i CROSS JOIN bounds b
		WHERE i.status IN ('DEFERRED', 'INGESTED', 'ERRORED', 'DUPLICATE') AND i.strike_id IS NOT NULL
			AND COALESCE(i.ingest_ended, i.transfer_ended) >= b.lo
			AND COALESCE(i.ingest_ended, i.transfer_ended) < b.hi
	),
	rows AS (
		SELECT strike_id,
			count(*) FILTER (WHERE status = 'DEFERRED')::int AS deferred_count,
			count(*) FILTER (WHERE status = 'INGESTED')::int AS ingested_count,
			count(*) FILTER (WHERE status = 'ERRORED')::int AS errored_count,
			count(*) FILTER (WHERE status = 'DUPLICATE')::int AS duplicate_count,
			count(*)::int AS total_count,
			${aggregates("file_size", "bigint")},
			${aggregates("transfer_time")},
			${aggregates("ingest_time")}
		FROM ingests GROUP BY strike_id
	),
	${upsert("metrics_ingest", "strike_id", [...INGEST_COUNTS, ...INGEST_STATS])}`;

/** Executions (any status) with a built-in error whose `ended` is in the day, per error. */
const ERROR_SQL = `WITH ${BOUNDS},
	rows AS (
		SELECT x.error_id, count(*)::int AS total_count
		FROM job_exe x JOIN error e ON e.id = x.error_id AND e.is_builtin CROSS JOIN bounds b
		WHERE x.ended >= b.lo AND x.ended < b.hi
		GROUP BY x.error_id
	),
	${upsert("metrics_error", "error_id", ["total_count"])}`;

/** Throws FieldError unless `day` is a real calendar date written YYYY-MM-DD. */
export function checkDay(day: unknown): string {
	const ok =
		typeof day === "string" &&
		/^\d{4}-\d{2}-\d{2}$/.test(day) &&
		day >= "0001-01-01" &&
		!Number.isNaN(Date.parse(`${day}T00:00:00Z`)) &&
		new Date(`${day}T00:00:00Z`).toISOString().slice(0, 10) === day;
	if (!ok) throw new FieldError("day", "must be a calendar date (YYYY-MM-DD)");
	return day;
}

/**
 * Computes the metrics of the UTC `day` into metrics_job_type, metrics_ingest and
 * metrics_error (in `t`, or in a transaction of its own); answers the rows written per table.
 */
export async function computeDailyMetrics(
	db: Sequelize,
	day: string,
	t?: Sql
): Promise<{ jobTypes: number; ingests: number; errors: number }> {
	checkDay(day);
	const run = async (tx: Sql) => {
		const jobTypes = await write(db, JOB_TYPE_SQL, [day], tx);
		const ingests = await write(db, INGEST_SQL, [day], tx);
		const errors = await write(db, ERROR_SQL, [day], tx);
		return { jobTypes: jobTypes.length, ingests: ingests.length, errors: errors.length };
	};
	return t ? run(t) : transaction(db, run);
}
