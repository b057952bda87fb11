import fs from "fs";
import path from "path";
import { ExecutionFailure } from "./execution-failure";
import { isPlainFileName } from "./files";
import type { TaskIdentity } from "./launcher";
import type { ExecutionSpec, StagedFile } from "../documents/agent-protocol";
import { downloadToFile } from "../storage/s3";

/**
 * Copies (or downloads, from S3) each staged file of an execution to `<inputsDir>/<input name>/<file name>` and answers
 * the substitution values: a file input's file path, a files input's directory, a property's
 * value; null for an optional input given nothing. Unknown inputs in the spec are ignored.
 * Copying stops early once `abandoned()` (the execution was canceled or the agent stops).
 * Throws ExecutionFailure: task-launch for inputs that do not fit the interface, filesystem-io
 * for a copy that failed.
 */
export async function stageInputs(
	spec: Pick<ExecutionSpec, "interface" | "inputs">,
	inputsDir: string,
	abandoned: () => boolean,
	owner?: TaskIdentity
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
		const paths = await copyInputFiles(input.name, dir, given.files, abandoned, owner);
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
	owner?: TaskIdentity
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
