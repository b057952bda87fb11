import crypto from "crypto";
import fs from "fs";
import path from "path";
import readline from "readline";
import { isInside } from "../paths";

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
 * `/etc/shadow` into a workspace. It must also be a file the job wrote: one link only (a hard
 * link inside the task directory may name a file outside it), and owned by `owner` when the
 * job ran as a user of its own.
 */
export async function resolveConfined(
	given: string,
	outputDir: string,
	confineTo: string,
	owner?: number
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
	if (stat.nlink !== 1)
		return { refused: `"${given}" is a hard link (${stat.nlink} names for one file)` };
	if (owner !== undefined && stat.uid !== owner)
		return { refused: `"${given}" was not written by the job (owner ${stat.uid})` };
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
 * Opens one of the agent's own files in a task directory (a log) for reading or appending, or
 * answers null when it is missing. The directory is the task's: its processes may have put a
 * symbolic link, a hard link, a FIFO or a file of their own in the log's place, and the agent,
 * which may be root, must neither read nor write through it. So the file is opened without
 * following a link and without blocking, and kept only when it is a regular file with one link,
 * owned by the agent's user (the launcher or the agent made it; the task's user cannot).
 */
export function openAgentFile(file: string, flags: number = fs.constants.O_RDONLY): number | null {
	let fd: number;
	try {
		fd = fs.openSync(file, flags | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
	} catch (error: any) {
		if (error?.code === "ENOENT") return null;
		if (error?.code === "ELOOP") throw new ReplacedFileError(file);
		throw error;
	}
	const stat = fs.fstatSync(fd);
	if (!stat.isFile() || stat.nlink !== 1 || stat.uid !== process.geteuid!()) {
		fs.closeSync(fd);
		throw new ReplacedFileError(file);
	}
	return fd;
}

/** A file of the agent's in a task directory that the task replaced (see openAgentFile). */
export class ReplacedFileError extends Error {
	constructor(readonly file: string) {
		super(`${path.basename(file)} was replaced by the task: not read`);
	}
}

function readAt(fd: number, buffer: Buffer, offset: number, length: number, position: number) {
	return new Promise<number>((resolve, reject) =>
		fs.read(fd, buffer, offset, length, position, (error, bytesRead) =>
			error ? reject(error) : resolve(bytesRead)
		)
	);
}

/**
 * The last `cap` bytes of a file as text (all of it when smaller), prefixed with a note of how
 * much was left out; NUL characters are dropped (PostgreSQL text cannot hold them). A missing
 * file reads as "", one the task replaced (openAgentFile) as a note saying so.
 */
export async function readTail(file: string, cap: number): Promise<string> {
	let fd: number | null;
	try {
		fd = openAgentFile(file);
	} catch (error) {
		if (error instanceof ReplacedFileError) return `[${error.message}]\n`;
		throw error;
	}
	if (fd === null) return "";
	try {
		// most tasks print little or nothing: one system call for an empty file, two for a small one
		const size = fs.fstatSync(fd).size;
		if (size === 0) return "";
		const length = Math.min(size, cap);
		const buffer = Buffer.alloc(length);
		let read = 0;
		while (read < length) {
			const position = size - length + read;
			const bytesRead =
				length <= SMALL_FILE
					? fs.readSync(fd, buffer, read, length - read, position)
					: await readAt(fd, buffer, read, length - read, position);
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
		fs.closeSync(fd);
	}
}

/**
 * The `ARTIFACT:` lines of a (possibly large) stdout file, read as a stream so output of any size
 * is scanned whole without being held: answers those lines joined, for parseArtifactLines.
 */
export async function artifactLines(file: string): Promise<string> {
	let fd: number | null;
	try {
		fd = openAgentFile(file);
	} catch (error) {
		if (error instanceof ReplacedFileError) return "";
		throw error;
	}
	if (fd === null) return "";
	const size = fs.fstatSync(fd).size;
	if (size === 0) {
		fs.closeSync(fd);
		return "";
	}
	const lines: string[] = [];
	if (size <= 1024 * 1024) {
		// the common case, read at once (cheaper than a stream for small output)
		let text: string;
		try {
			text = fs.readFileSync(fd, "utf8");
		} finally {
			fs.closeSync(fd);
		}
		for (const line of text.split("\n"))
			if (line.startsWith("ARTIFACT:"))
				lines.push(line.endsWith("\r") ? line.slice(0, -1) : line);
		return lines.join("\n");
	}
	const stream = fs.createReadStream("", { fd, encoding: "utf8" });
	const reader = readline.createInterface({ input: stream, crlfDelay: Infinity });
	for await (const line of reader) if (line.startsWith("ARTIFACT:")) lines.push(line);
	return lines.join("\n");
}
