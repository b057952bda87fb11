/**
 * Records of the lists as UTF-8 JSON, each kept with the version of the rows it was made from
 * (their `last_modified`, which every UPDATE changes: migration 0016). A list reads each page's
 * keys and versions, takes the records whose version is unchanged from here, and reads and
 * serializes only the others: a page costs PostgreSQL an index read instead of forty columns per
 * record, and the service a lookup instead of parsing and serializing them (docs/decisions.md,
 * "Lists"). Nothing is ever answered from here without the database's word that it is current.
 *
 * The JSON is written into slabs of 1 MiB allocated once and reused in turn: when the slabs are
 * full, the oldest is emptied (its records forgotten) and filled again. The cache's memory is
 * thus fixed, outside the JavaScript heap, and never fragmented; a page is sent as one
 * Buffer.concat of views into the slabs, where joining strings and encoding the result as UTF-8
 * cost ten times more.
 */
export interface CachedRecord {
	version: string;
	/** the record's JSON, UTF-8 (a view into a slab: valid until the slab is reused) */
	json: Buffer;
	/** ids of the records this one embeds and that are read apart (a job's input files) */
	refs?: number[];
}

interface Entry extends CachedRecord {
	slab: number;
	/** the slab's fill count when written: the record is gone once the slab is filled again */
	fill: number;
}

/** The records of one scope (a kind of record, per database and API root) by key. */
export type Scope = Map<number, Entry>;

export const SLAB_BYTES = 1024 * 1024;

export class RecordCache {
	/** Records by scope, then by key: a page's hundred lookups take numbers, not joined strings. */
	private readonly scopes = new Map<string, Scope>();
	private readonly slabs: Buffer[] = [];
	/** per slab: how many times it has been filled, and the records written into it this time */
	private readonly fills: number[] = [];
	private readonly written: { scope: Scope; key: number }[][] = [];
	private current = -1;
	private offset = 0;
	private readonly slabCount: number;

	constructor(
		maxBytes: number,
		private readonly slabBytes = SLAB_BYTES
	) {
		this.slabCount = Math.floor(maxBytes / slabBytes);
	}

	/** The records of a scope, for get and set. */
	scope(name: string): Scope {
		let scope = this.scopes.get(name);
		if (scope === undefined) this.scopes.set(name, (scope = new Map()));
		return scope;
	}

	/** The record kept under `key` when it was made from `version`, else undefined. */
	get(scope: Scope, key: number, version: string): CachedRecord | undefined {
		const entry = scope.get(key);
		if (entry === undefined || entry.version !== version) return undefined;
		return entry;
	}

	/**
	 * The record kept under `key` when it was made from the version of `row` and `generation`
	 * (`${row}|${generation}`, versionOf in record-spec.ts), else undefined: compared part by
	 * part, so that a page's hundred lookups make no strings.
	 */
	getParts(scope: Scope, key: number, row: string, generation: string): CachedRecord | undefined {
		const entry = scope.get(key);
		if (entry === undefined) return undefined;
		const v = entry.version;
		return v.length === row.length + 1 + generation.length &&
			v.charCodeAt(row.length) === 124 && // "|"
			v.startsWith(row) &&
			v.endsWith(generation)
			? entry
			: undefined;
	}

	/**
	 * Keeps `value`'s JSON under `key` for `version`; answers the record, whether kept or not
	 * (not when the cache has no room at all or the record is larger than a slab).
	 */
	set(scope: Scope, key: number, version: string, value: unknown, refs?: number[]): CachedRecord {
		const text = JSON.stringify(value);
		const length = Buffer.byteLength(text);
		if (this.slabCount === 0 || length > this.slabBytes) {
			scope.delete(key);
			return { version, json: Buffer.from(text), refs };
		}
		if (this.current < 0 || this.offset + length > this.slabBytes) this.nextSlab();
		const slab = this.slabs[this.current];
		slab.write(text, this.offset);
		const entry: Entry = {
			version,
			json: slab.subarray(this.offset, this.offset + length),
			refs,
			slab: this.current,
			fill: this.fills[this.current]
		};
		this.offset += length;
		scope.set(key, entry);
		this.written[this.current].push({ scope, key });
		return entry;
	}

	/** Moves on to the next slab, forgetting the records it held. */
	private nextSlab(): void {
		this.current = (this.current + 1) % this.slabCount;
		this.offset = 0;
		if (this.slabs[this.current] === undefined) {
			this.slabs[this.current] = Buffer.allocUnsafeSlow(this.slabBytes);
			this.fills[this.current] = 0;
			this.written[this.current] = [];
			return;
		}
		const fill = this.fills[this.current];
		for (const { scope, key } of this.written[this.current]) {
			const entry = scope.get(key);
			// a key written again since lives in a later slab
			if (entry !== undefined && entry.slab === this.current && entry.fill === fill)
				scope.delete(key);
		}
		this.written[this.current] = [];
		this.fills[this.current] = fill + 1;
	}

	/** the records kept */
	get size(): number {
		let size = 0;
		for (const scope of this.scopes.values()) size += scope.size;
		return size;
	}

	/** the bytes of the slabs allocated */
	get allocated(): number {
		return this.slabs.length * this.slabBytes;
	}
}

/**
 * The records' size limit: LIST_CACHE_MB (MiB of JSON, default 48; 0 turns it off). 48 holds the
 * P4 bench's largest working set, twenty pages of jobs for each of 21 job types (~37 MiB):
 * with 32 most of its records were read and serialized again at every request.
 */
export function recordCacheBytes(env: NodeJS.ProcessEnv = process.env): number {
	const text = env.LIST_CACHE_MB;
	const mb = text === undefined || text === "" ? 48 : Number(text);
	if (!Number.isFinite(mb) || mb < 0)
		throw new Error(`LIST_CACHE_MB must be a number of MiB, 0 or more (got "${text}")`);
	return Math.floor(mb * 1024 * 1024);
}

/** The process's one cache of list records, shared by every list service it runs. */
export const recordCache = new RecordCache(recordCacheBytes());
