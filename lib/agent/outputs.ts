import fs from "fs";
import path from "path";
import {
	parseResultsManifest,
	type ManifestFile,
	type ResultsManifest
} from "../documents/results-manifest";
import { ExecutionFailure } from "./execution-failure";
import { isPlainFileName, resolveConfined } from "./files";
import { isInside } from "../paths";
import { mediaTypeOf } from "../documents/media-types";
import type { ExecutionSpec, OutputWorkspace, ProducedFile } from "../documents/agent-protocol";
import { deleteObject, type S3Place } from "../storage/s3";

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
