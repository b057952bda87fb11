import fs from "fs";
import { FieldError } from "../errors";
import {
	splitCommandArguments,
	substituteArguments,
	type SubstitutionValues
} from "../documents/job-interface";
import { mergeArtifacts, parseArtifactLines, type ResultsManifest } from "../documents/results";
import { uploadFile } from "../storage/s3";
import { ExecutionFailure } from "./execution-failure";
import { artifactLines, copyAtomically } from "./files";
import { readManifest, removeProducts, type ProductPlan, type TaskDirs } from "./task";
import type { TaskIdentity } from "./launcher";
import type { ExecutionSpec, ProducedFile } from "../documents/agent-protocol";

/**
 * The work of an execution's pre and post steps that needs nothing of the Execution's state
 * (lib/agent/execution.ts runs the steps, reports them and decides the outcome).
 */

/**
 * Makes a directory that did not exist, or replaces one left by an earlier run of the same
 * execution id (stale). The common case costs one system call.
 */
async function makeFreshDir(dir: string): Promise<void> {
	try {
		await fs.promises.mkdir(dir);
	} catch (error: any) {
		if (error?.code === "EEXIST") await fs.promises.rm(dir, { recursive: true, force: true });
		else if (error?.code !== "ENOENT") throw error;
		await fs.promises.mkdir(dir, { recursive: true });
	}
}

/**
 * Makes the task directory and its outputs directory (or takes an emptied one to reuse), owned by
 * the task's identity and closed to everyone else; answers whether it was reused (its log files
 * exist, empty). `anyUser`: a container runs as its image's own user, whoever that is, and must
 * still write its outputs. A failure is `filesystem-io`.
 */
export async function prepareTaskDir(
	taskDir: string,
	outputDir: string,
	taskDirs: TaskDirs | undefined,
	identity: TaskIdentity | null,
	anyUser: boolean
): Promise<boolean> {
	try {
		const recycled = (await taskDirs?.take(taskDir)) === true;
		if (!recycled) {
			await makeFreshDir(taskDir);
			await fs.promises.mkdir(outputDir);
		}
		if (identity) {
			fs.chownSync(taskDir, identity.uid, identity.gid);
			fs.chownSync(outputDir, identity.uid, identity.gid);
			fs.chmodSync(taskDir, anyUser ? 0o711 : 0o700);
			if (anyUser) fs.chmodSync(outputDir, 0o777);
		}
		return recycled;
	} catch (error) {
		throw new ExecutionFailure(
			"filesystem-io",
			`could not make the task directory ${taskDir}: ${(error as Error).message}`
		);
	}
}

/**
 * What main runs: the interface's command and its arguments with the inputs' values and the
 * output directory substituted (`display`: the arguments as one line, for the report). A
 * substitution that cannot be made, or a container job type without an image, fails the launch.
 */
export function commandOf(
	spec: ExecutionSpec,
	inputs: SubstitutionValues["inputs"],
	outputDir: string
): { command: string; args: string[]; display: string } {
	let words: string[];
	try {
		words = substituteArguments(splitCommandArguments(spec.interface.command_arguments), {
			inputs,
			jobOutputDir: outputDir
		});
	} catch (error) {
		const message = error instanceof FieldError ? error.message : String(error);
		throw new ExecutionFailure(
			"task-launch",
			`the command arguments cannot be used: ${message}`
		);
	}
	if (spec.jobType.usesDocker && !spec.jobType.dockerImage)
		throw new ExecutionFailure(
			"docker-task-launch",
			`the job type ${spec.jobType.name} ${spec.jobType.version} uses Docker but has no docker image`
		);
	return { command: spec.interface.command, args: words, display: words.join(" ") };
}

/**
 * The task's results: its results manifest and the ARTIFACT lines of its stdout, merged; null
 * when it left neither.
 */
export async function readResults(
	outputDir: string,
	stdoutPath: string
): Promise<ResultsManifest | null> {
	const manifest = await readManifest(outputDir);
	const printed = parseArtifactLines(await artifactLines(stdoutPath));
	if (!manifest && printed.length === 0) return null;
	return mergeArtifacts(
		manifest ?? { version: "1.1", output_data: [], parse_results: [], errors: [] },
		printed
	);
}

/**
 * Copies (or uploads) each planned product into its workspace, in order, until `halted` says
 * the execution was canceled or stopped; a failure removes what was stored and is
 * `filesystem-io`.
 */
export async function storeProducts(
	spec: ExecutionSpec,
	planned: readonly ProductPlan[],
	halted: () => boolean
): Promise<ProducedFile[]> {
	const products: ProducedFile[] = [];
	try {
		for (const plan of planned) {
			if (halted()) break;
			if (plan.s3)
				Object.assign(
					plan.product,
					await uploadFile(plan.s3, plan.product.filePath, plan.from)
				);
			else plan.product.size = await copyAtomically(plan.from, plan.to);
			products.push(plan.product);
		}
	} catch (error) {
		await removeProducts(spec, products);
		throw new ExecutionFailure(
			"filesystem-io",
			`could not copy the outputs into their workspace: ${(error as Error).message}`
		);
	}
	return products;
}
