import type { Sequelize } from "sequelize";
import { select, selectPrepared } from "../db/connection";
import { buildEnvelope, type Envelope } from "./envelope";
import { parseListQuery, type ListSpec } from "./params";

/** Above this many matching rows `count` is the planner's estimate rather than an exact count. */
export const EXACT_COUNT_LIMIT = 100000;

export interface ListSource extends ListSpec {
	/** FROM clause (a table, or trusted joins) */
	from: string;
	/** SELECT list */
	columns: string;
}

export interface ListRequest {
	query: Record<string, unknown>;
	baseUrl: string;
	path: string;
	now?: Date;
}

/**
 * Counts the rows matching `where` without scanning millions of them: an exact count up to
 * EXACT_COUNT_LIMIT (the inner LIMIT stops the scan there), the planner's estimate beyond.
 */
export async function countRows(
	db: Sequelize,
	from: string,
	where: string,
	bind: unknown[]
): Promise<number> {
	const [{ n }] = await select<{ n: string }>(
		db,
		`SELECT count(*) AS n FROM (SELECT 1 FROM ${from} WHERE ${where} LIMIT ${EXACT_COUNT_LIMIT + 1}) capped`,
		bind
	);
	const exact = Number(n);
	if (exact <= EXACT_COUNT_LIMIT) return exact;
	const [plan] = await select<{ "QUERY PLAN": any }>(
		db,
		`EXPLAIN (FORMAT JSON) SELECT 1 FROM ${from} WHERE ${where}`,
		bind
	);
	const estimate = Number(plan["QUERY PLAN"][0]?.Plan?.["Plan Rows"] ?? 0);
	return Math.max(exact, Math.round(estimate));
}

/**
 * Answers a list request: one page of rows (one more fetched to learn whether a next page
 * exists) and the count, in one statement; a second runs only for a page past the end or a
 * count beyond EXACT_COUNT_LIMIT.
 */
export async function runList<Row, Out>(
	db: Sequelize,
	source: ListSource,
	req: ListRequest,
	serialize: (rows: Row[]) => Out[] | Promise<Out[]>
): Promise<Envelope<Out>> {
	const p = parseListQuery(req.query, source, req.now);
	// One round trip: the page and, beside it, the capped count (cheap next to a second query).
	const rows = await selectPrepared<Row & { __total?: string }>(
		db,
		`SELECT ${source.columns},
			(SELECT count(*) FROM (SELECT 1 FROM ${source.from} WHERE ${p.where} LIMIT ${EXACT_COUNT_LIMIT + 1}) capped) AS __total
		 FROM ${source.from} WHERE ${p.where} ORDER BY ${p.orderBy} LIMIT ${p.limit + 1} OFFSET ${p.offset}`,
		p.bind
	);
	const hasMore = rows.length > p.limit;
	if (hasMore) rows.pop();
	const capped = rows.length > 0 ? Number(rows[0].__total) : null;
	for (const row of rows) delete row.__total;
	// A page that is not full tells the count exactly, whatever its size.
	const count =
		!hasMore && (rows.length > 0 || p.offset === 0)
			? p.offset + rows.length
			: capped !== null && capped <= EXACT_COUNT_LIMIT
				? capped
				: await countRows(db, source.from, p.where, p.bind);
	return buildEnvelope({
		count,
		page: p.page,
		pageSize: p.pageSize,
		hasMore,
		results: await serialize(rows),
		baseUrl: req.baseUrl,
		path: req.path,
		query: req.query
	});
}
