import { entryFileIds } from "../documents/job-data";
import type { RecipeDefinition, RecipeJob } from "../documents/recipe-definition";
import type { RecipeData } from "../documents/recipe-data";
import type { JobInterface } from "../documents/types";

/**
 * What a recipe's job is given (Scale's RecipeDefinition.get_job_data / _add_job_inputs): the
 * recipe inputs its `recipe_inputs` connect, the outputs of its dependencies through their
 * `connections`, and every output of its interface stored in the recipe's workspace. A file
 * passed to a `files` input becomes a list of one; a list of one passed to a `file` input, its
 * file. An optional input nothing gives is left out.
 */

/** A job's results output_data entry (job results 1.0/1.1). */
export type ResultOutput = { name: string; file_id?: number; file_ids?: number[] };

type DataInput =
	| { name: string; value: string }
	| { name: string; file_id: number }
	| { name: string; file_ids: number[] };

function adapt(
	name: string,
	type: string | undefined,
	value: ResultOutput | RecipeData["input_data"][number]
): DataInput | null {
	if ("value" in value && typeof value.value === "string") return { name, value: value.value };
	const ids = entryFileIds(value);
	if (ids.length === 0) return null;
	if (type === "files") return { name, file_ids: ids };
	return { name, file_id: ids[0] };
}

export function recipeJobData(
	job: RecipeJob,
	iface: JobInterface,
	data: RecipeData,
	outputsOf: (jobName: string) => ResultOutput[]
): {
	version: "1.0";
	input_data: DataInput[];
	output_data: { name: string; workspace_id: number }[];
} {
	const typeOf = new Map(iface.input_data.map(i => [i.name, i.type]));
	const inputs: DataInput[] = [];
	const given = new Set<string>();
	const add = (entry: DataInput | null) => {
		if (!entry || given.has(entry.name) || !typeOf.has(entry.name)) return;
		given.add(entry.name);
		inputs.push(entry);
	};
	for (const conn of job.recipe_inputs) {
		const value = data.input_data.find(i => i.name === conn.recipe_input);
		if (value) add(adapt(conn.job_input, typeOf.get(conn.job_input), value));
	}
	for (const dep of job.dependencies) {
		const outputs = outputsOf(dep.name);
		for (const conn of dep.connections) {
			const out = outputs.find(o => o.name === conn.output);
			if (out) add(adapt(conn.input, typeOf.get(conn.input), out));
		}
	}
	return {
		version: "1.0",
		input_data: inputs,
		output_data:
			data.workspace_id === undefined
				? []
				: iface.output_data.map(o => ({
						name: o.name,
						workspace_id: data.workspace_id as number
					}))
	};
}

/** The jobs of the definition whose dependencies are all among `completed` (by job name). */
export function readyJobs(
	def: Pick<RecipeDefinition, "jobs">,
	completed: ReadonlySet<string>
): RecipeJob[] {
	return def.jobs.filter(job => job.dependencies.every(dep => completed.has(dep.name)));
}

/**
 * How many jobs of the definition wait on `name` directly (list it among their dependencies): the
 * launches its end brings (queue.successors, migration 0029). At most 32,767 (a smallint).
 */
export function successorsOf(def: Pick<RecipeDefinition, "jobs">, name: string): number {
	let count = 0;
	for (const job of def.jobs) if (job.dependencies.some(d => d.name === name)) count++;
	return Math.min(count, 32767);
}

/** Every job that depends on one of `names`, directly or through others (names excluded). */
export function dependentsOf(
	def: Pick<RecipeDefinition, "jobs">,
	names: Iterable<string>
): Set<string> {
	const found = new Set<string>();
	const todo = [...names];
	while (todo.length > 0) {
		const name = todo.pop() as string;
		for (const job of def.jobs)
			if (!found.has(job.name) && job.dependencies.some(d => d.name === name)) {
				found.add(job.name);
				todo.push(job.name);
			}
	}
	return found;
}
