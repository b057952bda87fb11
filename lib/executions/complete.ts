import { buildJobResults, type JobResults } from "../documents/results";
import {
	insertProducts,
	linkAncestry,
	productRow,
	type AncestryEntry,
	type ProductRow,
	applyParseUpdates,
	moveSourceFiles,
	planParseUpdates,
	type ParseTarget,
	type RawParseResult
} from "../records/product";
import { lockRecipesSql, type HeldRecipeLocks } from "../recipes/run";
import type { FinishOptions, FinishResult, FailureRequest, EndingExe } from "./types";
import { type Sql, isTransientDbError } from "../db/run";
import type {
	ExecutionFinished,
	ExecutionStep,
	ProducedFile,
	Step
} from "../documents/agent-protocol";
import { INT4_MAX } from "../validation/ids";
import { ERRORS } from "./failure";
import { fileIdsIn } from "../documents/job-data";

/**
 * Completions, inside finishExecutions' transaction: the executions and their jobs COMPLETED,
 * their products stored with their ancestry, each execution's results document, and parse
 * results applied to the input source files; and the batches of agents' reports the scheduler
 * writes (writeReportBatch, below).
 */

/** The results document of an execution from the products stored per output. */
function resultsOf(exe: EndingExe, made: { output: string; id: number }[]): JobResults {
	return buildJobResults(
		(exe.interface?.output_data ?? []).map(o => ({
			name: o.name,
			multiple: o.type === "files",
			fileIds: made.filter(m => m.output === o.name).map(m => m.id)
		}))
	);
}

/**
 * Completes executions (and the jobs they end); answers the recipe locks it took: those of the
 * jobs it completed in its first statement.
 */
export async function complete(
	sql: Sql,
	completions: { exe: EndingExe; f: ExecutionFinished; products: ProducedFile[] }[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult,
	opts: FinishOptions,
	/** called once the completing statement is sent, to send more behind it */
	afterSending: () => void = () => undefined
): Promise<HeldRecipeLocks> {
	// The transition, with the jobs of executions that made no products (their results are
	// known already); those with products get their results once the products are stored.
	const ids = completions.map(c => c.exe.id);
	const final = completions.map(c => c.products.length === 0);
	const u = stepUnnest(ids, stepCols, [
		{
			name: "results",
			type: "jsonb",
			values: completions.map((c, i) =>
				final[i] ? JSON.stringify(resultsOf(c.exe, [])) : null
			)
		},
		{
			name: "manifest",
			type: "jsonb",
			values: completions.map(c =>
				c.f.resultsManifest === undefined || c.f.resultsManifest === null
					? null
					: JSON.stringify(c.f.resultsManifest)
			)
		},
		{ name: "final", type: "boolean", values: final }
	]);
	// Jobs are named by id (from the arrays, for the planner) among the executions updated.
	const jobIds = completions.map(c => c.exe.job_id);
	const completing = sql.query<{ id: number | null; job_id: number }>(
		`WITH e AS (
			UPDATE job_exe e SET status = 'COMPLETED', ended = now(), results = u.results,
				results_manifest = u.manifest, ${u.set}, last_modified = now()
			FROM ${u.from} WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
			RETURNING e.id, e.job_id, u.final
		),
		j AS (
			UPDATE job SET status = 'COMPLETED', ended = now(), last_status_change = now(),
				error_id = NULL, results = r.results, last_modified = now()
			FROM unnest($${u.binds.length + 1}::int[], $${u.binds.length + 2}::jsonb[])
				AS r(id, results)
			WHERE job.id = ANY($${u.binds.length + 1}::int[]) AND job.id = r.id
				AND job.id = ANY(ARRAY(SELECT job_id FROM e WHERE final))
				AND job.status = 'RUNNING'
			RETURNING job.id
		),
		-- their recipes locked here, after the updates (ARRAY(...) runs j to its end first), as
		-- advanceRecipes would lock them: a round trip less between A's completion and B's queueing
		l AS (${lockRecipesSql("ARRAY(SELECT id FROM j)")})
		SELECT id, job_id FROM e UNION ALL SELECT NULL, id FROM j
		UNION ALL SELECT -1, count(*)::int FROM l`,
		[...u.binds, jobIds, u.binds[1]]
	);
	afterSending();
	const rows = await completing;
	const won = rows.filter(r => r.id !== null && r.id >= 0) as { id: number; job_id: number }[];
	const locked = { jobs: new Set<number>(), recipes: 0 };
	for (const row of rows)
		if (row.id === null) {
			result.completedJobs.push(row.job_id);
			locked.jobs.add(row.job_id);
		} else if (row.id === -1) locked.recipes = row.job_id;
	const wonIds = new Set(won.map(w => w.id));
	for (const row of won) result.ended.add(row.id);
	const mine = completions.filter(c => wonIds.has(c.exe.id));

	// The input files, when products or parse results need them (operational flag, parse targets).
	const needInputs = mine.filter(
		c => c.products.length > 0 || (Array.isArray(c.f.parseResults) && c.f.parseResults.length)
	);
	const inputIds = [...new Set(needInputs.flatMap(c => fileIdsIn(c.exe.data)))];
	const files = new Map<number, any>();
	if (inputIds.length > 0) {
		const rows = await sql.query(
			`SELECT f.id, f.file_type, f.file_name, f.file_path, f.is_operational,
				(CASE WHEN w.json_config->'broker'->>'type' <> 's3' THEN w.json_config->'broker'->>'host_path' END)
					AS workspace_host_path, w.is_move_enabled
			 FROM scale_file f JOIN workspace w ON w.id = f.workspace_id
			 WHERE f.id = ANY($1::int[])`,
			[inputIds]
		);
		for (const row of rows) files.set(row.id, row);
	}

	// Products, in the order given, then each execution's results document.
	const productRows: ProductRow[] = [];
	for (const { exe, products } of mine) {
		const inputs = fileIdsIn(exe.data)
			.map(id => files.get(id))
			.filter(Boolean);
		const operational =
			exe.is_operational && inputs.every(f => f.file_type !== "PRODUCT" || f.is_operational);
		for (const product of products)
			productRows.push(
				productRow(
					{
						jobExeId: exe.id,
						jobId: exe.job_id,
						jobTypeId: exe.job_type_id,
						jobTypeName: exe.name,
						jobTypeVersion: exe.version,
						isOperational: operational,
						jobData: exe.data,
						iface: exe.interface!
					},
					product
				)
			);
	}
	const productIds = await insertProducts(sql, productRows);
	const byExe = new Map<number, { output: string; id: number }[]>();
	productRows.forEach((row, i) => {
		const list = byExe.get(row.job_exe_id) ?? [];
		list.push({ output: row.output_name, id: productIds[i] });
		byExe.set(row.job_exe_id, list);
	});
	const ancestry: AncestryEntry[] = mine.map(({ exe }) => ({
		jobExeId: exe.id,
		jobId: exe.job_id,
		inputFileIds: fileIdsIn(exe.data),
		productIds: (byExe.get(exe.id) ?? []).map(m => m.id)
	}));
	await linkAncestry(sql, ancestry);

	const withProducts = mine.filter(c => c.products.length > 0);
	if (withProducts.length > 0) {
		const docs = withProducts.map(c =>
			JSON.stringify(resultsOf(c.exe, byExe.get(c.exe.id) ?? []))
		);
		await sql.query(
			`UPDATE job_exe e SET results = u.results
			 FROM unnest($1::int[], $2::jsonb[]) AS u(id, results)
			 WHERE e.id = ANY($1::int[]) AND e.id = u.id`,
			[withProducts.map(c => c.exe.id), docs]
		);
		const done = await sql.query<{ id: number }>(
			`UPDATE job SET status = 'COMPLETED', ended = now(), last_status_change = now(),
				error_id = NULL, results = u.results, last_modified = now()
			 FROM unnest($1::int[], $2::jsonb[]) AS u(id, results)
			 WHERE job.id = ANY($1::int[]) AND job.id = u.id AND job.status = 'RUNNING'
			 RETURNING job.id`,
			[withProducts.map(c => c.exe.job_id), docs]
		);
		result.completedJobs.push(...done.map(r => r.id));
	}

	// parse_results: applied to the job's input source files.
	const updates = needInputs.flatMap(({ exe, f }) => {
		if (!Array.isArray(f.parseResults) || f.parseResults.length === 0) return [];
		const sources: ParseTarget[] = fileIdsIn(exe.data)
			.map(id => files.get(id))
			.filter(file => file && file.file_type === "SOURCE");
		return planParseUpdates(f.parseResults as RawParseResult[], sources);
	});
	if (updates.length > 0) {
		const sources = [...files.values()].filter(f => f.file_type === "SOURCE") as ParseTarget[];
		const moves = await moveSourceFiles(updates, sources, opts.warn ?? (() => undefined));
		opts.moves?.push(...moves);
		result.parseEvents.push(...(await applyParseUpdates(sql, updates)));
	}
	return locked;
}

/**
 * The step columns of an execution (pre, main and post: started, completed, exit code, and the
 * command line) as the agents' reports give them, and as SQL for the set-based statements of
 * lib/executions/finish.ts.
 */

export interface StepColumns {
	pre_started: string | null;
	pre_completed: string | null;
	pre_exit_code: number | null;
	job_started: string | null;
	job_completed: string | null;
	job_exit_code: number | null;
	post_started: string | null;
	post_completed: string | null;
	post_exit_code: number | null;
	command_arguments: string | null;
}

const PREFIX: Record<Step, "pre" | "job" | "post"> = { pre: "pre", main: "job", post: "post" };

function emptySteps(): StepColumns {
	return {
		pre_started: null,
		pre_completed: null,
		pre_exit_code: null,
		job_started: null,
		job_completed: null,
		job_exit_code: null,
		post_started: null,
		post_completed: null,
		post_exit_code: null,
		command_arguments: null
	};
}

function isTime(value: unknown): value is string {
	return typeof value === "string" && !Number.isNaN(Date.parse(value));
}

function exitCode(value: unknown): number | null {
	return Number.isInteger(value) && Math.abs(value as number) <= INT4_MAX
		? (value as number)
		: null;
}

/** The step columns the reports give, per execution (later reports win). */
export function collectSteps(
	steps: readonly ExecutionStep[],
	finished: readonly ExecutionFinished[]
): Map<number, StepColumns> {
	const out = new Map<number, StepColumns>();
	const get = (id: number) => {
		let cols = out.get(id);
		if (!cols) out.set(id, (cols = emptySteps()));
		return cols;
	};
	for (const s of steps) {
		const prefix = PREFIX[s.step];
		if (!prefix) continue;
		const cols = get(s.jobExeId) as any;
		if (isTime(s.at))
			cols[`${prefix}_${s.event === "started" ? "started" : "completed"}`] = s.at;
		const code = exitCode(s.exitCode);
		if (s.event === "completed" && code !== null) cols[`${prefix}_exit_code`] = code;
		if (typeof s.commandArguments === "string") cols.command_arguments = s.commandArguments;
	}
	for (const f of finished) {
		const cols = get(f.jobExeId) as any;
		for (const [step, times] of Object.entries(f.steps ?? {})) {
			const prefix = PREFIX[step as Step];
			if (!prefix || !times) continue;
			if (isTime(times.started)) cols[`${prefix}_started`] = times.started;
			if (isTime(times.completed)) cols[`${prefix}_completed`] = times.completed;
			const code = exitCode(times.exitCode);
			if (code !== null) cols[`${prefix}_exit_code`] = code;
		}
		const main = exitCode(f.exitCode);
		if (main !== null) cols.job_exit_code = main;
		if (typeof f.commandArguments === "string") cols.command_arguments = f.commandArguments;
	}
	return out;
}

/** The step columns as SQL: unnest types, column names, and the SET list (`u` over `e`). */
const STEP_KEYS = [
	["pre_started", "timestamptz"],
	["pre_completed", "timestamptz"],
	["pre_exit_code", "int"],
	["job_started", "timestamptz"],
	["job_completed", "timestamptz"],
	["job_exit_code", "int"],
	["post_started", "timestamptz"],
	["post_completed", "timestamptz"],
	["post_exit_code", "int"],
	["command_arguments", "text"]
] as const;

/**
 * A `WITH u AS (...)`-ready unnest of `ids` and the step columns, after `extra` columns of
 * the caller: answers the SQL of the unnest, the SET list for the step columns, and the binds.
 * The report's values win, except in `fill` mode, where only columns still unset are filled
 * (and `changes` is true only where that fills something).
 */
export function stepUnnest(
	ids: number[],
	steps: Map<number, StepColumns>,
	extra: { name: string; type: string; values: unknown[] }[] = [],
	mode: "report" | "fill" = "report"
): { from: string; set: string; changes: string; binds: unknown[] } {
	const cols = [
		{ name: "id", type: "int", values: ids },
		...extra,
		...STEP_KEYS.map(([name, type]) => ({
			name,
			type,
			values: ids.map(id => steps.get(id)?.[name] ?? null)
		}))
	];
	return {
		from: `unnest(${cols.map((c, i) => `$${i + 1}::${c.type}[]`).join(", ")}) AS u(${cols
			.map(c => c.name)
			.join(", ")})`,
		set: STEP_KEYS.map(([name]) => `${name} = ${filled(name, mode)}`).join(", "),
		changes: STEP_KEYS.map(([name]) => `e.${name} IS DISTINCT FROM ${filled(name, mode)}`).join(
			" OR "
		),
		binds: cols.map(c => c.values)
	};
}

/**
 * A step column's new value. When filling in, the times and exit codes already recorded stay;
 * the command line is the report's all the same, because the claim recorded the interface's
 * template there and the report has the substituted line (which a step event would have set).
 */
function filled(name: (typeof STEP_KEYS)[number][0], mode: "report" | "fill"): string {
	return mode === "fill" && name !== "command_arguments"
		? `coalesce(e.${name}, u.${name})`
		: `coalesce(u.${name}, e.${name})`;
}

/** A FinishResult of nothing done. */
export function emptyResult(): FinishResult {
	return {
		stepped: new Set(),
		ended: new Set(),
		completedJobs: [],
		failedJobs: [],
		requeuedJobs: [],
		canceledJobs: [],
		pausedNodes: [],
		parseEvents: [],
		recipeQueued: [],
		handedOff: [],
		notes: [],
		jobTypes: new Map(),
		failureCategories: new Map()
	};
}

/** What the scheduler writes in its reports' transactions: agents' steps and ends, its failures. */
export type ReportItem =
	| { kind: "step"; step: ExecutionStep }
	| { kind: "finished"; finished: ExecutionFinished }
	| { kind: "failure"; failure: FailureRequest };

/** Adds what `from` did to `into`. */
export function mergeResults(into: FinishResult, from: FinishResult): FinishResult {
	for (const id of from.stepped) into.stepped.add(id);
	for (const id of from.ended) into.ended.add(id);
	into.completedJobs.push(...from.completedJobs);
	into.failedJobs.push(...from.failedJobs);
	into.requeuedJobs.push(...from.requeuedJobs);
	into.canceledJobs.push(...from.canceledJobs);
	into.pausedNodes.push(...from.pausedNodes);
	into.parseEvents.push(...from.parseEvents);
	into.recipeQueued.push(...from.recipeQueued);
	into.handedOff.push(...from.handedOff);
	into.notes.push(...from.notes);
	for (const [k, v] of from.jobTypes) into.jobTypes.set(k, v);
	for (const [k, v] of from.failureCategories) into.failureCategories.set(k, v);
	return into;
}

/**
 * Writes `items` in one transaction (`write`). If that fails for a reason other than a transient
 * one (a value the database refuses), one bad report must not hold the others back: each is
 * written alone, and a completion that still cannot be written fails its execution instead
 * (`unwritable` is told), so the agent's retries do not loop forever. Answers what was done and
 * the items left failed (by index, with their errors); a transient failure, or one of a single
 * item, is thrown.
 */
export async function writeReportBatch(
	items: ReportItem[],
	write: (items: ReportItem[]) => Promise<FinishResult>,
	unwritable: (jobExeId: number, error: unknown) => void
): Promise<{ result: FinishResult; failed: Map<number, unknown> }> {
	try {
		return { result: await write(items), failed: new Map() };
	} catch (error) {
		if (items.length === 1 || isTransientDbError(error)) throw error;
	}
	const result = emptyResult();
	const failed = new Map<number, unknown>();
	for (const [i, item] of items.entries()) {
		try {
			mergeResults(result, await write([item]));
		} catch (single) {
			failed.set(i, single);
		}
	}
	for (const [i, single] of failed) {
		const item = items[i];
		if (item.kind !== "finished" || isTransientDbError(single)) continue;
		unwritable(item.finished.jobExeId, single);
		try {
			const failure = { jobExeId: item.finished.jobExeId, errorName: ERRORS.unknown };
			mergeResults(result, await write([{ kind: "failure", failure }]));
			failed.delete(i);
		} catch {
			// left failed: the agent will report it again
		}
	}
	return { result, failed };
}

/** Where the news of written reports goes: the service's logger and broker, and its wake-up. */
export interface ReportNews {
	info(fields: Record<string, unknown>, message: string): void;
	warn(fields: Record<string, unknown>, message: string): void;
	/** to every node (each replica keeps its own caches and loops) */
	broadcast(event: string, payload: Record<string, unknown>): void;
	/** to one node per service (a single wake-up suffices) */
	emit(event: string, payload: Record<string, unknown>): void;
	/** wakes the leading scheduler: resources were freed or jobs requeued */
	wakeScheduler(): void;
}

/**
 * Tells what the written reports changed: a log line per job that ended, was requeued or was
 * queued by its recipe, and the events others act on (hints; the database has it all).
 */
export function announceReports(result: FinishResult, news: ReportNews): void {
	for (const note of result.notes) news.warn({}, note);
	if (result.ended.size > 0 || result.requeuedJobs.length > 0) news.wakeScheduler();
	const jobs = [
		...result.completedJobs.map(id => ({ id, status: "COMPLETED" })),
		...result.failedJobs.map(id => ({ id, status: "FAILED" })),
		...result.canceledJobs.map(id => ({ id, status: "CANCELED" }))
	];
	for (const job of jobs) news.info({ jobId: job.id, status: job.status }, "job ended");
	for (const jobId of result.requeuedJobs)
		news.info({ jobId }, "job requeued (a new execution is queued)");
	if (result.recipeQueued.length > 0) {
		const handed = new Map(result.handedOff.map(p => [p.job_id, p]));
		for (const jobId of result.recipeQueued) {
			const placed = handed.get(jobId);
			if (placed)
				news.info(
					{ jobId, jobExeId: placed.id, nodeId: placed.node_id },
					"recipe job queued (its dependencies completed) and placed in the room they freed"
				);
			else news.info({ jobId }, "recipe job queued (its dependencies completed)");
		}
		const waiting = result.recipeQueued.length - handed.size;
		if (waiting > 0) news.emit("queue.changed", { count: waiting });
	}
	if (result.parseEvents.length > 0)
		news.broadcast("trigger-events.created", { type: "PARSE", eventIds: result.parseEvents });
	if (result.pausedNodes.length > 0) {
		news.warn({ nodes: result.pausedNodes }, "nodes paused: too many system failures");
		news.broadcast("nodes.changed", { nodeIds: result.pausedNodes });
	}
}
