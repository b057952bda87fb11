import type { ExecutionFinished, ExecutionStep, Step } from "../documents/agent-protocol";
import { INT4_MAX } from "../validation/ids";

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
