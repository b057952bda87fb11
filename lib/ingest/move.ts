import { constants, promises as fs } from "fs";
import path from "path";

/**
 * Moving a file without ever overwriting one and without deleting it before it is stored:
 * a hard link to the new name (refused when that name exists: rename would replace it), then the
 * old name unlinked. Across file systems (EXDEV) the file is copied to a hidden temporary name
 * beside the target, flushed to disk, linked to the target, and only then is the original
 * removed. A crash leaves the file at its old name, at its new one, or at both (never neither).
 */

/** Directories known to exist, so that a burst of files into one day's folder makes it once. */
const madeDirs = new Set<string>();

async function ensureDir(dir: string): Promise<void> {
	if (madeDirs.has(dir)) return;
	await fs.mkdir(dir, { recursive: true });
	if (madeDirs.size > 10_000) madeDirs.clear();
	madeDirs.add(dir);
}

/** Thrown when the target name is taken. */
export class TargetExists extends Error {
	readonly code = "EEXIST";
}

/**
 * Moves `from` to `to` (its directory made as needed); throws TargetExists when `to` exists, and
 * the file system's error otherwise (the file then stays at `from`).
 */
export async function moveNoClobber(from: string, to: string): Promise<void> {
	const dir = path.dirname(to);
	await ensureDir(dir);
	try {
		await link(from, to);
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code;
		if (code === "ENOENT" && !(await exists(from))) throw error;
		if (code === "ENOENT") {
			// the directory was removed since it was made: once more, for real
			madeDirs.delete(dir);
			await fs.mkdir(dir, { recursive: true });
			await link(from, to);
		} else if (code === "EXDEV" || code === "EPERM" || code === "ENOTSUP") {
			await copyThenLink(from, to);
		} else throw error;
	}
	await fs.unlink(from);
}

async function link(from: string, to: string): Promise<void> {
	try {
		await fs.link(from, to);
	} catch (error) {
		if ((error as NodeJS.ErrnoException).code === "EEXIST")
			throw new TargetExists(`${to} exists`);
		throw error;
	}
}

async function copyThenLink(from: string, to: string): Promise<void> {
	const temp = path.join(path.dirname(to), `.${path.basename(to)}.${process.pid}.ingesting`);
	await fs.copyFile(from, temp, constants.COPYFILE_FICLONE);
	try {
		const handle = await fs.open(temp, "r+");
		try {
			await handle.sync();
		} finally {
			await handle.close();
		}
		await link(temp, to);
	} finally {
		await fs.unlink(temp).catch(() => undefined);
	}
}

export async function exists(file: string): Promise<boolean> {
	return fs.lstat(file).then(
		() => true,
		() => false
	);
}

/**
 * Moves a file into `folder` under its own name, or `name.<tag>` when that is taken (a file of
 * the same name deferred before, say); answers where it went.
 */
export async function moveAside(from: string, folder: string, tag: string): Promise<string> {
	const name = path.basename(from);
	const first = path.join(folder, name);
	try {
		await moveNoClobber(from, first);
		return first;
	} catch (error) {
		if (!(error instanceof TargetExists)) throw error;
	}
	const second = path.join(folder, `${name}.${tag}`);
	await moveNoClobber(from, second);
	return second;
}
