import type { ExecutionFinished, ExecutionStep } from "../agent/protocol";
import { ERRORS } from "./failure";
import { emptyResult, type FailureRequest, type FinishResult } from "./finish";
import { isTransientDbError } from "./sql";

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
	into.notes.push(...from.notes);
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
