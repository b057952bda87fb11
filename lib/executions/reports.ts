import type { ExecutionFinished, ExecutionStep } from "../documents/agent-protocol";
import { ERRORS } from "./failure";
import { emptyResult } from "./finish";
import type { FailureRequest, FinishResult } from "./types";
import { isTransientDbError } from "../db/run";

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
		for (const jobId of result.recipeQueued)
			news.info({ jobId }, "recipe job queued (its dependencies completed)");
		news.emit("queue.changed", { count: result.recipeQueued.length });
	}
	if (result.parseEvents.length > 0)
		news.broadcast("trigger-events.created", { type: "PARSE", eventIds: result.parseEvents });
	if (result.pausedNodes.length > 0) {
		news.warn({ nodes: result.pausedNodes }, "nodes paused: too many system failures");
		news.broadcast("nodes.changed", { nodeIds: result.pausedNodes });
	}
}
