import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/connection";
import { envelopeHead } from "./envelope";
import { recordCache, type CachedRecord, type RecordCache } from "./record-cache";
import type { ParsedList } from "./params";
import {
	countNeeded,
	pageCount,
	pageItemsSql,
	parseList,
	type ListRequest,
	type ListSource
} from "./run";

/**
 * Lists answered from cached records (lib/list/record-cache.ts): the page statement reads each
 * row's key and version only; the records whose version is unchanged come from the cache, the
 * others are read whole, serialized and kept. The answer is the envelope's JSON, UTF-8.
 */

/** How a list's records are made and when they are current. */
export interface RecordSpec<Row> {
	/** names this kind of record in the cache (a list and its updates view differ) */
	name: string;
	/**
	 * SQL text over the list's `from` and `versionJoins` that changes whenever anything the
	 * record shows changes: the `xmin` of each row it shows columns of, or the columns themselves
	 * where a row changes often for other reasons (a node's heartbeat).
	 */
	version: string;
	/** the joins `version` reads */
	versionJoins: string;
	/**
	 * The small tables whose rows the record embeds, by their generation (migration 0011: raised
	 * by any change to the table) rather than their rows' `xmin`s, read once per statement
	 */
	generations?: ("job_type" | "error" | "workspace")[];
	/** whether a record depends on the call's API root (download URLs) */
	byApiRoot?: boolean;
	/** the record of a row read with the list's columns */
	record(row: Row, apiRoot: string | undefined): unknown;
	/** ids of the records it embeds that are read apart, kept with it (a job's input files) */
	refs?(row: Row): number[];
}

/**
 * Adds to each record what is read apart from it, for the whole page at once: for each record,
 * the parts of the JSON members appended to it (`"input_files":[`, each file, `]`).
 */
export type Attach = (keys: number[], records: CachedRecord[]) => Promise<Buffer[][]>;

const COMMA = Buffer.from(",");
const CLOSE = Buffer.from("}");
const END = Buffer.from("]}");

/** `items` with `separator` between them, each Buffer once: the parts of a JSON array's body. */
export function joined(items: Buffer[], separator: Buffer = COMMA): Buffer[] {
	const parts: Buffer[] = [];
	items.forEach((item, i) => {
		if (i > 0) parts.push(separator);
		parts.push(item);
	});
	return parts;
}

/** The SQL of a record's generations part (see versionOf). */
export function generationsSql(spec: Pick<RecordSpec<unknown>, "generations">): string {
	const names = spec.generations ?? [];
	return names.length === 0
		? "''"
		: `(SELECT string_agg(generation::text, '.' ORDER BY name) FROM list_generation
				WHERE name IN (${names.map(n => `'${n}'`).join(", ")}))`;
}

/** The SELECT items of a record's version (see versionOf): its rows' part and its generations. */
export function versionSelect(spec: Pick<RecordSpec<unknown>, "version" | "generations">): string {
	return `${spec.version} AS __version, ${generationsSql(spec)} AS __generation`;
}

/** A record's version from a row read with versionSelect's items. */
export function versionOf(row: { __version: string; __generation: string }): string {
	return `${row.__version}|${row.__generation}`;
}

/** Where a kind of record is read whole: a list's table, joins, key and columns. */
export type RecordSource = Pick<ListSource, "from" | "joins" | "key" | "columns">;

/**
 * The page statement of a list of kept records: one row with the page's keys and versions in
 * order (`__page`, a JSON array of [key, version]), the capped count and the generations.
 */
export function cachedPageSql(
	source: ListSource,
	spec: RecordSpec<never>,
	p: ParsedList,
	counted = true
): string {
	if (!source.key) throw new Error("a list of kept records needs its source's key");
	return pageItemsSql(
		{ ...source, key: source.key },
		p,
		`json_build_array(${source.key}, ${spec.version})`,
		spec.versionJoins,
		`${generationsSql(spec)} AS __generation`,
		counted
	);
}

/** The list envelope for the request as JSON, UTF-8. */
export async function runCachedList<Row>(
	db: Sequelize,
	source: ListSource,
	spec: RecordSpec<Row>,
	req: ListRequest,
	apiRoot: string | undefined,
	attach?: Attach
): Promise<Buffer> {
	const p = await parseList(db, source, req);
	const [page] = await selectPrepared<{
		__page: [number, string][] | null;
		__total: string | null;
		__generation: string;
	}>(db, cachedPageSql(source, spec, p, countNeeded(source.from, p.where, p.bind)), p.bind);
	const items = page.__page ?? [];
	const capped = page.__total === null ? null : Number(page.__total);
	const { hasMore, count } = await pageCount(db, source, p, items.length, capped);
	if (hasMore) items.pop();
	const keys = items.map(([key, version]) => ({
		__key: key,
		__version: versionOf({ __version: version, __generation: page.__generation })
	}));
	const head = Buffer.from(envelopeHead(req, p, count, hasMore));
	if (attach === undefined)
		return withRecords(db, source, spec, keys, apiRoot, found => body(head, keys, found));
	const found = await recordsOf(db, source, spec, keys, apiRoot);
	const present = keys.map(k => k.__key).filter(key => found.has(key));
	const records = present.map(key => found.get(key)!);
	const members = records.length > 0 ? await attach(present, records) : [];
	const parts: Buffer[] = [head];
	records.forEach((record, i) => {
		if (i > 0) parts.push(COMMA);
		parts.push(record.json.subarray(0, -1), COMMA, ...members[i], CLOSE);
	});
	parts.push(END);
	return Buffer.concat(parts);
}

/** The envelope's JSON: its head, the records of the keys found in order, its end; one copy. */
function body(head: Buffer, keys: { __key: number }[], found: Map<number, CachedRecord>): Buffer {
	let length = head.length + END.length;
	for (const { __key } of keys) {
		const record = found.get(__key);
		if (record !== undefined) length += record.json.length + 1;
	}
	const out = Buffer.allocUnsafe(length);
	let offset = head.copy(out, 0);
	let first = true;
	for (const { __key } of keys) {
		const record = found.get(__key);
		if (record === undefined) continue;
		if (!first) out[offset++] = COMMA[0];
		first = false;
		offset += record.json.copy(out, offset);
	}
	offset += END.copy(out, offset);
	return out.subarray(0, offset);
}

/**
 * Each database connection's records apart: versions are a database's own, and a process may
 * hold connections to several (tests do).
 */
const scopes = new WeakMap<Sequelize, number>();
let nextScope = 0;
function scopeOf(db: Sequelize): number {
	let scope = scopes.get(db);
	if (scope === undefined) scopes.set(db, (scope = nextScope++));
	return scope;
}

/**
 * The records of the rows by key: cached where the version matches, the others read whole (with
 * their version, read in the same statement as their columns) and kept. A row gone between the
 * two statements is absent. The records answered are copies, in one Buffer: the cache's slabs
 * are reused while a response is being put together.
 */
export function recordsOf<Row>(
	db: Sequelize,
	source: RecordSource,
	spec: RecordSpec<Row>,
	keys: { __key: number; __version: string }[],
	apiRoot: string | undefined,
	cache: RecordCache = recordCache
): Promise<Map<number, CachedRecord>> {
	return withRecords(db, source, spec, keys, apiRoot, copied, cache);
}

/**
 * What `use` makes of the records of the rows by key (see recordsOf), called with records whose
 * JSON may be views into the cache's slabs: valid during the call only, since nothing waits.
 */
async function withRecords<Row, T>(
	db: Sequelize,
	source: RecordSource,
	spec: RecordSpec<Row>,
	keys: { __key: number; __version: string }[],
	apiRoot: string | undefined,
	use: (found: Map<number, CachedRecord>) => T,
	cache: RecordCache = recordCache
): Promise<T> {
	const scope = cache.scope(
		`${scopeOf(db)}:${spec.name}:${spec.byApiRoot ? (apiRoot ?? "") : ""}`
	);
	const made = new Map<number, CachedRecord>();
	const gone = new Set<number>();
	for (;;) {
		// From here to `use` nothing waits, so no slab is reused in between.
		const found = new Map<number, CachedRecord>();
		const missing: number[] = [];
		for (const { __key: key, __version: version } of keys) {
			if (gone.has(key)) continue;
			const record = made.get(key) ?? cache.get(scope, key, version);
			if (record === undefined) missing.push(key);
			else found.set(key, record);
		}
		if (missing.length === 0) return use(found);
		// A record found before this wait and forgotten during it is read again next time round.
		const rows = await selectPrepared<
			Row & { __key: number; __version: string; __generation: string }
		>(
			db,
			`SELECT ${source.columns}, ${source.key} AS __key, ${versionSelect(spec)}
			 FROM ${source.from} ${source.joins ?? ""} WHERE ${source.key} = ANY($1::int[])`,
			[missing]
		);
		for (const key of missing) gone.add(key);
		for (const row of rows) {
			const { __key: key } = row;
			const version = versionOf(row);
			delete (row as { __key?: number }).__key;
			delete (row as { __version?: string }).__version;
			delete (row as { __generation?: string }).__generation;
			gone.delete(key);
			const kept = cache.set(
				scope,
				key,
				version,
				spec.record(row, apiRoot),
				spec.refs?.(row)
			);
			// a copy: another wait may come before the page's copy (a record forgotten meanwhile)
			made.set(key, { ...kept, json: Buffer.from(kept.json) });
		}
	}
}

/** The records with their JSON copied out of the cache, into one Buffer. */
function copied(records: Map<number, CachedRecord>): Map<number, CachedRecord> {
	let length = 0;
	for (const record of records.values()) length += record.json.length;
	const buffer = Buffer.allocUnsafe(length);
	let offset = 0;
	const copies = new Map<number, CachedRecord>();
	for (const [key, record] of records) {
		const end = offset + record.json.copy(buffer, offset);
		copies.set(key, { ...record, json: buffer.subarray(offset, end) });
		offset = end;
	}
	return copies;
}
