/**
 * Paths of names in a folder, as `join(...folder, name)` answers them (`path.join` or
 * `path.posix.join`), by concatenation onto the folder's joined form (worked out once) for a
 * plain name: one entry of a directory, not empty, not "." or "..", without "/" or NUL. Any
 * other name is joined.
 *
 * Why: `path.join` normalizes the whole string again, character by character, for every file.
 * In a burst of 10,000 files the ingest's joins (each file's place in the watched directory, its
 * dated path in its workspace and its target there) allocated ~3.4 KB per file, a sixth of what
 * the service allocated in the burst (a sampling heap profile of `npm run bench:ingest`'s B).
 */
export class Folder {
	/** the folder joined, ending in "/" unless it is "" (the current directory) */
	readonly prefix: string;
	private readonly parts: string[];

	constructor(
		private readonly join: (...parts: string[]) => string,
		...folder: string[]
	) {
		this.parts = folder;
		// joined with a plain last entry, which is then cut off
		this.prefix = join(...folder, "x").slice(0, -1);
	}

	path(name: string): string {
		return isPlainName(name) ? this.prefix + name : this.join(...this.parts, name);
	}
}

export function isPlainName(name: string): boolean {
	return (
		name !== "" && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0")
	);
}
