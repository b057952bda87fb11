import fs from "fs";
import path from "path";
import { openAgentFile } from "./files";

/** Emptied task directories kept for reuse, at most. */
const KEPT = 1000;

/**
 * Task directories that are emptied and renamed for the next execution instead of removed and
 * made again. Freeing a directory's block costs a journal entry and, on a file system mounted
 * with `discard`, a trim of the device: with a trivial task that was most of the cost of running
 * it. A recycled directory holds nothing but an empty `outputs/` and its emptied log files,
 * checked before it is kept.
 *
 * The spare directories live in `<workDir>/spare/`, beside `tasks/`, on the same file system
 * (a rename cannot cross file systems); a spare left by an earlier run of the agent is reused.
 *
 * The calls are synchronous: on the agent's local work directory each takes microseconds, less
 * than handing it to libuv's thread pool costs (see SMALL_FILE in files.ts).
 */
export class TaskDirs {
	private readonly spareDir: string;
	private spares: string[] = [];
	/**
	 * Names in the spare folder given up by spares taken: reused before new ones, because the
	 * file system has just seen them (a new name means scanning the folder for it)
	 */
	private freeNames: string[] = [];
	private next = 0;
	private loaded = false;
	/** the spare folder, made once (a failure is tried again next time) */
	private made = false;

	constructor(workDir: string) {
		this.spareDir = path.join(workDir, "spare");
	}

	/** Reads the spares an earlier run left (once); a missing folder means none. */
	private load(): void {
		if (this.loaded) return;
		this.loaded = true;
		let names: string[];
		try {
			names = fs.readdirSync(this.spareDir);
		} catch {
			return;
		}
		this.spares = names.map(name => path.join(this.spareDir, name));
		this.next = Math.max(0, ...names.map(name => Number(name) + 1 || 0));
	}

	/**
	 * Puts a spare at `taskDir` (which must not exist) and answers true, its `outputs/` and empty
	 * log files included; false when there is none (the caller makes the directories).
	 */
	async take(taskDir: string): Promise<boolean> {
		this.load();
		while (this.spares.length > 0) {
			const spare = this.spares.pop() as string;
			try {
				fs.renameSync(spare, taskDir);
				this.freeNames.push(path.basename(spare));
				return true;
			} catch (error: any) {
				// a spare that went missing is skipped; anything else (taskDir exists...) is the
				// caller's to handle the ordinary way
				if (error?.code === "ENOENT" && error?.path === spare) continue;
				this.spares.push(spare);
				return false;
			}
		}
		return false;
	}

	/**
	 * Keeps a finished execution's task directory for reuse when it holds nothing but an empty
	 * `outputs/` and the named files (its logs), which are emptied, not deleted: a file that
	 * stays costs less than one made again. Answers false when it was not kept: it then still
	 * exists, for the caller to remove.
	 */
	async give(taskDir: string, files: string[]): Promise<boolean> {
		if (this.spares.length >= KEPT) return false;
		this.load();
		try {
			const top = fs.readdirSync(taskDir);
			const allowed = new Set(["outputs", ...files.map(file => path.basename(file))]);
			if (top.some(name => !allowed.has(name))) return false;
			// the task may have put a link in place of its output directory or a log
			const outputs = path.join(taskDir, "outputs");
			if (!fs.lstatSync(outputs).isDirectory() || fs.readdirSync(outputs).length > 0)
				return false;
			// empty: an empty file is left alone (a truncation would still update its inode)
			for (const file of files) {
				if (!top.includes(path.basename(file))) continue;
				const fd = openAgentFile(file, fs.constants.O_WRONLY);
				if (fd === null) continue;
				try {
					if (fs.fstatSync(fd).size > 0) fs.ftruncateSync(fd, 0);
				} finally {
					fs.closeSync(fd);
				}
			}
			if (!this.made) {
				fs.mkdirSync(this.spareDir, { recursive: true });
				this.made = true;
			}
			// the agent's again until it is taken: the uid that ran in it may run another job
			const uid = process.geteuid!();
			const gid = process.getegid!();
			fs.chownSync(taskDir, uid, gid);
			fs.chownSync(outputs, uid, gid);
			const name = this.freeNames.pop() ?? String(this.next++);
			const spare = path.join(this.spareDir, name);
			fs.renameSync(taskDir, spare);
			this.spares.push(spare);
			return true;
		} catch {
			this.made = false;
			return false;
		}
	}
}
