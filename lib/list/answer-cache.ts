import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";

/**
 * Whole answers (JSON, UTF-8) of requests that read only tables with a generation (migrations
 * 0011 and 0012: raised by any statement that changes the table, in its transaction), kept with
 * the generations they were made at. A request reads the generations (one prepared statement)
 * and is answered from here only when they are unchanged: nothing it read has changed since.
 * The least recently used answers are forgotten past `maxBytes`.
 */
export class AnswerCache {
	private readonly entries = new Map<string, { version: string; json: Buffer }>();
	private bytes = 0;

	constructor(private readonly maxBytes: number) {}

	/** The answer kept under `key` when it was made at `version`, else undefined. */
	get(key: string, version: string): Buffer | undefined {
		const entry = this.entries.get(key);
		if (entry === undefined || entry.version !== version) return undefined;
		// most recently used last: the Map keeps insertion order
		this.entries.delete(key);
		this.entries.set(key, entry);
		return entry.json;
	}

	/** Keeps `json` under `key` for `version` (not an answer larger than a quarter of the room). */
	set(key: string, version: string, json: Buffer): void {
		this.forget(key);
		if (json.length > this.maxBytes / 4) return;
		this.entries.set(key, { version, json });
		this.bytes += json.length;
		for (const oldest of this.entries.keys()) {
			if (this.bytes <= this.maxBytes) break;
			this.forget(oldest);
		}
	}

	get size(): number {
		return this.entries.size;
	}

	private forget(key: string): void {
		const entry = this.entries.get(key);
		if (entry === undefined) return;
		this.bytes -= entry.json.length;
		this.entries.delete(key);
	}
}

/**
 * SQL of the generations of the tables named (`$n`, a text array), as one text that changes
 * whenever any of them does: a sub-select, for a statement that reads more beside it.
 */
export const generationsSql = (param: string) =>
	`(SELECT string_agg(name || ':' || generation, '.' ORDER BY name) FROM list_generation
		WHERE name = ANY(${param}::text[]))`;

/** The generations of the tables named, as one text that changes whenever any of them does. */
export async function generationsOf(db: Sequelize, tables: string[]): Promise<string> {
	const [row] = await selectPrepared<{ version: string | null }>(
		db,
		`SELECT ${generationsSql("$1")} AS version`,
		[tables]
	);
	return row.version ?? "";
}
