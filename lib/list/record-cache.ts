/**
 * Records of the lists as UTF-8 JSON, each kept with the version of the rows it was made from
 * (their `xmin`s: PostgreSQL gives a row a new one at every UPDATE). A list reads each page's
 * keys and versions, takes the records whose version is unchanged from here, and reads and
 * serializes only the others: a page costs PostgreSQL an index read instead of forty columns per
 * record, and the service a lookup instead of parsing and serializing them (docs/decisions.md,
 * "Lists"). Nothing is ever answered from here without the database's word that it is current.
 * Records are Buffers, each its own allocation outside the JavaScript heap: a page is sent as
 * one Buffer.concat of them, where joining strings and encoding the result cost ten times more.
 *
 * The least recently used records go first once their bytes pass `maxBytes`.
 */
export interface CachedRecord {
	version: string;
	/** the record's JSON, UTF-8 */
	json: Buffer;
	/** ids of the records this one embeds and that are read apart (a job's input files) */
	refs?: number[];
}

export class RecordCache {
	private readonly entries = new Map<string, CachedRecord>();
	private bytes = 0;

	constructor(private readonly maxBytes: number) {}

	/** The record kept under `key` when it was made from `version`, else undefined. */
	get(key: string, version: string): CachedRecord | undefined {
		const entry = this.entries.get(key);
		if (entry === undefined || entry.version !== version) return undefined;
		// a Map iterates in insertion order: inserted again, the entry is the newest
		this.entries.delete(key);
		this.entries.set(key, entry);
		return entry;
	}

	set(key: string, entry: CachedRecord): void {
		const old = this.entries.get(key);
		if (old !== undefined) {
			this.bytes -= old.json.length;
			this.entries.delete(key);
		}
		if (entry.json.length > this.maxBytes) return;
		this.entries.set(key, entry);
		this.bytes += entry.json.length;
		for (const [oldest, value] of this.entries) {
			if (this.bytes <= this.maxBytes) break;
			this.entries.delete(oldest);
			this.bytes -= value.json.length;
		}
	}

	get size(): number {
		return this.entries.size;
	}

	/** the bytes of JSON held */
	get length(): number {
		return this.bytes;
	}

	clear(): void {
		this.entries.clear();
		this.bytes = 0;
	}
}

/** The records' size limit: LIST_CACHE_MB (MiB of JSON, default 48; 0 turns it off). */
export function recordCacheBytes(env: NodeJS.ProcessEnv = process.env): number {
	const text = env.LIST_CACHE_MB;
	const mb = text === undefined || text === "" ? 48 : Number(text);
	if (!Number.isFinite(mb) || mb < 0)
		throw new Error(`LIST_CACHE_MB must be a number of MiB, 0 or more (got "${text}")`);
	return Math.floor(mb * 1024 * 1024);
}

/** The process's one cache of list records, shared by every list service it runs. */
export const recordCache = new RecordCache(recordCacheBytes());

/** `value` as JSON in a Buffer of its own (not a slice of Node's shared pool, which a kept record would pin). */
export function jsonBuffer(value: unknown): Buffer {
	const text = JSON.stringify(value);
	const buffer = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
	buffer.write(text);
	return buffer;
}
