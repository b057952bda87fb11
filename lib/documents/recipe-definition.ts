import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import { INPUT_ENTRY_SCHEMA, IO_NAME_RULE, NAME_PATTERN } from "./job-interface";
import type {
	InputEntry,
	InputType,
	JobInterface,
	JobTypeLookup,
	OutputEntry,
	Warning
} from "./types";

/**
 * Recipe definition 1.0 (Scale's recipe/configuration/definition/recipe_definition.py and
 * docs/architecture/jobs/recipe_definition.rst): the recipe's inputs, its jobs, and how recipe
 * inputs and job outputs feed job inputs.
 */
export const RECIPE_DEFINITION_VERSION = "1.0";

/**
 * What Scale assumes a file is when its source declares no media type (storage/media_type.py);
 * an input that accepts only some media types is warned about it, as Scale does.
 */
export const UNKNOWN_MEDIA_TYPE = "application/octet-stream";

export interface JobTypeKey {
	name: string;
	version: string;
}

export interface RecipeInputConnection {
	recipe_input: string;
	job_input: string;
}

export interface JobConnection {
	output: string;
	input: string;
}

export interface RecipeDependency {
	name: string;
	connections: JobConnection[];
}

export interface RecipeJob {
	name: string;
	job_type: JobTypeKey;
	recipe_inputs: RecipeInputConnection[];
	dependencies: RecipeDependency[];
}

/** Normalised: version filled, `required` filled (default true), file inputs carry media_types. */
export interface RecipeDefinition {
	version: "1.0";
	input_data: InputEntry[];
	jobs: RecipeJob[];
}

const RECIPE_DEFINITION_SCHEMA = {
	type: "object",
	required: ["jobs"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		input_data: {
			type: "array",
			items: INPUT_ENTRY_SCHEMA
		},
		jobs: {
			type: "array",
			items: {
				type: "object",
				required: ["name", "job_type"],
				additionalProperties: false,
				properties: {
					name: { type: "string", pattern: NAME_PATTERN },
					job_type: {
						type: "object",
						required: ["name", "version"],
						additionalProperties: false,
						properties: {
							name: { type: "string", pattern: NAME_PATTERN },
							version: { type: "string", minLength: 1 }
						}
					},
					recipe_inputs: {
						type: "array",
						items: {
							type: "object",
							required: ["recipe_input", "job_input"],
							additionalProperties: false,
							properties: {
								recipe_input: { type: "string" },
								job_input: { type: "string" }
							}
						}
					},
					dependencies: {
						type: "array",
						items: {
							type: "object",
							required: ["name"],
							additionalProperties: false,
							properties: {
								name: { type: "string" },
								connections: {
									type: "array",
									items: {
										type: "object",
										required: ["output", "input"],
										additionalProperties: false,
										properties: {
											output: { type: "string" },
											input: { type: "string" }
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
};

const checkShape = compileChecker(RECIPE_DEFINITION_SCHEMA);

type Given = {
	version?: string;
	input_data?: { name: string; type: InputType; required?: boolean; media_types?: string[] }[];
	jobs: {
		name: string;
		job_type: JobTypeKey;
		recipe_inputs?: RecipeInputConnection[];
		dependencies?: { name: string; connections?: JobConnection[] }[];
	}[];
};

/** What feeds one job input: a recipe input or a dependency's output. */
interface Feed {
	/** the element of the definition that makes the connection, for error paths */
	at: string;
	/** e.g. `recipe input "image"` */
	what: string;
	type: "property" | "file" | "files";
	optional: boolean;
	/** media types the fed files may have; [UNKNOWN_MEDIA_TYPE] when the source does not say */
	media_types: string[];
}

/**
 * Parses a recipe definition and checks it against the interfaces of the job types it names
 * (Scale's RecipeDefinition constructor plus validate_job_interfaces). `lookup` answers the
 * current interface of a job type; see referencedJobTypes to load them first. Answers the
 * normalised definition and the warnings (media type mismatches); throws FieldError naming the
 * path at fault inside `field`, e.g. `definition.jobs[2].job_type`.
 */
export function parseRecipeDefinition(
	doc: unknown,
	lookup: JobTypeLookup,
	field = "definition"
): { definition: RecipeDefinition; warnings: Warning[] } {
	assertSchema(checkShape, doc, field, p => (p.type === "pattern" ? IO_NAME_RULE : p.message));
	checkStorableText(doc, field);
	const given = doc as Given;
	const version = given.version ?? RECIPE_DEFINITION_VERSION;
	if (version !== RECIPE_DEFINITION_VERSION) {
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${RECIPE_DEFINITION_VERSION})`
		);
	}
	const definition = normalise(given);

	const inputs = new Map<string, InputEntry>();
	definition.input_data.forEach((input, i) => {
		if (inputs.has(input.name)) {
			throw new FieldError(
				`${field}.input_data[${i}].name`,
				`"${input.name}" is the name of another recipe input`
			);
		}
		inputs.set(input.name, input);
	});
	const jobs = new Map<string, RecipeJob>();
	definition.jobs.forEach((job, j) => {
		if (jobs.has(job.name)) {
			throw new FieldError(
				`${field}.jobs[${j}].name`,
				`"${job.name}" is the name of another job`
			);
		}
		jobs.set(job.name, job);
	});
	definition.jobs.forEach((job, j) =>
		job.dependencies.forEach((dep, d) => {
			const at = `${field}.jobs[${j}].dependencies[${d}].name`;
			if (dep.name === job.name) throw new FieldError(at, "a job cannot depend on itself");
			if (!jobs.has(dep.name)) {
				throw new FieldError(at, `"${dep.name}" names no job of the recipe`);
			}
		})
	);
	const cycle = findCycle(definition.jobs);
	if (cycle) {
		throw new FieldError(
			`${field}.jobs`,
			`the job dependencies form a cycle: ${cycle.join(" -> ")} (each depends on the next)`
		);
	}

	const interfaces = new Map<string, JobInterface>();
	definition.jobs.forEach((job, j) => {
		const found = lookup(job.job_type.name, job.job_type.version);
		if (!found) {
			throw new FieldError(
				`${field}.jobs[${j}].job_type`,
				`job type "${job.job_type.name}" version "${job.job_type.version}" does not exist`
			);
		}
		interfaces.set(job.name, found);
	});

	const warnings: Warning[] = [];
	definition.jobs.forEach((job, j) => {
		const at = `${field}.jobs[${j}]`;
		const jobInterface = interfaces.get(job.name) as JobInterface;
		const feeds = new Map<string, Feed>();
		const jobInputOf = (name: string, where: string): InputEntry => {
			const input = jobInterface.input_data.find(i => i.name === name);
			if (!input) {
				throw new FieldError(
					where,
					`"${name}" is not an input of job type "${job.job_type.name}" version "${job.job_type.version}"`
				);
			}
			if (feeds.has(name)) {
				throw new FieldError(
					where,
					`job input "${name}" is already fed by ${feeds.get(name)?.what} (${feeds.get(name)?.at})`
				);
			}
			return input;
		};

		job.recipe_inputs.forEach((conn, k) => {
			const connAt = `${at}.recipe_inputs[${k}]`;
			const source = inputs.get(conn.recipe_input);
			if (!source) {
				throw new FieldError(
					`${connAt}.recipe_input`,
					`"${conn.recipe_input}" names no input of the recipe`
				);
			}
			const target = jobInputOf(conn.job_input, `${connAt}.job_input`);
			const feed: Feed = {
				at: connAt.slice(field.length + 1),
				what: `recipe input "${source.name}"`,
				type: source.type,
				optional: !source.required,
				media_types: source.media_types?.length ? source.media_types : [UNKNOWN_MEDIA_TYPE]
			};
			checkFeed(feed, target, connAt, job.name, warnings);
			feeds.set(target.name, feed);
		});

		job.dependencies.forEach((dep, d) => {
			const depJob = jobs.get(dep.name) as RecipeJob;
			const depInterface = interfaces.get(dep.name) as JobInterface;
			dep.connections.forEach((conn, c) => {
				const connAt = `${at}.dependencies[${d}].connections[${c}]`;
				const output = depInterface.output_data.find(o => o.name === conn.output);
				if (!output) {
					throw new FieldError(
						`${connAt}.output`,
						`"${conn.output}" is not an output of job "${dep.name}" (job type ` +
							`"${depJob.job_type.name}" version "${depJob.job_type.version}")`
					);
				}
				const target = jobInputOf(conn.input, `${connAt}.input`);
				const feed: Feed = {
					at: connAt.slice(field.length + 1),
					what: `output "${output.name}" of job "${dep.name}"`,
					type: output.type,
					optional: !output.required,
					media_types: outputMediaTypes(output)
				};
				checkFeed(feed, target, connAt, job.name, warnings);
				feeds.set(target.name, feed);
			});
		});

		for (const input of jobInterface.input_data) {
			if (input.required && !feeds.has(input.name)) {
				throw new FieldError(
					at,
					`required input "${input.name}" of job type "${job.job_type.name}" version ` +
						`"${job.job_type.version}" is fed by no recipe input and no dependency connection`
				);
			}
		}
	});
	return { definition, warnings };
}

function normalise(given: Given): RecipeDefinition {
	return {
		version: RECIPE_DEFINITION_VERSION,
		input_data: (given.input_data ?? []).map(input => {
			const entry: InputEntry = {
				name: input.name,
				type: input.type,
				required: input.required ?? true
			};
			if (input.type !== "property") entry.media_types = [...(input.media_types ?? [])];
			else if (input.media_types) entry.media_types = [...input.media_types];
			return entry;
		}),
		jobs: given.jobs.map(job => ({
			name: job.name,
			job_type: { name: job.job_type.name, version: job.job_type.version },
			recipe_inputs: (job.recipe_inputs ?? []).map(c => ({
				recipe_input: c.recipe_input,
				job_input: c.job_input
			})),
			dependencies: (job.dependencies ?? []).map(dep => ({
				name: dep.name,
				connections: (dep.connections ?? []).map(c => ({
					output: c.output,
					input: c.input
				}))
			}))
		}))
	};
}

function outputMediaTypes(output: OutputEntry): string[] {
	return output.media_type ? [output.media_type] : [UNKNOWN_MEDIA_TYPE];
}

/**
 * Scale's JobConnection.validate_input_files / validate_properties for one connection: a property
 * feeds only a property; a file feeds a file or files input; files feed only a files input; an
 * optional source cannot feed a required input; media types the input does not accept are warnings.
 */
function checkFeed(
	feed: Feed,
	target: InputEntry,
	at: string,
	jobName: string,
	warnings: Warning[]
): void {
	const fits =
		feed.type === "property"
			? target.type === "property"
			: feed.type === "file"
				? target.type === "file" || target.type === "files"
				: target.type === "files";
	if (!fits) {
		throw new FieldError(
			at,
			`${feed.what} (${feed.type}) cannot feed job input "${target.name}" (${target.type})` +
				(feed.type === "files" && target.type === "file"
					? ": the input accepts a single file"
					: "")
		);
	}
	if (feed.optional && target.required) {
		throw new FieldError(
			at,
			`job input "${target.name}" is required but ${feed.what} is optional and may be absent`
		);
	}
	if (target.type === "property") return;
	const accepted = target.media_types ?? [];
	if (!accepted.length) return;
	for (const mediaType of feed.media_types) {
		if (!accepted.includes(mediaType)) {
			warnings.push({
				id: "media_type",
				details: `Invalid media type for data input: ${target.name} -> ${mediaType} (job ${jobName}, from ${feed.what})`
			});
		}
	}
}

/** A dependency cycle as job names (`a`, `b`, `a`: a depends on b, b on a), or null. */
function findCycle(jobs: RecipeJob[]): string[] | null {
	const byName = new Map(jobs.map(job => [job.name, job]));
	const done = new Set<string>();
	const path: string[] = [];
	const onPath = new Set<string>();
	const visit = (name: string): string[] | null => {
		if (onPath.has(name)) return [...path.slice(path.indexOf(name)), name];
		if (done.has(name)) return null;
		onPath.add(name);
		path.push(name);
		for (const dep of byName.get(name)?.dependencies ?? []) {
			const cycle = visit(dep.name);
			if (cycle) return cycle;
		}
		path.pop();
		onPath.delete(name);
		done.add(name);
		return null;
	};
	for (const job of jobs) {
		const cycle = visit(job.name);
		if (cycle) return cycle;
	}
	return null;
}

/**
 * The job types a definition names, once each in order of first mention, read tolerantly (no
 * validation: anything malformed is skipped), so a caller can load just those before parsing.
 */
export function referencedJobTypes(doc: unknown): JobTypeKey[] {
	const jobs = (doc as { jobs?: unknown } | null)?.jobs;
	if (!Array.isArray(jobs)) return [];
	const seen = new Set<string>();
	const keys: JobTypeKey[] = [];
	for (const job of jobs) {
		const jobType = (job as { job_type?: unknown } | null)?.job_type as
			{ name?: unknown; version?: unknown } | null | undefined;
		if (typeof jobType?.name !== "string" || typeof jobType.version !== "string") continue;
		const key = JSON.stringify([jobType.name, jobType.version]);
		if (seen.has(key)) continue;
		seen.add(key);
		keys.push({ name: jobType.name, version: jobType.version });
	}
	return keys;
}

/**
 * The job names in an order where every job comes after the jobs it depends on; among jobs that
 * are ready together, the definition's order. Throws (a plain Error) on a cycle, which a parsed
 * definition cannot have.
 */
export function topologicalOrder(def: Pick<RecipeDefinition, "jobs">): string[] {
	const waitingOn = new Map<string, Set<string>>(
		def.jobs.map(job => [job.name, new Set(job.dependencies.map(dep => dep.name))])
	);
	const order: string[] = [];
	while (order.length < def.jobs.length) {
		const ready = def.jobs.find(
			job => waitingOn.has(job.name) && (waitingOn.get(job.name) as Set<string>).size === 0
		);
		if (!ready) throw new Error("recipe definition has a dependency cycle");
		waitingOn.delete(ready.name);
		for (const deps of waitingOn.values()) deps.delete(ready.name);
		order.push(ready.name);
	}
	return order;
}
