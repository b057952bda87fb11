import type { ExecutionFinished, ExecutionStep } from "../documents/agent-protocol";
import type { FileMove } from "./parse";
import type { PlacedExecutions } from "./placed-executions";

/** What ending executions takes and answers, shared by finish.ts, complete.ts and reports.ts. */

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
	/** job id → "name:version" of every job whose execution ended here (for the metrics) */
	jobTypes: Map<number, string>;
	/** job id → error category of the jobs FAILED here */
	failureCategories: Map<number, string>;
}

export interface FinishOptions {
	/** what the scheduler knows of the executions it placed: spares the endings' read */
	placed?: PlacedExecutions;
	/** files moved by parse results are added here, so the caller can move them back on rollback */
	moves?: FileMove[];
	warn?: (message: string) => void;
}
