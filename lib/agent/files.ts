import crypto from "crypto";
import fs from "fs";
import path from "path";
import readline from "readline";

/** True when `child` is `parent` or lies under it (both absolute and normalised). */
export function isInside(parent: string, child: string): boolean {
	const rel = path.relative(parent, child);
	return rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}

/**
 * A plain file name: no directory part, not `.` or `..`, no NUL. Staged inputs and products keep
 * their names, which must not climb out of the directory they are put in.
 */
export function isPlainFileName(name: string): boolean {
	return (
		name.length > 0 &&
		name !== "." &&
		name !== ".." &&
		!name.includes("/") &&
		!name.includes("\0")
	);
}

/**
 * Where a path registered by the algorithm (manifest or ARTIFACT line) really is: absolute, or
 * relative to the output directory; symbolic links resolved. Answers the resolved path, or a
 * sentence saying why it is refused: it must exist, be a regular file, and lie inside the task
 * directory (`confineTo`, itself resolved), so an algorithm cannot make the agent copy
 * `/etc/shadow` into a workspace.
 */
export async function resolveConfined(
	given: string,
	outputDir: string,
	confineTo: string
): Promise<{ path: string } | { refused: string }> {
	if (given.includes("\0")) return { refused: `the path "${given}" holds a NUL character` };
	const absolute = path.resolve(outputDir, given);
	const root = await fs.promises.realpath(confineTo);
	if (!isInside(root, absolute) && !isInside(confineTo, absolute))
		return { refused: `the path "${given}" is outside the task directory` };
	let real: string;
	try {
		real = await fs.promises.realpath(absolute);
	} catch {
		return { refused: `the file "${given}" does not exist` };
	}
	if (!isInside(root, real))
		return { refused: `the path "${given}" leads outside the task directory` };
	const stat = await fs.promises.stat(real);
	if (!stat.isFile()) return { refused: `"${given}" is not a regular file` };
	return { path: real };
}

/**
 * Copies `from` to `to` through a temporary name in the same directory and a rename, so a crash
 * never leaves a half-written file under the final name. Makes the directories. Answers the
 * size copied.
 */
export async function copyAtomically(from: string, to: string): Promise<number> {
	await fs.promises.mkdir(path.dirname(to), { recursive: true });
	const temp = path.join(
		path.dirname(to),
		`.${path.basename(to)}.${crypto.randomBytes(6).toString("hex")}.partial`
	);
	try {
		await fs.promises.copyFile(from, temp);
		await fs.promises.rename(temp, to);
	} catch (error) {
		await fs.promises.rm(temp, { force: true }).catch(() => undefined);
		throw error;
	}
	return (await fs.promises.stat(to)).size;
}

/**
 * Files up to this size are read with synchronous calls. The agent's own small files (logs,
 * manifests, on its local work directory) take microseconds to read that way, where each
 * promise-based call costs some 35 µs of CPU in handing the work to libuv's thread pool and
 * back (measured in docs/decisions.md, "Synchronous calls for small files"); larger ones are
 * read asynchronously so that the event loop never waits long.
 */
export const SMALL_FILE = 64 * 1024;

/**
 * The last `cap` bytes of a file as text (all of it when smaller), prefixed with a note of how
 * much was left out; NUL characters are dropped (PostgreSQL text cannot hold them). A missing
 * file reads as "".
 */
export async function readTail(file: string, cap: number): Promise<string> {
	// most tasks print little or nothing: one system call for an empty file, three for a small one
	const stat = fs.statSync(file, { throwIfNoEntry: false });
	if (!stat || stat.size === 0) return "";
	if (stat.size <= SMALL_FILE && stat.size <= cap) {
		let text: string;
		try {
			text = fs.readFileSync(file, "utf8");
		} catch (error: any) {
			if (error?.code === "ENOENT") return "";
			throw error;
		}
		// it grew meanwhile beyond what may be read at once: read it as a large file
		if (Buffer.byteLength(text) <= cap)
			return text.includes("\0") ? text.replace(/\0/g, "") : text;
	}
	let handle: fs.promises.FileHandle;
	try {
		handle = await fs.promises.open(file, "r");
	} catch (error: any) {
		if (error?.code === "ENOENT") return "";
		throw error;
	}
	try {
		const { size } = await handle.stat();
		const length = Math.min(size, cap);
		const buffer = Buffer.alloc(length);
		let read = 0;
		while (read < length) {
			const { bytesRead } = await handle.read(
				buffer,
				read,
				length - read,
				size - length + read
			);
			if (bytesRead === 0) break;
			read += bytesRead;
		}
		let text = buffer.subarray(0, read).toString("utf8");
		if (size > length) {
			// drop the partial line (and any broken character) the cut began in
			const newline = text.indexOf("\n");
			if (newline >= 0) text = text.slice(newline + 1);
			text = `[... ${size - Buffer.byteLength(text)} earlier bytes are in the task's stdout/stderr file ...]\n${text}`;
		}
		return text.includes("\0") ? text.replace(/\0/g, "") : text;
	} finally {
		await handle.close();
	}
}

/**
 * The `ARTIFACT:` lines of a (possibly large) stdout file, read as a stream so output of any size
 * is scanned whole without being held: answers those lines joined, for parseArtifactLines.
 */
export async function artifactLines(file: string): Promise<string> {
	const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0;
	if (size === 0) return "";
	const lines: string[] = [];
	if (size <= 1024 * 1024) {
		// the common case, read at once (cheaper than a stream for small output)
		const text =
			size <= SMALL_FILE
				? fs.readFileSync(file, "utf8")
				: await fs.promises.readFile(file, "utf8");
		for (const line of text.split("\n"))
			if (line.startsWith("ARTIFACT:"))
				lines.push(line.endsWith("\r") ? line.slice(0, -1) : line);
		return lines.join("\n");
	}
	const stream = fs.createReadStream(file, { encoding: "utf8" });
	const reader = readline.createInterface({ input: stream, crlfDelay: Infinity });
	for await (const line of reader) if (line.startsWith("ARTIFACT:")) lines.push(line);
	return lines.join("\n");
}
