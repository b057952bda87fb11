import type { Sequelize } from "sequelize";
import { select, selectPrepared } from "../db/run";
import { FieldError } from "../errors";
import { buildEnvelope, type Envelope } from "../list/envelope";
import { formatDatetime } from "../validation/schema";
import { parseBoundedRange } from "../list/bounded-range";
import { filterValues, type ListSpec } from "../list/params";
import { loadStrikeJobs, serializeStrike, type StrikeRow } from "./ingest";

/**
 * GET /ingests/status/ (Scale 3.0's IngestManager.get_status, IngestsStatusView): per strike, the
 * INGESTED files and their bytes in 1-hour slots of either the source file's data time
 * (`scale_file.data_started`, the default) or the ingest time (`ingest.ingest_ended`).
 */

/** The grouping time, by use_ingest_time; parseListQuery bounds it by started/ended. */
function statusSpec(useIngestTime: boolean): ListSpec {
	return {
		orderable: {},
		defaultOrder: [],
		timeColumn: useIngestTime ? "i.ingest_ended" : "f.data_started",
		filters: {}
	};
}

export interface StatusRequest {
	query: Record<string, unknown>;
	baseUrl: string;
	path: string;
	now?: Date;
}

interface StatusRow extends StrikeRow {
	__total: number;
	most_recent: Date | null;
	files: number;
	/** bigint sums: pg answers them as strings */
	size: string;
	times: Date[];
	slot_files: number[];
	slot_sizes: string[];
}

function parseUseIngestTime(query: Record<string, unknown>): boolean {
	const values = filterValues(query, "use_ingest_time", { column: "", type: "boolean" });
	if (values.length > 1) throw new FieldError("use_ingest_time", "must be given at most once");
	return values[0] === true;
}

/**
 * The status of a page of strikes, by id, each with every hour from started's to ended's, zeros
 * included. Scale counted, beside its slots, files whose data began before `started` and ended
 * after it; here a file counts when its grouping time lies within the range, so the totals are
 * the slots' sums. started defaults to a week back, ended to now; a range over 31 days is a 400
 * on `started`.
 */
export async function getIngestStatus(
	db: Sequelize,
	req: StatusRequest
): Promise<Envelope<unknown>> {
	const useIngestTime = parseUseIngestTime(req.query);
	const { page, page_size, started, ended } = req.query;
	const p = parseBoundedRange(
		{ page, page_size, started, ended },
		statusSpec(useIngestTime),
		req.now ?? new Date()
	);
	const source = useIngestTime
		? "FROM ingest i"
		: "FROM ingest i JOIN scale_file f ON f.id = i.source_file_id";
	const time = useIngestTime ? "i.ingest_ended" : "f.data_started";
	// Slots are whole UTC hours whatever the session's time zone.
	const hour = (t: string) => `date_trunc('hour', ${t} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;
	const rows = await selectPrepared<StatusRow>(
		db,
		`WITH page AS (
			SELECT s.id, s.name, s.title, s.description, s.job_id, s.created, s.last_modified,
				count(*) OVER ()::int AS __total
			FROM strike s ORDER BY s.id LIMIT ${p.limit + 1} OFFSET ${p.offset}
		 ), ingested AS (
			SELECT i.strike_id, ${hour(time)} AS slot, ${time} AS dated, i.file_size
			${source}
			WHERE i.status = 'INGESTED' AND i.strike_id IN (SELECT id FROM page) AND ${p.where}
		 ), counts AS (
			SELECT strike_id, slot, count(*)::int AS files, sum(file_size) AS size,
				max(dated) AS most_recent
			FROM ingested GROUP BY strike_id, slot
		 ), slots AS (
			-- $1 and $2 are started and ended, the range's binds (the spec has no filters)
			SELECT generate_series(${hour("$1::timestamptz")}, ${hour("$2::timestamptz")},
				interval '1 hour') AS slot
		 )
		 SELECT page.*, max(c.most_recent) AS most_recent,
			coalesce(sum(c.files), 0)::int AS files, coalesce(sum(c.size), 0) AS size,
			array_agg(slots.slot ORDER BY slots.slot) AS times,
			array_agg(coalesce(c.files, 0) ORDER BY slots.slot) AS slot_files,
			array_agg(coalesce(c.size, 0) ORDER BY slots.slot) AS slot_sizes
		 FROM page CROSS JOIN slots
			LEFT JOIN counts c ON c.strike_id = page.id AND c.slot = slots.slot
		 GROUP BY page.id, page.name, page.title, page.description, page.job_id, page.created,
			page.last_modified, page.__total
		 ORDER BY page.id`,
		p.bind
	);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	const count =
		rows.length > 0
			? rows[0].__total
			: p.offset === 0
				? 0
				: (await select<{ n: number }>(db, `SELECT count(*)::int AS n FROM strike`))[0].n;
	const jobs = await loadStrikeJobs(db, rows);
	return buildEnvelope({
		count,
		page: p.page,
		pageSize: p.pageSize,
		hasMore,
		results: rows.map(row => ({
			strike: serializeStrike(row, jobs),
			most_recent: row.most_recent === null ? null : formatDatetime(row.most_recent),
			files: row.files,
			size: Number(row.size),
			values: row.times.map((t, i) => ({
				time: formatDatetime(t),
				files: row.slot_files[i],
				size: Number(row.slot_sizes[i])
			}))
		})),
		baseUrl: req.baseUrl,
		path: req.path,
		query: req.query
	});
}
