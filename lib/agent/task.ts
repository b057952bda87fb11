import fs from "fs";
import path from "path";
import { ExecutionFailure } from "./execution-failure";
import type { TaskIdentity } from "./launcher";
import {
	parseResultsManifest,
	type ManifestFile,
	type ResultsManifest
} from "../documents/results";
import { isPlainFileName, openAgentFile, resolveConfined } from "./files";
import { isInside } from "../paths";
import { mediaTypeOf } from "../documents/media-types";
import { deleteObject, downloadToFile, type S3Place } from "../storage/s3";
import type {
	ExecutionSpec,
	OutputWorkspace,
	ProducedFile,
	StagedFile
} from "../documents/agent-protocol";

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

/**
 * Copies (or downloads, from S3) each staged file of an execution to
 * `<inputsDir>/<input name>/<file name>` and answers the substitution values: a file input's file path, a files input's directory, a property's
 * value; null for an optional input given nothing. Unknown inputs in the spec are ignored.
 * A `partial` input's file in an s3 workspace whose bucket is mounted here (`mountRoot`) is a
 * symbolic link to it there instead, its real path added to `mounted` (a container binds those
 * read-only); one not found there is downloaded.
 * Copying stops early once `abandoned()` (the execution was canceled or the agent stops).
 * Throws ExecutionFailure: task-launch for inputs that do not fit the interface, filesystem-io
 * for a copy that failed.
 */
export async function stageInputs(
	spec: Pick<ExecutionSpec, "interface" | "inputs">,
	inputsDir: string,
	abandoned: () => boolean,
	owner?: TaskIdentity,
	mounted: string[] = []
): Promise<Record<string, string | null>> {
	const values: Record<string, string | null> = {};
	for (const input of spec.interface.input_data) {
		const given = Object.prototype.hasOwnProperty.call(spec.inputs, input.name)
			? spec.inputs[input.name]
			: undefined;
		const absent =
			given === undefined || given === null || ("files" in given && given.files.length === 0);
		if (absent) {
			if (input.required)
				throw new ExecutionFailure(
					"task-launch",
					`the required input "${input.name}" has no value`
				);
			values[input.name] = null;
			continue;
		}
		if (input.type === "property") {
			if (!("value" in given) || typeof given.value !== "string")
				throw new ExecutionFailure(
					"task-launch",
					`the property input "${input.name}" was given files instead of a value`
				);
			values[input.name] = given.value;
			continue;
		}
		if (!("files" in given))
			throw new ExecutionFailure(
				"task-launch",
				`the ${input.type} input "${input.name}" was given a value instead of files`
			);
		if (input.type === "file" && given.files.length > 1)
			throw new ExecutionFailure(
				"task-launch",
				`the file input "${input.name}" was given ${given.files.length} files`
			);
		const dir = path.join(inputsDir, input.name);
		const paths = await copyInputFiles(input.name, dir, given.files, abandoned, owner, {
			partial: input.partial === true,
			mounted
		});
		values[input.name] = input.type === "file" ? paths[0] : dir;
	}
	return values;
}

/** Copies one input's files into `dir`, each under its own plain, distinct name. */
async function copyInputFiles(
	name: string,
	dir: string,
	files: StagedFile[],
	abandoned: () => boolean,
	owner: TaskIdentity | undefined,
	mounts: { partial: boolean; mounted: string[] }
): Promise<string[]> {
	const seen = new Set<string>();
	for (const file of files) {
		if (!isPlainFileName(file.fileName))
			throw new ExecutionFailure(
				"task-launch",
				`the input "${name}" has a file named "${file.fileName}", which is not a plain file name`
			);
		if (seen.has(file.fileName))
			throw new ExecutionFailure(
				"task-launch",
				`the input "${name}" has two files named "${file.fileName}"`
			);
		seen.add(file.fileName);
	}
	const paths: string[] = [];
	try {
		await fs.promises.mkdir(dir, { recursive: true });
		// the copies are the task's to read (a workspace file may be readable by its owner only)
		if (owner) await fs.promises.chown(dir, owner.uid, owner.gid);
		for (const file of files) {
			if (abandoned()) break;
			const target = path.join(dir, file.fileName);
			const inMount = mounts.partial ? await mountedFile(file) : null;
			if (inMount !== null) {
				await fs.promises.symlink(inMount, target);
				mounts.mounted.push(inMount);
				paths.push(target);
				continue;
			}
			if (file.s3) await downloadToFile(file.s3, file.s3.key, target);
			else await fs.promises.copyFile(file.hostPath, target);
			if (owner) await fs.promises.chown(target, owner.uid, owner.gid);
			paths.push(target);
		}
	} catch (error) {
		throw new ExecutionFailure(
			"filesystem-io",
			`could not stage the input "${name}": ${(error as Error).message}`
		);
	}
	return paths;
}

/**
 * The real path of an s3 file under its bucket's mount on this node, kept inside the mount with
 * links resolved; null when the workspace has no mount, or the file is not a regular file there.
 */
async function mountedFile(file: StagedFile): Promise<string | null> {
	if (!file.s3 || !file.mountRoot) return null;
	try {
		const root = await fs.promises.realpath(file.mountRoot);
		const lexical = path.join(root, file.s3.key);
		if (!isInside(root, lexical)) return null;
		const real = await fs.promises.realpath(lexical);
		if (!isInside(root, real)) return null;
		return (await fs.promises.stat(real)).isFile() ? real : null;
	} catch {
		return null;
	}
}

/**
 * An execution's outputs, for its post step (lib/agent/execution.ts): the results manifest read
 * and checked, the registered files matched to the interface's outputs and placed in their
 * workspaces' paths, all checked before anything is copied.
 */

/** The results manifest's file name, in the output directory. */
export const RESULTS_MANIFEST_FILE = "results_manifest.json";

/** The longest product file name the control plane stores (its scale_file.file_name). */
export const MAX_FILE_NAME = 250;

/**
 * The manifest in the output directory, in the 1.1 shape; null when there is none. An
 * unreadable or invalid manifest fails the execution as the algorithm's fault (see Execution in
 * execution.ts): errorName null, exitCode 0, errorDetail naming the problem.
 */
export async function readManifest(outputDir: string): Promise<ResultsManifest | null> {
	const file = path.join(outputDir, RESULTS_MANIFEST_FILE);
	let stat: fs.Stats | undefined;
	try {
		// synchronous: one quick call on the local task directory (see SMALL_FILE in files.ts)
		stat = fs.lstatSync(file, { throwIfNoEntry: false });
	} catch {
		// an output directory the task replaced or locked holds no manifest
	}
	if (!stat) return null;
	if (!stat.isFile())
		throw new ExecutionFailure(
			null,
			`the results manifest ${RESULTS_MANIFEST_FILE} is not a regular file`
		);
	let doc: unknown;
	try {
		// not through a link, nor from a FIFO, that replaced the file since the lstat
		const fd = fs.openSync(
			file,
			fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK
		);
		try {
			if (!fs.fstatSync(fd).isFile()) throw new Error("it is not a regular file");
			doc = JSON.parse(fs.readFileSync(fd, "utf8"));
		} finally {
			fs.closeSync(fd);
		}
	} catch (error) {
		throw new ExecutionFailure(
			null,
			`the results manifest ${RESULTS_MANIFEST_FILE} is not valid JSON: ${(error as Error).message}`
		);
	}
	try {
		return parseResultsManifest(doc, RESULTS_MANIFEST_FILE);
	} catch (error) {
		throw new ExecutionFailure(
			null,
			`the results manifest is invalid: ${(error as Error).message}`
		);
	}
}

/**
 * Matches the registered outputs to the interface and answers what to copy where, checking
 * everything before anything is copied. Outputs the interface does not name are ignored (they
 * stay in the reported manifest).
 */
export async function planProducts(
	spec: ExecutionSpec,
	merged: ResultsManifest | null,
	dirs: { outputDir: string; taskDir: string; owner?: number }
): Promise<ProductPlan[]> {
	const byName = new Map((merged?.output_data ?? []).map(entry => [entry.name, entry]));
	const plans: ProductPlan[] = [];
	const destinations = new Map<string, string>();
	for (const output of spec.interface.output_data) {
		const entry = byName.get(output.name);
		const files: ManifestFile[] = entry
			? entry.file
				? [entry.file]
				: (entry.files ?? [])
			: [];
		if (files.length === 0) {
			if (output.required)
				throw new ExecutionFailure(
					null,
					`the required output "${output.name}" was not produced (no results manifest entry or ARTIFACT line names it)`
				);
			continue;
		}
		if (output.type === "file" && files.length > 1)
			throw new ExecutionFailure(
				null,
				`the output "${output.name}" is a single file but ${files.length} files were registered for it`
			);
		const workspace = workspaceOf(spec, output.name);
		for (const file of files) {
			const found = await resolveConfined(
				file.path,
				dirs.outputDir,
				dirs.taskDir,
				dirs.owner
			);
			if ("refused" in found)
				throw new ExecutionFailure(null, `the output "${output.name}": ${found.refused}`);
			const fileName = path.basename(file.path);
			if (fileName.length > MAX_FILE_NAME)
				throw new ExecutionFailure(
					null,
					`the output "${output.name}": the file name "${fileName.slice(0, 40)}..." is longer than ${MAX_FILE_NAME} characters`
				);
			const filePath = [
				spec.jobType.name,
				spec.jobType.version,
				String(spec.jobId),
				fileName
			].join("/");
			const to = workspace.s3
				? `s3://${workspace.s3.bucket}/${filePath}`
				: path.resolve(workspace.hostPath, filePath);
			const inside = workspace.s3 || isInside(path.resolve(workspace.hostPath), to);
			if (!isPlainFileName(fileName) || !inside)
				throw new ExecutionFailure(
					"task-launch",
					`the output "${output.name}": "${filePath}" would leave its workspace`
				);
			const other = destinations.get(to);
			if (other !== undefined)
				throw new ExecutionFailure(
					null,
					`the outputs "${other}" and "${output.name}" both register a file named "${fileName}"`
				);
			destinations.set(to, output.name);
			const geo = file.geo_metadata;
			const product: ProducedFile = {
				outputName: output.name,
				workspaceId: workspace.workspaceId,
				filePath,
				fileName,
				mediaType: output.media_type ?? mediaTypeOf(fileName),
				size: 0,
				dataStarted: geo?.data_started ?? null,
				dataEnded: geo?.data_ended ?? null
			};
			if (geo?.geo_json !== undefined) product.geoJson = geo.geo_json;
			plans.push({ from: found.path, to, product, s3: workspace.s3 });
		}
	}
	return plans;
}

/** A product to copy from the task directory into its workspace (`to`), or upload to `s3`. */
export interface ProductPlan {
	from: string;
	to: string;
	product: ProducedFile;
	s3?: S3Place;
}

/** The output workspace of an output: an s3 workspace, or one with an absolute host path here. */
export function workspaceOf(spec: ExecutionSpec, outputName: string): OutputWorkspace {
	const workspace = spec.outputWorkspaces[outputName];
	if (!workspace)
		throw new ExecutionFailure(
			"task-launch",
			`the output "${outputName}" has no output workspace`
		);
	if (!workspace.s3 && !path.isAbsolute(workspace.hostPath))
		throw new ExecutionFailure(
			"task-launch",
			`the workspace ${workspace.workspaceId} of the output "${outputName}" has no host path (got "${workspace.hostPath}"): it is not mounted on this node`
		);
	return workspace;
}

/** Removes products copied already (an execution whose post step failed midway). */
export async function removeProducts(spec: ExecutionSpec, products: ProducedFile[]): Promise<void> {
	for (const product of products) {
		const workspace = Object.values(spec.outputWorkspaces).find(
			w => w.workspaceId === product.workspaceId
		);
		if (workspace?.s3)
			await deleteObject(workspace.s3, product.filePath).catch(() => undefined);
		else if (workspace)
			await fs.promises
				.rm(path.resolve(workspace.hostPath, product.filePath), { force: true })
				.catch(() => undefined);
	}
}
