import { mapExitCode } from "../documents/error-mapping";
import type { ErrorMapping } from "../documents/types";

/**
 * The failure rules (Scale 3.0's Queue.handle_job_failure and job_exe.py): which error an
 * execution failed with, and whether its job goes back on the queue.
 */

/** The built-in errors the scheduler records itself (seeded by migrations 0001 and 0026). */
export const ERRORS = {
	unknown: "unknown",
	algorithmUnknown: "algorithm-unknown",
	nodeLost: "node-lost",
	/** the node was draining (its agent shutting down, or a user's drain): see isFreeRetry */
	nodeShutdown: "node-shutdown",
	timeout: "timeout",
	taskLaunch: "task-launch"
} as const;

/**
 * The error name of a failed execution: the SYSTEM error the agent diagnosed (timeout,
 * task-launch ...) when it named one; else the exit code through the job type's error mapping,
 * `algorithm-unknown` when the code is not mapped; `unknown` when there is no exit code either.
 */
export function errorNameFor(
	failure: { errorName?: string | null; exitCode?: number | null },
	mapping: ErrorMapping | null | undefined
): string {
	if (failure.errorName) return failure.errorName;
	if (failure.exitCode !== null && failure.exitCode !== undefined) {
		const mapped = mapping ? mapExitCode(mapping, failure.exitCode) : null;
		return mapped ?? ERRORS.algorithmUnknown;
	}
	return ERRORS.unknown;
}

/**
 * Whether a failure is the node's leaving, not the job's: the job goes back on the queue whatever
 * its tries, and the try is not counted (its max_tries is raised with its num_exes).
 */
export function isFreeRetry(errorName: string): boolean {
	return errorName === ERRORS.nodeShutdown;
}

/**
 * Whether a failed job goes back on the queue: long-running types always do, and so does a job
 * whose node was shut down under it (isFreeRetry); otherwise only after a SYSTEM error while
 * tries remain (num_exes counts the execution that just failed).
 */
export function shouldRequeue(
	category: string,
	numExes: number,
	maxTries: number,
	isLongRunning: boolean,
	errorName = ""
): boolean {
	return isLongRunning || isFreeRetry(errorName) || (category === "SYSTEM" && numExes < maxTries);
}

/** The SYSTEM errors that say the node went away, not that it fails the work it runs. */
export const NODE_LEAVING_ERRORS: readonly string[] = [ERRORS.nodeLost, ERRORS.nodeShutdown];

/**
 * Whether a failure counts toward pausing its node: SYSTEM errors do, except `node-lost` and
 * `node-shutdown` (NODE_LEAVING_ERRORS).
 */
export function countsAgainstNode(category: string, errorName: string): boolean {
	return category === "SYSTEM" && !NODE_LEAVING_ERRORS.includes(errorName);
}

/** Moleculer error types that mean the agent could not be reached (it is gone or did not answer). */
const UNREACHABLE = new Set([
	"SERVICE_NOT_FOUND",
	"SERVICE_NOT_AVAILABLE",
	"REQUEST_TIMEOUT",
	"REQUEST_SKIPPED",
	"REQUEST_REJECTED",
	"BROKER_DISCONNECTED",
	"NODE_NOT_FOUND"
]);

/**
 * The error name for a failed `node-agent.run` call: `node-lost` when the agent could not be
 * reached, `task-launch` when it answered with an error of its own.
 */
export function runFailureError(error: unknown): string {
	const type = (error as { type?: string })?.type;
	if (type && UNREACHABLE.has(type)) return ERRORS.nodeLost;
	// the agent refused a sender that no longer leads: the run never started there
	if (type === "FORBIDDEN") return ERRORS.nodeLost;
	if ((error as { retryable?: boolean })?.retryable) return ERRORS.nodeLost;
	return ERRORS.taskLaunch;
}
