import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { generationsSql, versionOf, type RecordSource, type RecordSpec } from "./record-spec";

/**
 * Records embedded in each record of a list that are records of their own (a job update's input
 * files, a product update's source files): named by the refs kept with each record, kept apart,
 * current by their own versions, and written into each record's JSON as its last member.
 */
export interface Embedded {
	/** the member's name, e.g. "input_files" */
	member: string;
	source: RecordSource & { key: string };
	spec: RecordSpec<any>;
}

/** A kept record's key and version (see versionOf). */
export interface KeyVersion {
	__key: number;
	__version: string;
}

/**
 * SELECT items of the versions of the embedded records whose keys `keys` (an SQL int[]) gives:
 * `__embedded`, a JSON array of [key, version] (null when none exists), and
 * `__embedded_generation`.
 */
export function embeddedVersionsSql({ source, spec }: Embedded, keys: string): string {
	return `(SELECT json_agg(json_build_array(${source.key}, ${spec.version}))
			FROM ${source.from} ${spec.versionJoins} WHERE ${source.key} = ANY(${keys})) AS __embedded,
		${generationsSql(spec)} AS __embedded_generation`;
}

export interface EmbeddedVersions {
	__embedded: [number, string][] | null;
	__embedded_generation: string;
}

/** The keys and versions of the embedded records `keys` names that exist, in one statement. */
async function embeddedVersions(
	db: Sequelize,
	embedded: Embedded,
	keys: number[]
): Promise<KeyVersion[]> {
	const [row] = await selectPrepared<EmbeddedVersions>(
		db,
		`SELECT ${embeddedVersionsSql(embedded, "$1::int[]")}`,
		[keys]
	);
	return keysOf(row);
}

function keysOf(row: EmbeddedVersions): KeyVersion[] {
	return (row.__embedded ?? []).map(([key, version]) => ({
		__key: key,
		__version: versionOf({ __version: version, __generation: row.__embedded_generation })
	}));
}

/**
 * The embedded records a page's records named when the same page statement (text and binds,
 * per database: the caller's key) was last answered: read with the page, so a page asked again,
 * unchanged, costs one statement; those a page names beyond them are read in a second.
 */
const guesses = new Map<string, Guess>();
const GUESSES_KEPT = 1000;

/** The ids to read with a page statement, and the same as an SQL array's text (its bind). */
export interface Guess {
	ids: number[];
	literal: string;
}

const NO_GUESS: Guess = { ids: [], literal: "{}" };

/** The ids to read with the page statement `key` names (see guesses). */
export function embeddedGuess(key: string): Guess {
	return guesses.get(key) ?? NO_GUESS;
}

/**
 * For each of a page's records that exist (their refs, in order; null for those gone), the keys
 * and versions of the records it embeds that exist, in order, and all of those: the versions of
 * the ids `guess` were read with the page (`read`), the others are read now. The page's ids are
 * kept as the guess of the next time.
 */
export async function embeddedKeys(
	db: Sequelize,
	embedded: Embedded,
	read: EmbeddedVersions,
	guessKey: string,
	guess: Guess,
	refs: (number[] | null)[]
): Promise<{ inner: KeyVersion[][]; keys: KeyVersion[] }> {
	const named = new Set<number>();
	for (const r of refs) if (r !== null) for (const id of r) named.add(id);
	const found = new Map<number, KeyVersion>();
	for (const k of keysOf(read)) found.set(k.__key, k);
	const guessed = new Set(guess.ids);
	const unread = [...named].filter(id => !guessed.has(id));
	if (unread.length > 0)
		for (const k of await embeddedVersions(db, embedded, unread)) found.set(k.__key, k);
	// kept again only when it changed: a page asked again leaves no garbage here
	if (unread.length > 0 || named.size !== guessed.size) {
		if (guesses.size >= GUESSES_KEPT) guesses.clear();
		const ids = [...named];
		guesses.set(guessKey, { ids, literal: `{${ids.join(",")}}` });
	}
	const inner: KeyVersion[][] = [];
	const shown = new Map<number, KeyVersion>();
	for (const r of refs) {
		if (r === null) continue;
		const list: KeyVersion[] = [];
		for (const id of r) {
			const key = found.get(id);
			if (key === undefined) continue;
			list.push(key);
			shown.set(id, key);
		}
		inner.push(list);
	}
	return { inner, keys: [...shown.values()] };
}
