import type { ExecutionFinished, ExecutionStep, Rank } from "../documents/agent-protocol";
import type { FileMove } from "../records/product";
import type { Sql } from "../db/run";
import type { ErrorMapping, JobInterface } from "../documents/types";

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
	/** those of them placed in the room the completions freed (FinishOptions.handOff) */
	handedOff: PlacedExe[];
	/** why some completions were turned into failures, and other notes for the log */
	notes: string[];
	/** job id → "name:version" of every job whose execution ended here (for the metrics) */
	jobTypes: Map<number, string>;
	/** job id → error category of the jobs FAILED here */
	failureCategories: Map<number, string>;
}

export interface FinishOptions {
	/** what the scheduler knows of the executions it placed (its PlacedExecutions): spares the endings' read */
	placed?: { takeAll(ids: readonly number[]): EndingExe[] | null };
	/** files moved by parse results are added here, so the caller can move them back on rollback */
	moves?: FileMove[];
	warn?: (message: string) => void;
	/**
	 * Places recipe jobs queued here in the room the executions ended here freed, in the
	 * transaction (lib/scheduling/handoff.ts); `last`: its statement goes with the COMMIT.
	 */
	handOff?: (
		sql: Sql,
		endedExeIds: number[],
		queuedJobIds: number[],
		last: boolean
	) => Promise<PlacedExe[]>;
}

/** A placed execution, as the claim statement answers it: what the agent's ExecutionSpec needs. */
export interface PlacedExe {
	id: number;
	job_id: number;
	timeout: number;
	node_id: number;
	agent_id: string;
	cpus: number;
	mem: number;
	disk_total: number;
	data: any;
	interface: any;
	job_type_id: number;
	name: string;
	version: string;
	uses_docker: boolean;
	docker_image: string | null;
	docker_privileged: boolean;
	is_long_running: boolean;
	is_system: boolean;
	/** jobs of its recipe that its end queues (queue.successors): launch window room it holds */
	successors: number;
	/** of those, how many times its own needs its node holds for them (room-holds.ts) */
	held?: number;
	/** its place in the queue when placed (the agent launches what it holds in this order) */
	rank?: Rank;
	/** what recording its end needs besides (PlacedExecutions, lib/executions/finish.ts) */
	num_exes: number;
	max_tries: number;
	is_operational: boolean;
	error_mapping: EndingExe["error_mapping"];
	in_recipe: boolean;
	/** seconds from queued to placed */
	queue_wait_s?: number;
}

export interface EndingExe {
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
	/** whether its job belongs to a recipe */
	in_recipe: boolean;
}
