import type { Sequelize } from "sequelize";
import { select, selectPrepared } from "../db/run";
import { buildEnvelope, type Envelope } from "./envelope";
import { filterValues, parseListQuery, type ParsedList } from "./params";
import type { ListSource } from "./types";

/**
 * Up to this many matching rows `count` is exact; beyond it, the planner's estimate. The exact
 * part is counted beside every full page, so it must stay cheap: a thousand index entries cost
 * PostgreSQL a few tens of microseconds (docs/decisions.md, "Lists").
 */
export const EXACT_COUNT_LIMIT = 1000;

export interface ListRequest {
	query: Record<string, unknown>;
	baseUrl: string;
	path: string;
	now?: Date;
}

/** The column references of an SQL fragment to tables other than `from`'s own alias. */
function referencesOthers(sql: string, alias: string): boolean {
	for (const [, name] of sql.matchAll(/\b([a-z_][a-z0-9_]*)\./gi))
		if (name !== alias) return true;
	return false;
}

/** The capped count of a page statement (exact up to EXACT_COUNT_LIMIT + 1 rows), as `__total`. */
function cappedCountSql(source: ListSource, p: ParsedList): string {
	return `(SELECT count(*) FROM (SELECT 1 FROM ${source.from} WHERE ${p.where}
		LIMIT ${EXACT_COUNT_LIMIT + 1}) capped) AS __total`;
}

/**
 * The FROM body of a page statement over a source with `key`: the page's keys chosen from `from`
 * alone (a deep page skips its offset's rows on the index, without joining them), then joined
 * back to `from` and `joins`.
 */
function chosenPageSql(
	source: ListSource & { key: string },
	p: ParsedList,
	joins?: string
): string {
	const alias = source.key.split(".")[0];
	// An order on a referenced record's column needs its join to choose the page, and to order it.
	const orderJoins = referencesOthers(p.orderBy, alias);
	const chooseFrom = orderJoins ? `${source.from} ${source.joins ?? ""}` : source.from;
	return `(SELECT ${source.key} AS __key FROM ${chooseFrom} WHERE ${p.where}
		ORDER BY ${p.orderBy} LIMIT ${p.limit + 1} OFFSET ${p.offset}) page
		JOIN ${source.from} ON ${source.key} = page.__key ${orderJoins ? (source.joins ?? "") : (joins ?? "")}`;
}

/**
 * The page statement: the rows chosen from `from` by key, then joined, with the capped count.
 * `select` replaces the SELECT list.
 */
export function pageSql(source: ListSource, p: ParsedList, select = source.columns): string {
	if (!source.joins || !source.key) {
		return `SELECT ${select}, ${cappedCountSql(source, p)} FROM ${source.from}
			WHERE ${p.where} ORDER BY ${p.orderBy} LIMIT ${p.limit + 1} OFFSET ${p.offset}`;
	}
	return `SELECT ${select}, ${cappedCountSql(source, p)}
		FROM ${chosenPageSql({ ...source, key: source.key }, p, source.joins)}
		ORDER BY ${p.orderBy}`;
}

/**
 * The page statement of a list of kept records (lib/list/cached-list.ts): one row, whatever the
 * page, holding the page's `item` of each row in order as a JSON array (`__page`, null when the
 * page is empty), the capped count (`__total`) and `extra`. One row instead of a row per record:
 * the client parses one JSON value where it parsed a hundred rows of several fields (~100 µs of
 * the service's CPU per request), and a page past the end still tells the count. Without
 * `counted`, the count is left to the planner's estimate (`__total` null; see countNeeded).
 */
export function pageItemsSql(
	source: ListSource & { key: string },
	p: ParsedList,
	item: string,
	joins: string,
	extra: string,
	counted = true
): string {
	const count = counted ? cappedCountSql(source, p) : "NULL AS __total";
	return `SELECT json_agg(${item} ORDER BY ${p.orderBy}) AS __page, ${count},
		${extra} FROM ${readPageSql(source, p, item, joins) ?? chosenPageSql(source, p, joins)}`;
}

/**
 * The FROM body of a page statement whose item, order and joins read only a few of `from`'s own
 * columns: the page's rows with those columns, under `from`'s alias, then `joins`. Each row is
 * read once, and from the index the page is chosen by when that index holds the columns (the
 * list indexes hold the versions of kept records: migration 0016), where chosenPageSql reads
 * each chosen row a second time, by its key. Null when the order needs other tables.
 */
function readPageSql(
	source: ListSource & { key: string },
	p: ParsedList,
	item: string,
	joins: string
): string | null {
	const alias = source.key.split(".")[0];
	if (referencesOthers(p.orderBy, alias)) return null;
	const columns = new Set<string>();
	for (const [, name, column] of `${source.key} ${p.orderBy} ${item} ${joins}`.matchAll(
		/\b([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)/gi
	))
		if (name === alias) columns.add(`${alias}.${column}`);
	return `(SELECT ${[...columns].join(", ")} FROM ${source.from} WHERE ${p.where}
		ORDER BY ${p.orderBy} LIMIT ${p.limit + 1} OFFSET ${p.offset}) ${alias} ${joins}`;
}

/**
 * The number of rows matching `where` as the planner estimates it (from statistics, reading no
 * rows), but never fewer than `atLeast`, the rows already known to match.
 */
export async function estimateRows(
	db: Sequelize,
	from: string,
	where: string,
	bind: unknown[],
	atLeast: number,
	now = Date.now()
): Promise<number> {
	const key = estimateKey(from, where, bind);
	let kept = estimates.get(key);
	if (kept === undefined || now - kept.at > ESTIMATE_KEPT_MS) {
		const [plan] = await select<{ "QUERY PLAN": any }>(
			db,
			`EXPLAIN (FORMAT JSON) SELECT 1 FROM ${from} WHERE ${where}`,
			bind
		);
		kept = {
			rows: Math.round(Number(plan["QUERY PLAN"][0]?.Plan?.["Plan Rows"] ?? 0)),
			at: now
		};
		if (estimates.size >= ESTIMATES_KEPT) estimates.clear();
		estimates.set(key, kept);
	}
	return Math.max(atLeast, kept.rows);
}

/**
 * The key of a kept estimate. Its time bounds count in steps of about a hundredth of the range
 * they make (a power of two of milliseconds, at least a minute): a client sends absolute bounds computed at each page load (Scale's web
 * UI: `started` N days back, `ended` now, to the millisecond), and windows that differ by less
 * than a step have estimates within ~2% of each other, far inside the planner's own error, where
 * keyed to the millisecond (or the minute) each asked for an EXPLAIN and counted its page again.
 */
function estimateKey(from: string, where: string, bind: unknown[]): string {
	const times = bind.filter(isTime).map(t => new Date(t as Date | string).getTime());
	const span = times.length > 1 ? Math.max(...times) - Math.min(...times) : 0;
	// a power of two, so that windows of about the same length share their steps
	const step = Math.max(MINUTE_MS, 2 ** Math.floor(Math.log2(Math.max(1, span / 100))));
	return `${from}\u0000${where}\u0000${step}\u0000${JSON.stringify(
		bind.map(v => (isTime(v) ? Math.floor(new Date(v as Date | string).getTime() / step) : v))
	)}`;
}

const MINUTE_MS = 60000;

/** A bound value that is an instant: a Date, or its ISO-8601 text. */
function isTime(value: unknown): boolean {
	return value instanceof Date || (typeof value === "string" && ISO_TIME.test(value));
}

/**
 * Above this many rows by the planner's kept estimate, a list is not counted at all: its count
 * is the estimate (never below the rows seen), and the exact count up to EXACT_COUNT_LIMIT, ~15%
 * of PostgreSQL's work for a page, would be thrown away. Ten times the bound, so that an estimate
 * off by as much as the bench's worst (5%, docs/decisions.md) never skips a count that would
 * have been exact.
 */
export const ESTIMATE_ONLY_ABOVE = 10 * EXACT_COUNT_LIMIT;

/**
 * Whether a page statement must count its matching rows (up to EXACT_COUNT_LIMIT + 1): not when
 * the planner's estimate, kept from an earlier request, is above ESTIMATE_ONLY_ABOVE.
 */
export function countNeeded(
	from: string,
	where: string,
	bind: unknown[],
	now = Date.now()
): boolean {
	const kept = estimates.get(estimateKey(from, where, bind));
	return (
		kept === undefined || now - kept.at > ESTIMATE_KEPT_MS || kept.rows <= ESTIMATE_ONLY_ABOVE
	);
}

/**
 * The planner's estimates are kept this long: they come from statistics, which change only when
 * the table is analyzed, and asking costs an EXPLAIN (planning and a round trip) per list request
 * once the statement itself has become an index read of a page.
 */
const ESTIMATE_KEPT_MS = 10000;
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const ESTIMATES_KEPT = 1000;
const estimates = new Map<string, { rows: number; at: number }>();

/** Drops the kept estimates: the next of each is asked for (tests that change statistics). */
export function forgetEstimates(): void {
	estimates.clear();
}

/** Counts the rows matching `where` up to EXACT_COUNT_LIMIT + 1. */
export async function cappedCount(
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
	return Number(n);
}

/** Counts the rows matching `where`: exact up to EXACT_COUNT_LIMIT, the estimate beyond. */
export async function countRows(
	db: Sequelize,
	from: string,
	where: string,
	bind: unknown[]
): Promise<number> {
	const exact = await cappedCount(db, from, where, bind);
	return exact <= EXACT_COUNT_LIMIT ? exact : estimateRows(db, from, where, bind, exact);
}

/** Runs the lookups of the filters given (see ListFilter): the values each answered. */
export async function runLookups(
	db: Sequelize,
	source: ListSource,
	query: Record<string, unknown>
): Promise<Record<string, unknown[]>> {
	const looked: Record<string, unknown[]> = {};
	await Promise.all(
		Object.entries(source.filters).map(async ([field, filter]) => {
			if (filter.lookup === undefined) return;
			const values = filterValues(query, field, filter);
			if (values.length === 0) return;
			const rows = await selectPrepared<{ id: unknown }>(db, filter.lookup, [values]);
			looked[field] = rows.map(row => row.id);
		})
	);
	return looked;
}

/** The request's filters, order and page, its lookups run. */
export async function parseList(
	db: Sequelize,
	source: ListSource,
	req: ListRequest
): Promise<ParsedList> {
	return parseListQuery(req.query, source, req.now, await runLookups(db, source, req.query));
}

/**
 * Whether a next page exists and the list's count, from what a page statement answered: the rows
 * it returned (up to one past the page) and its capped count (null when it did not count: the
 * count is then the estimate).
 */
export async function pageCount(
	db: Sequelize,
	source: ListSource,
	p: ParsedList,
	returned: number,
	capped: number | null
): Promise<{ hasMore: boolean; count: number }> {
	const hasMore = returned > p.limit;
	const onPage = hasMore ? p.limit : returned;
	// A page that is not full tells the count exactly, whatever its size; an empty page past the
	// end tells nothing.
	const seen = onPage > 0 ? p.offset + onPage + (hasMore ? 1 : 0) : 0;
	if (!hasMore && (onPage > 0 || p.offset === 0)) return { hasMore, count: seen };
	const count =
		capped !== null && capped <= EXACT_COUNT_LIMIT
			? capped
			: await estimateRows(db, source.from, p.where, p.bind, Math.max(capped ?? 0, seen));
	return { hasMore, count };
}

/**
 * Answers a list request: one page of rows (one more fetched to learn whether a next page
 * exists) and the count, in one statement; a second runs only for a page past the end or a
 * count beyond EXACT_COUNT_LIMIT (an EXPLAIN, which reads no rows). A filter with a lookup
 * costs one small statement before them.
 */
export async function runList<Row, Out>(
	db: Sequelize,
	source: ListSource,
	req: ListRequest,
	serialize: (rows: Row[]) => Out[] | Promise<Out[]>
): Promise<Envelope<Out>> {
	const p = await parseList(db, source, req);
	const rows = await selectPrepared<Row & { __total?: string }>(db, pageSql(source, p), p.bind);
	const { hasMore, count } = await pageCount(
		db,
		source,
		p,
		rows.length,
		rows.length > 0
			? Number(rows[0].__total)
			: await cappedCount(db, source.from, p.where, p.bind)
	);
	if (hasMore) rows.pop();
	for (const row of rows) delete row.__total;
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
