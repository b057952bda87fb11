import fs, { constants } from "fs";
import path from "path";

/**
 * Moving a file without ever overwriting one and without deleting it before it is stored:
 * a hard link to the new name (refused when that name exists: rename would replace it), then the
 * old name unlinked. Across file systems (EXDEV) the file is copied to a hidden temporary name
 * beside the target, flushed to disk, linked to the target, and only then is the original
 * removed. A crash leaves the file at its old name, at its new one, or at both (never neither).
 *
 * Synchronous: the monitor runs these in a thread of its own, a batch of files per message
 * (lib/ingest/fs-thread.ts), where each call through libuv's pool cost the agent's main thread
 * more than the system call itself.
 */

/** Directories known to exist, so that a burst of files into one day's folder makes it once. */
const madeDirs = new Set<string>();

function ensureDir(dir: string): void {
	if (madeDirs.has(dir)) return;
	fs.mkdirSync(dir, { recursive: true });
	if (madeDirs.size > 10_000) madeDirs.clear();
	madeDirs.add(dir);
}

/** Thrown when the target name is taken. */
export class TargetExists extends Error {
	readonly code = "EEXIST";
}

/** Thrown instead of copying, when asked to: the move would be a copy (no link across). */
export class CopyNeeded extends Error {
	readonly code = "EXDEV";
}

/**
 * Moves `from` to `to` (its directory made as needed); throws TargetExists when `to` exists,
 * CopyNeeded when the file cannot be linked there and `copy` is false, and the file system's
 * error otherwise (the file then stays at `from`).
 */
export function moveNoClobber(from: string, to: string, copy = true): void {
	const dir = path.dirname(to);
	ensureDir(dir);
	try {
		link(from, to);
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code;
		if (code === "ENOENT" && !exists(from)) throw error;
		if (code === "ENOENT") {
			// the directory was removed since it was made: once more, for real
			madeDirs.delete(dir);
			fs.mkdirSync(dir, { recursive: true });
			link(from, to);
		} else if (code === "EXDEV" || code === "EPERM" || code === "ENOTSUP") {
			if (!copy) throw new CopyNeeded(`${from} cannot be linked to ${to}: ${code}`);
			copyThenLink(from, to);
		} else throw error;
	}
	fs.unlinkSync(from);
}

function link(from: string, to: string): void {
	try {
		fs.linkSync(from, to);
	} catch (error) {
		if ((error as NodeJS.ErrnoException).code === "EEXIST")
			throw new TargetExists(`${to} exists`);
		throw error;
	}
}

function copyThenLink(from: string, to: string): void {
	const temp = path.join(path.dirname(to), `.${path.basename(to)}.${process.pid}.ingesting`);
	fs.copyFileSync(from, temp, constants.COPYFILE_FICLONE);
	try {
		const fd = fs.openSync(temp, "r+");
		try {
			fs.fsyncSync(fd);
		} finally {
			fs.closeSync(fd);
		}
		link(temp, to);
	} finally {
		try {
			fs.unlinkSync(temp);
		} catch {
			// gone already
		}
	}
}

export function exists(file: string): boolean {
	return fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined;
}

/**
 * Moves a file into `folder` under its own name, or `name.<tag>` when that is taken (a file of
 * the same name deferred before, say); answers where it went.
 */
export function moveAside(from: string, folder: string, tag: string): string {
	const name = path.basename(from);
	const first = path.join(folder, name);
	try {
		moveNoClobber(from, first);
		return first;
	} catch (error) {
		if (!(error instanceof TargetExists)) throw error;
	}
	const second = path.join(folder, `${name}.${tag}`);
	moveNoClobber(from, second);
	return second;
}
