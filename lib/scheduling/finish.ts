import type { ExecutionFinished, ExecutionStep, ProducedFile, Step } from "../agent/protocol";
import { buildJobResults, type JobResults } from "../documents/job-results";
import type { ErrorMapping, JobInterface } from "../documents/types";
import {
	checkProducts,
	insertProducts,
	linkAncestry,
	productRow,
	type AncestryEntry,
	type ProductRow
} from "../models/product";
import { countsAgainstNode, ERRORS, errorNameFor, shouldRequeue } from "./failure";
import {
	applyParseUpdates,
	moveSourceFiles,
	planParseUpdates,
	type FileMove,
	type ParseTarget,
	type RawParseResult
} from "./parse";
import type { Sql } from "./sql";
import { advanceRecipes, blockRecipeJobs, lockRecipesSql } from "../recipes/run";

/**
 * The end of executions, many at once, inside the caller's transaction: step times, completions
 * (products, ancestry, results, parse results), failures (error, retry or end) and cancellations.
 * Every transition is guarded on RUNNING (re-checked under the row lock), so a repeated or late message changes
 * nothing. Statements are set-based: a flush of hundreds of executions costs a handful of them.
 *
 * One kind of late report still counts: the agent's report of an execution a user canceled while
 * it ran. The cancel ended it in the REST transaction (lib/queue/cancel.ts) before the agent
 * killed the process, so the report is the only carrier of its logs and step times; they are
 * filled in, its status and its job's are left alone.
 */

/** A failure the control plane itself decides (a lost node, a run call that failed). */
export interface FailureRequest {
	jobExeId: number;
	errorName: string;
	detail?: string | null;
}

export interface FinishInput {
	steps?: readonly ExecutionStep[];
	finished?: readonly ExecutionFinished[];
	failures?: readonly FailureRequest[];
}

export interface FinishResult {
	/** executions whose step reports were recorded (they were RUNNING) */
	stepped: Set<number>;
	/** executions this call ended, whatever the outcome */
	ended: Set<number>;
	completedJobs: number[];
	failedJobs: number[];
	requeuedJobs: number[];
	canceledJobs: number[];
	/** nodes paused for too many SYSTEM failures */
	pausedNodes: number[];
	/** PARSE trigger events recorded */
	parseEvents: number[];
	/** recipe jobs these completions freed, queued */
	recipeQueued: number[];
	/** why some completions were turned into failures, and other notes for the log */
	notes: string[];
}

export interface FinishOptions {
	/** files moved by parse results are added here, so the caller can move them back on rollback */
	moves?: FileMove[];
	warn?: (message: string) => void;
}

interface EndingExe {
	id: number;
	/** the agent running it: a report from another agent ends nothing */
	agent_id: string | null;
	job_id: number;
	node_id: number | null;
	num_exes: number;
	max_tries: number;
	job_type_id: number;
	name: string;
	version: string;
	is_operational: boolean;
	is_long_running: boolean;
	data: any;
	interface: JobInterface | null;
	error_mapping: ErrorMapping | null;
}

interface StepColumns {
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
	return Number.isInteger(value) && Math.abs(value as number) <= 2147483647
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

/** Text PostgreSQL can store (no NUL). */
function storable(text: unknown): string {
	return typeof text === "string" ? text.split("\u0000").join("") : "";
}

function inputFileIds(data: any): number[] {
	const ids: number[] = [];
	for (const input of data?.input_data ?? []) {
		if (Number.isInteger(input.file_id)) ids.push(input.file_id);
		for (const id of input.file_ids ?? []) if (Number.isInteger(id)) ids.push(id);
	}
	return [...new Set(ids)];
}

/** Product files deduplicated by where they are: the same file reported twice is one product. */
function distinctProducts(products: readonly ProducedFile[]): ProducedFile[] {
	const seen = new Set<string>();
	return products.filter(p => {
		const key = `${p.workspaceId}\u0000${p.filePath}\u0000${p.fileName}`;
		if (seen.has(key)) return false;
		seen.add(key);
		return true;
	});
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
function stepUnnest(
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
		notes: []
	};
}

export async function finishExecutions(
	sql: Sql,
	input: FinishInput,
	opts: FinishOptions = {}
): Promise<FinishResult> {
	const steps = input.steps ?? [];
	const finished = input.finished ?? [];
	const failures = input.failures ?? [];
	const result = emptyResult();
	const endingSet = new Set([...finished.map(f => f.jobExeId), ...failures.map(f => f.jobExeId)]);
	const ending = [...endingSet];
	const stepCols = collectSteps(steps, finished);

	// Step reports of executions that go on running: their columns only.
	const stepOnly = [...stepCols.keys()].filter(id => !endingSet.has(id));
	if (stepOnly.length > 0) {
		const reporter = new Map(steps.map(s => [s.jobExeId, s.agentId]));
		const u = stepUnnest(stepOnly, stepCols, [
			{ name: "agent_id", type: "text", values: stepOnly.map(id => reporter.get(id) ?? null) }
		]);
		const rows = await sql.query<{ id: number }>(
			`UPDATE job_exe e SET ${u.set}, last_modified = now() FROM ${u.from}
			 WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
				AND e.agent_id = u.agent_id RETURNING e.id`,
			u.binds
		);
		for (const row of rows) result.stepped.add(row.id);
	}
	if (ending.length === 0) return result;

	// What the endings need to know. No lock: every transition below is guarded on RUNNING
	// (PostgreSQL re-checks the guard under the row lock), and later work follows only the
	// executions whose transition this transaction made.
	const rows = await sql.query<EndingExe>(
		`SELECT e.id, e.agent_id, e.job_id, e.node_id, j.num_exes, j.max_tries, j.job_type_id, t.name,
			t.version, t.is_operational, t.is_long_running, j.data, r.interface, t.error_mapping
		 FROM job_exe e JOIN job j ON j.id = e.job_id JOIN job_type t ON t.id = j.job_type_id
			JOIN job_type_rev r ON r.id = j.job_type_rev_id
		 WHERE e.id = ANY($1::int[]) AND e.status = 'RUNNING'`,
		[ending]
	);
	const running = new Map(rows.map(l => [l.id, l]));

	// Sort the endings: completions, failures (with their error name) and cancellations.
	const completions: { exe: EndingExe; f: ExecutionFinished; products: ProducedFile[] }[] = [];
	const failing: { exe: EndingExe; errorName: string }[] = [];
	const canceling: EndingExe[] = [];
	const taken = new Set<number>();
	const take = (id: number): EndingExe | null => {
		const exe = running.get(id);
		if (!exe || taken.has(id)) return null;
		taken.add(id);
		return exe;
	};
	for (const f of finished) {
		if (running.get(f.jobExeId)?.agent_id !== f.agentId) continue;
		const exe = take(f.jobExeId);
		if (!exe) continue;
		if (f.status === "COMPLETED") {
			const products = distinctProducts(Array.isArray(f.products) ? f.products : []);
			const problem = exe.interface ? checkProducts(exe.interface, exe.data, products) : null;
			if (problem) {
				result.notes.push(`job_exe ${exe.id}: outputs refused: ${problem}`);
				failing.push({ exe, errorName: ERRORS.algorithmUnknown });
			} else completions.push({ exe, f, products });
		} else if (f.status === "CANCELED") {
			canceling.push(exe);
		} else {
			failing.push({ exe, errorName: errorNameFor(f, exe.error_mapping) });
		}
	}
	for (const failure of failures) {
		const exe = take(failure.jobExeId);
		if (exe) failing.push({ exe, errorName: failure.errorName || ERRORS.unknown });
	}

	// jobs whose recipes this transaction has locked
	const locked =
		completions.length > 0
			? await complete(sql, completions, stepCols, result, opts)
			: new Set<number>();
	if (failing.length > 0) await fail(sql, failing, stepCols, result);
	if (canceling.length > 0) await cancel(sql, canceling, stepCols, result);
	// Recipes, in the same transaction: the jobs these completions free are queued, and the
	// never-queued dependents of jobs ended for good are blocked (lib/recipes/run.ts).
	if (result.completedJobs.length > 0)
		result.recipeQueued = (await advanceRecipes(sql, result.completedJobs, locked)).queued;
	const stopped = [...result.failedJobs, ...result.canceledJobs];
	if (stopped.length > 0) await blockRecipeJobs(sql, stopped);
	for (const s of steps) if (result.ended.has(s.jobExeId)) result.stepped.add(s.jobExeId);

	// Logs of every execution that ended here (from its first report, as above).
	const logged = new Set<number>();
	const logs = finished.filter(f => {
		if (!result.ended.has(f.jobExeId) || logged.has(f.jobExeId)) return false;
		logged.add(f.jobExeId);
		return !!(storable(f.stdout) || storable(f.stderr));
	});
	if (logs.length > 0) {
		await sql.query(
			`INSERT INTO job_exe_log (job_exe_id, stdout, stderr)
			 SELECT * FROM unnest($1::int[], $2::text[], $3::text[])
			 ON CONFLICT (job_exe_id) DO UPDATE SET stdout = EXCLUDED.stdout,
				stderr = EXCLUDED.stderr, last_modified = now()`,
			[
				logs.map(f => f.jobExeId),
				logs.map(f => storable(f.stdout)),
				logs.map(f => storable(f.stderr))
			]
		);
	}

	// Reports of executions that did not end here: those canceled while they ran still bring
	// their logs and step times (the others were ended by something else, or are repeats).
	const seen = new Set<number>();
	const late = finished.filter(f => {
		if (result.ended.has(f.jobExeId) || seen.has(f.jobExeId)) return false;
		seen.add(f.jobExeId);
		return true;
	});
	if (late.length > 0) await fillInCanceled(sql, late, stepCols);
	return result;
}

/**
 * Fills in what an agent's report says of executions that are CANCELED already and ran on that
 * agent (checked in each statement, so another agent's report, or one of an execution that ended
 * otherwise, changes nothing): the step columns not yet recorded, and its logs unless some are
 * kept already. Neither its status nor its job's change, and a repeat finds nothing to fill.
 * CANCELED is final (nothing moves an execution out of it), so the check needs no lock first.
 */
async function fillInCanceled(
	sql: Sql,
	reports: ExecutionFinished[],
	stepCols: Map<number, StepColumns>
): Promise<void> {
	const ids = reports.map(f => f.jobExeId);
	const agents = reports.map(f => (typeof f.agentId === "string" ? f.agentId : null));
	const u = stepUnnest(
		ids,
		stepCols,
		[{ name: "agent_id", type: "text", values: agents }],
		"fill"
	);
	await sql.query(
		`UPDATE job_exe e SET ${u.set}, last_modified = now() FROM ${u.from}
		 WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'CANCELED'
			AND e.agent_id = u.agent_id AND (${u.changes})`,
		u.binds
	);
	const logs = reports.filter(f => storable(f.stdout) || storable(f.stderr));
	if (logs.length === 0) return;
	await sql.query(
		`INSERT INTO job_exe_log (job_exe_id, stdout, stderr)
		 SELECT u.id, u.stdout, u.stderr
		 FROM unnest($1::int[], $2::text[], $3::text[], $4::text[]) AS u(id, agent_id, stdout, stderr)
			JOIN job_exe e ON e.id = u.id
		 WHERE e.id = ANY($1::int[]) AND e.status = 'CANCELED' AND e.agent_id = u.agent_id
		 ON CONFLICT (job_exe_id) DO NOTHING`,
		[
			logs.map(f => f.jobExeId),
			logs.map(f => (typeof f.agentId === "string" ? f.agentId : null)),
			logs.map(f => storable(f.stdout)),
			logs.map(f => storable(f.stderr))
		]
	);
}

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

/** Completes executions (and the jobs they end); answers the jobs whose recipes it locked. */
async function complete(
	sql: Sql,
	completions: { exe: EndingExe; f: ExecutionFinished; products: ProducedFile[] }[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult,
	opts: FinishOptions
): Promise<Set<number>> {
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
	const rows = await sql.query<{ id: number | null; job_id: number }>(
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
	const won = rows.filter(r => r.id !== null && r.id >= 0) as { id: number; job_id: number }[];
	const locked = new Set<number>();
	for (const row of rows)
		if (row.id === null) {
			result.completedJobs.push(row.job_id);
			locked.add(row.job_id);
		}
	const wonIds = new Set(won.map(w => w.id));
	for (const row of won) result.ended.add(row.id);
	const mine = completions.filter(c => wonIds.has(c.exe.id));

	// The input files, when products or parse results need them (operational flag, parse targets).
	const needInputs = mine.filter(
		c => c.products.length > 0 || (Array.isArray(c.f.parseResults) && c.f.parseResults.length)
	);
	const inputIds = [...new Set(needInputs.flatMap(c => inputFileIds(c.exe.data)))];
	const files = new Map<number, any>();
	if (inputIds.length > 0) {
		const rows = await sql.query(
			`SELECT f.id, f.file_type, f.file_name, f.file_path, f.is_operational,
				w.json_config->'broker'->>'host_path' AS workspace_host_path, w.is_move_enabled
			 FROM scale_file f JOIN workspace w ON w.id = f.workspace_id
			 WHERE f.id = ANY($1::int[])`,
			[inputIds]
		);
		for (const row of rows) files.set(row.id, row);
	}

	// Products, in the order given, then each execution's results document.
	const productRows: ProductRow[] = [];
	for (const { exe, products } of mine) {
		const inputs = inputFileIds(exe.data)
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
		inputFileIds: inputFileIds(exe.data),
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
		const sources: ParseTarget[] = inputFileIds(exe.data)
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

async function fail(
	sql: Sql,
	failing: { exe: EndingExe; errorName: string }[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult
): Promise<void> {
	const names = [...new Set([...failing.map(f => f.errorName), ERRORS.unknown])];
	const errors = new Map(
		(
			await sql.query<{ id: number; name: string; category: string }>(
				"SELECT id, name, category FROM error WHERE name = ANY($1::text[])",
				[names]
			)
		).map(e => [e.name, e])
	);
	const decided = failing.map(({ exe, errorName }) => {
		const error = errors.get(errorName) ?? errors.get(ERRORS.unknown)!;
		return {
			exe,
			error,
			requeue: shouldRequeue(error.category, exe.num_exes, exe.max_tries, exe.is_long_running)
		};
	});

	const u = stepUnnest(
		decided.map(d => d.exe.id),
		stepCols,
		[{ name: "error_id", type: "int", values: decided.map(d => d.error.id) }]
	);
	const ended = await sql.query<{ id: number }>(
		`UPDATE job_exe e SET status = 'FAILED', ended = now(), error_id = u.error_id, ${u.set},
			last_modified = now()
		 FROM ${u.from} WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
		 RETURNING e.id`,
		u.binds
	);
	const endedIds = new Set(ended.map(r => r.id));
	for (const id of endedIds) result.ended.add(id);
	const live = decided.filter(d => endedIds.has(d.exe.id));

	const final = live.filter(d => !d.requeue);
	if (final.length > 0) {
		const rows = await sql.query<{ id: number }>(
			`UPDATE job j SET status = 'FAILED', error_id = u.error_id, ended = now(),
				last_status_change = now(), last_modified = now()
			 FROM unnest($1::int[], $2::int[]) AS u(id, error_id)
			 WHERE j.id = ANY($1::int[]) AND j.id = u.id AND j.status = 'RUNNING' RETURNING j.id`,
			[final.map(d => d.exe.job_id), final.map(d => d.error.id)]
		);
		result.failedJobs.push(...rows.map(r => r.id));
	}

	const again = live.filter(d => d.requeue);
	if (again.length > 0) {
		// The old execution ended above (the one-live-execution index is checked per statement).
		// Guarded on RUNNING: a job canceled meanwhile is not requeued. The job row stays locked
		// from here to the commit, with the new execution and queue row made under that lock,
		// which is what lets a concurrent cancel find them (lib/queue/cancel.ts).
		const jobs = await sql.query<{
			id: number;
			timeout: number;
			priority: number;
			job_type_id: number;
			cpus: number;
			mem: number;
			disk_in: number;
			disk_out: number;
		}>(
			`UPDATE job j SET status = 'QUEUED', error_id = NULL, num_exes = j.num_exes + 1,
				queued = now(), started = NULL, ended = NULL, last_status_change = now(),
				last_modified = now()
			 FROM job_type t
			 WHERE j.id = ANY($1::int[]) AND j.status = 'RUNNING' AND t.id = j.job_type_id
			 RETURNING j.id, j.timeout, j.priority, j.job_type_id,
				coalesce(j.cpus_required, t.cpus_required) AS cpus,
				coalesce(j.mem_required, t.mem_required) AS mem,
				coalesce(j.disk_in_required, 0) AS disk_in,
				coalesce(j.disk_out_required, t.disk_out_const_required) AS disk_out`,
			[again.map(d => d.exe.job_id)]
		);
		if (jobs.length > 0) {
			jobs.sort((a, b) => a.id - b.id);
			// Ids first, so the queue rows need no join back to the new executions.
			const ids = (
				await sql.query<{ id: number }>(
					"SELECT nextval('job_exe_id_seq')::int AS id FROM generate_series(1, $1::int)",
					[jobs.length]
				)
			).map(r => r.id);
			await sql.query(
				`INSERT INTO job_exe (id, job_id, job_type_id, status, timeout, queued)
				 SELECT id, job_id, job_type_id, 'QUEUED', timeout, now()
				 FROM unnest($1::int[], $2::int[], $3::int[], $4::int[])
					AS u(id, job_id, job_type_id, timeout)`,
				[ids, jobs.map(j => j.id), jobs.map(j => j.job_type_id), jobs.map(j => j.timeout)]
			);
			const n = (k: keyof (typeof jobs)[number]) => jobs.map(j => Number(j[k]));
			await sql.query(
				`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
					mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
				 SELECT exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out,
					disk_in + disk_out, now()
				 FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::float8[],
					$6::float8[], $7::float8[], $8::float8[])
					AS u(exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out)`,
				[
					ids,
					n("id"),
					n("job_type_id"),
					n("priority"),
					n("cpus"),
					n("mem"),
					n("disk_in"),
					n("disk_out")
				]
			);
			result.requeuedJobs.push(...jobs.map(j => j.id));
		}
	}

	// A node with too many SYSTEM failures in the configured window is paused.
	const suspects = [
		...new Set(
			live
				.filter(
					d => d.exe.node_id !== null && countsAgainstNode(d.error.category, d.error.name)
				)
				.map(d => d.exe.node_id as number)
		)
	].sort((a, b) => a - b);
	if (suspects.length > 0) {
		const paused = await sql.query<{ id: number }>(
			`UPDATE node n SET is_paused = true, is_paused_errors = true,
				pause_reason = 'System Failure Rate Too High', last_modified = now()
			 FROM scheduler s
			 WHERE s.id = 1 AND n.id = ANY($1::int[]) AND NOT n.is_paused
			   AND (SELECT count(*) FROM job_exe e JOIN error er ON er.id = e.error_id
					WHERE e.node_id = n.id AND e.status = 'FAILED' AND er.category = 'SYSTEM'
					  AND er.name <> $2
					  AND e.last_modified >= now() - make_interval(mins => s.node_error_period)
					  AND e.ended >= now() - make_interval(mins => s.node_error_period)
				   ) >= s.max_node_errors
			 RETURNING n.id`,
			[suspects, ERRORS.nodeLost]
		);
		result.pausedNodes.push(...paused.map(r => r.id));
	}
}

async function cancel(
	sql: Sql,
	canceling: EndingExe[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult
): Promise<void> {
	const u = stepUnnest(
		canceling.map(c => c.id),
		stepCols
	);
	const rows = await sql.query<{ id: number | null; job_id: number }>(
		`WITH e AS (
			UPDATE job_exe e SET status = 'CANCELED', ended = now(), ${u.set}, last_modified = now()
			FROM ${u.from} WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
			RETURNING e.id, e.job_id
		),
		j AS (
			UPDATE job SET status = 'CANCELED', ended = now(), last_status_change = now(),
				last_modified = now()
			WHERE job.id = ANY($${u.binds.length + 1}::int[])
				AND job.id = ANY(ARRAY(SELECT job_id FROM e)) AND job.status = 'RUNNING'
			RETURNING job.id
		)
		SELECT id, job_id FROM e UNION ALL SELECT NULL, id FROM j`,
		[...u.binds, canceling.map(c => c.job_id)]
	);
	for (const row of rows) {
		if (row.id !== null) result.ended.add(row.id);
		else result.canceledJobs.push(row.job_id);
	}
}
