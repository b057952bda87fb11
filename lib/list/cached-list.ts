import type { Sequelize } from "sequelize";
import { selectPrepared, selectPreparedIsoTimes } from "../db/run";
import { body, memberOpen, put, writeEnvelope, envelopeHead, type Members } from "./envelope";
import { recordCache, type CachedRecord, type RecordCache, type Scope } from "./record-cache";
import { filterValues, parseListQuery, type ParsedList } from "./params";
import { countNeeded, pageCount, pageItemsSql, type ListRequest } from "./run";
import type { ListSource } from "./types";
import {
	embeddedGuess,
	embeddedKeys,
	embeddedVersionsSql,
	type Embedded,
	type EmbeddedVersions,
	type Guess,
	type KeyVersion
} from "./embedded";
import {
	generationsSql,
	versionOf,
	versionSelect,
	type RecordSource,
	type RecordSpec
} from "./record-spec";

/**
 * Lists answered from cached records (lib/list/record-cache.ts): the page statement reads each
 * row's key and version only; the records whose version is unchanged come from the cache, the
 * others are read whole, serialized and kept. The answer is the envelope's JSON, UTF-8.
 */

/**
 * The page statement of a list of kept records: one row with the page's keys and versions in
 * order (`__page`, a JSON array of [key, version]), the capped count and the generations; with
 * `embedded`, also the versions of the embedded records whose keys its last parameter (int[])
 * gives (`__embedded`, `__embedded_generation`: see embeddedVersionsSql).
 */
export function cachedPageSql(
	source: ListSource,
	spec: RecordSpec<never>,
	p: ParsedList,
	counted = true,
	embedded?: Embedded
): string {
	if (!source.key) throw new Error("a list of kept records needs its source's key");
	const extra = `${generationsSql(spec)} AS __generation`;
	return pageItemsSql(
		{ ...source, key: source.key },
		p,
		`json_build_array(${source.key}, ${spec.version})`,
		spec.versionJoins,
		embedded === undefined
			? extra
			: `${extra}, ${embeddedVersionsSql(embedded, `$${p.bind.length + 1}::int[]`)}`,
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
	embedded?: Embedded
): Promise<Buffer> {
	const first = await parseKeptList(db, source, spec, req, false);
	let p = first.p;
	let guessKey = "";
	let guess: Guess | undefined;
	const pageOf = (list: ParsedList) => {
		const text = cachedPageSql(
			source,
			spec,
			list,
			countNeeded(source.from, list.where, list.bind),
			embedded
		);
		let bind = list.bind;
		if (embedded !== undefined) {
			guessKey = `${scopeOf(db)}\u0000${text}\u0000${JSON.stringify(list.bind)}`;
			guess = embeddedGuess(guessKey);
			bind = [...list.bind, guess.literal];
		}
		return selectPrepared<
			{
				__page: [number, string][] | null;
				__total: string | null;
				__generation: string;
			} & EmbeddedVersions
		>(db, text, bind);
	};
	let [page] = await pageOf(p);
	if (first.kept.some(k => k.generation !== page.__generation)) {
		// a kept lookup is older than a change of its table: looked up again, the page read again
		({ p } = await parseKeptList(db, source, spec, req, true));
		[page] = await pageOf(p);
	}
	const items = page.__page ?? [];
	const capped = page.__total === null ? null : Number(page.__total);
	const { hasMore, count } = await pageCount(db, source, p, items.length, capped);
	if (hasMore) items.pop();
	const head = Buffer.from(envelopeHead(req, p, count, hasMore));
	const kept = keptAnswer(
		db,
		spec,
		items,
		page.__generation,
		head,
		apiRoot,
		embedded && { embedded, read: page, guess: guess! }
	);
	if (kept !== null) return kept;
	const keys = items.map(([key, version]) => ({
		__key: key,
		__version: versionOf({ __version: version, __generation: page.__generation })
	}));
	if (embedded === undefined) {
		return withRecordsOf(db, [wanted(db, spec, source, keys, apiRoot)], apiRoot, ([found]) =>
			body(head, keys, found)
		);
	}
	// The page's records first (read where missing): their refs name what they embed.
	const refs = await withRecordsOf(
		db,
		[wanted(db, spec, source, keys, apiRoot)],
		apiRoot,
		([found]) =>
			keys.map(({ __key }) => (found.has(__key) ? (found.get(__key)!.refs ?? []) : null))
	);
	const present = keys.filter((_, i) => refs[i] !== null);
	const { inner, keys: innerKeys } = await embeddedKeys(
		db,
		embedded,
		page,
		guessKey,
		guess!,
		refs
	);
	// Then all of them at once, in one stretch without a wait, written into the answer.
	return withRecordsOf(
		db,
		[
			wanted(db, spec, source, present, apiRoot),
			wanted(db, embedded.spec, embedded.source, innerKeys, apiRoot)
		],
		apiRoot,
		([found, innerFound]) =>
			body(head, present, found, {
				open: memberOpen(embedded),
				inner,
				found: innerFound
			})
	);
}

/**
 * The answer when every record of the page, and every record they embed, is kept and current:
 * one synchronous pass over the page's items that makes no key objects, maps or sets (the
 * general path makes them at every request, and collecting them was a tenth of the service's
 * time on the lists with embedded records). Null when a record is missing or stale, or the
 * page's records name embedded records other than those whose versions the page statement read
 * (`read`, the guess): the general path then reads what is missing and keeps the guess anew.
 */
function keptAnswer(
	db: Sequelize,
	spec: RecordSpec<never>,
	items: [number, string][],
	generation: string,
	head: Buffer,
	apiRoot: string | undefined,
	inner?: { embedded: Embedded; read: EmbeddedVersions; guess: Guess }
): Buffer | null {
	const scope = recordCache.scope(scopeName(db, spec, apiRoot));
	const records: CachedRecord[] = new Array(items.length);
	for (let i = 0; i < items.length; i++) {
		const record = recordCache.getParts(scope, items[i][0], items[i][1], generation);
		if (record === undefined) return null;
		records[i] = record;
	}
	const members = inner && keptMembers(db, inner, records, apiRoot);
	if (members === null) return null;
	return writeEnvelope(
		head,
		records.map(r => r.json),
		members
	);
}

/**
 * For keptAnswer: the JSON of the records each of the page's `records` embeds, kept and current
 * at the versions the page statement read; null when one is not (see keptAnswer).
 */
function keptMembers(
	db: Sequelize,
	{ embedded, read, guess }: { embedded: Embedded; read: EmbeddedVersions; guess: Guess },
	records: CachedRecord[],
	apiRoot: string | undefined
): Members | null {
	const scope = recordCache.scope(scopeName(db, embedded.spec, apiRoot));
	const versions = read.__embedded ?? [];
	const at = new Map<number, number>();
	for (let i = 0; i < versions.length; i++) at.set(versions[i][0], i);
	const found: CachedRecord[] = new Array(versions.length);
	let named = 0;
	const inner = records.map(record =>
		(record.refs ?? []).map(id => {
			const i = at.get(id);
			if (i === undefined) return null;
			if (found[i] === undefined) {
				const kept = recordCache.getParts(
					scope,
					id,
					versions[i][1],
					read.__embedded_generation
				);
				if (kept === undefined) return null;
				found[i] = kept;
				named++;
			}
			return found[i].json;
		})
	);
	if (inner.some(list => list.includes(null))) return null;
	// a guess with records the page no longer names is kept anew by the general path
	if (named !== guess.ids.length) return null;
	return { open: memberOpen(embedded), inner: inner as Buffer[][] };
}

/**
 * The lookups of filters on a referenced record's column (ListFilter.lookup) answered before, by
 * database, tables of the generations, filter and values, with the generations of the record's
 * tables they were read at (in the lookup's own statement). A list of kept records uses them
 * instead of asking again when its record's generations include the lookup's table, and checks
 * them against the generations its page statement reads: a job type created or renamed since
 * shows at the next request.
 */
const lookups = new Map<string, { ids: unknown[]; generation: string }>();
const LOOKUPS_KEPT = 1000;

/**
 * The request's filters, order and page (see parseList), its lookups kept or run (`fresh`: run,
 * whatever is kept); answers the kept lookups it used, to be checked against the page.
 */
async function parseKeptList(
	db: Sequelize,
	source: ListSource,
	spec: RecordSpec<unknown>,
	req: ListRequest,
	fresh: boolean
): Promise<{ p: ParsedList; kept: { generation: string }[] }> {
	const looked: Record<string, unknown[]> = {};
	const kept: { generation: string }[] = [];
	for (const [field, filter] of Object.entries(source.filters)) {
		if (filter.lookup === undefined) continue;
		const values = filterValues(req.query, field, filter);
		if (values.length === 0) continue;
		const keepable =
			filter.lookupTable !== undefined &&
			(spec.generations ?? []).includes(filter.lookupTable);
		// keyed by the generations it is checked against too: another list's record may read
		// other tables' generations, whose text could be the same
		const tables = spec.generations?.join(".");
		const key = `${scopeOf(db)}\u0000${tables}\u0000${filter.lookup}\u0000${JSON.stringify(values)}`;
		const found = keepable && !fresh ? lookups.get(key) : undefined;
		if (found !== undefined) {
			looked[field] = found.ids;
			kept.push(found);
			continue;
		}
		const [row] = await selectPrepared<{ ids: unknown[]; generation: string }>(
			db,
			`SELECT ARRAY(${filter.lookup}) AS ids, ${generationsSql(spec)} AS generation`,
			[values]
		);
		looked[field] = row.ids;
		if (keepable) {
			if (lookups.size >= LOOKUPS_KEPT) lookups.clear();
			lookups.set(key, { ids: row.ids, generation: row.generation });
		}
	}
	return { p: parseListQuery(req.query, source, req.now, looked), kept };
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
	keys: KeyVersion[],
	apiRoot: string | undefined,
	cache: RecordCache = recordCache
): Promise<Map<number, CachedRecord>> {
	return withRecordsOf(
		db,
		[wanted(db, spec, source, keys, apiRoot, cache)],
		apiRoot,
		([found]) => copied(found),
		cache
	);
}

/**
 * What `use` makes of the records of the rows by key (found as recordsOf finds them), called in
 * one synchronous stretch with records whose JSON may be views into the cache's slabs: valid
 * during the call only. For an answer written straight from the cache, in one copy.
 */
export function withRecords<Row, T>(
	db: Sequelize,
	source: RecordSource,
	spec: RecordSpec<Row>,
	keys: KeyVersion[],
	apiRoot: string | undefined,
	use: (found: Map<number, CachedRecord>) => T
): Promise<T> {
	return withRecordsOf(db, [wanted(db, spec, source, keys, apiRoot)], apiRoot, ([found]) =>
		use(found)
	);
}

/** Records of one kind a request wants, with what the request has read of them so far. */
interface Wanted {
	source: RecordSource;
	spec: RecordSpec<any>;
	keys: KeyVersion[];
	scope: Scope;
	/** copies of the records this request read (they may be forgotten by the cache meanwhile) */
	made: Map<number, CachedRecord>;
	/** keys whose rows were not found */
	gone: Set<number>;
}

function wanted<Row>(
	db: Sequelize,
	spec: RecordSpec<Row>,
	source: RecordSource,
	keys: KeyVersion[],
	apiRoot: string | undefined,
	cache: RecordCache = recordCache
): Wanted {
	const scope = cache.scope(scopeName(db, spec, apiRoot));
	return { source, spec, keys, scope, made: new Map(), gone: new Set() };
}

/** The cache's scope of a kind of record, per database (and API root where it shows it). */
function scopeName(
	db: Sequelize,
	spec: Pick<RecordSpec<never>, "name" | "byApiRoot">,
	apiRoot: string | undefined
): string {
	return `${scopeOf(db)}:${spec.name}:${spec.byApiRoot ? (apiRoot ?? "") : ""}`;
}

/**
 * What `use` makes of the records wanted (see recordsOf), called with records whose JSON may be
 * views into the cache's slabs: valid during the call only, since nothing waits in between.
 */
async function withRecordsOf<T>(
	db: Sequelize,
	wants: Wanted[],
	apiRoot: string | undefined,
	use: (found: Map<number, CachedRecord>[]) => T,
	cache: RecordCache = recordCache
): Promise<T> {
	for (;;) {
		// From here to `use` nothing waits, so no slab is reused in between.
		const founds: Map<number, CachedRecord>[] = [];
		const reads: Promise<void>[] = [];
		for (const want of wants) {
			const found = new Map<number, CachedRecord>();
			const missing: number[] = [];
			for (const { __key: key, __version: version } of want.keys) {
				if (want.gone.has(key)) continue;
				const record = want.made.get(key) ?? cache.get(want.scope, key, version);
				if (record === undefined) missing.push(key);
				else found.set(key, record);
			}
			founds.push(found);
			if (missing.length > 0) reads.push(readRecords(db, want, missing, apiRoot, cache));
		}
		if (reads.length === 0) return use(founds);
		// A record found before this wait and forgotten during it is read again next time round.
		await Promise.all(reads);
	}
}

/** Reads the records of `missing` whole, keeps them, and keeps a copy for the request. */
async function readRecords(
	db: Sequelize,
	want: Wanted,
	missing: number[],
	apiRoot: string | undefined,
	cache: RecordCache
): Promise<void> {
	const { source, spec, scope, made, gone } = want;
	const rows = await selectPreparedIsoTimes<{
		__key: number;
		__version: string;
		__generation: string;
	}>(
		db,
		`SELECT ${source.columns}, ${source.key} AS __key, ${versionSelect(spec)}
		 FROM ${source.from} ${source.joins ?? ""} WHERE ${source.key} = ANY($1::int[])`,
		[missing]
	);
	for (const key of missing) gone.add(key);
	for (const row of rows) {
		const { __key: key } = row;
		const version = versionOf(row);
		gone.delete(key);
		const kept = cache.set(scope, key, version, spec.record(row, apiRoot), spec.refs?.(row));
		// a copy: another wait may come before the page's copy (a record forgotten meanwhile)
		made.set(key, { ...kept, json: Buffer.from(kept.json) });
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
		const end = put(buffer, offset, record.json);
		copies.set(key, { ...record, json: buffer.subarray(offset, end) });
		offset = end;
	}
	return copies;
}
