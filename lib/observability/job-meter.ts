/** Where the meter writes: Moleculer's metric registry has these three. */
export interface MetricSink {
	increment(name: string, labels?: Record<string, string>, value?: number): unknown;
	observe(name: string, value: number, labels?: Record<string, string>): unknown;
}

/** An execution placed: its id, job type and how long it waited in the queue. */
export interface PlacedForMeter {
	id: number;
	name: string;
	version: string;
	/** seconds from queued to placed */
	queue_wait_s?: number;
}

/** The jobs a batch of written ends ended (a FinishResult's parts read here). */
export interface JobsEnded {
	completedJobs: readonly number[];
	failedJobs: readonly number[];
	canceledJobs: readonly number[];
	/** job id → "name:version", for every job ended */
	jobTypes: ReadonlyMap<number, string>;
	/** job id → error category, for the jobs FAILED */
	failureCategories: ReadonlyMap<number, string>;
}

/** What a batch of written reports ended: its executions and jobs. */
export interface EndedForMeter extends JobsEnded {
	ended: ReadonlySet<number>;
}

/** The counters of job outcomes (lib/observability/gauges.ts, JOB_OUTCOME_DEFINITIONS). */
export interface OutcomeNames {
	completed: string;
	failed: string;
	canceled: string;
}

/** Counts each job the batch ended once: by job type, and error category when it FAILED. */
export function countOutcomes(sink: MetricSink, names: OutcomeNames, jobs: JobsEnded): void {
	const typeOf = (jobId: number) => jobs.jobTypes.get(jobId) ?? "unknown";
	for (const jobId of jobs.completedJobs)
		sink.increment(names.completed, { job_type: typeOf(jobId) });
	for (const jobId of jobs.failedJobs)
		sink.increment(names.failed, {
			job_type: typeOf(jobId),
			error_category: jobs.failureCategories.get(jobId) ?? "unknown"
		});
	for (const jobId of jobs.canceledJobs)
		sink.increment(names.canceled, { job_type: typeOf(jobId) });
}

/**
 * The scheduler's job metrics (lib/observability/gauges.ts, SCHEDULER_DEFINITIONS and
 * JOB_OUTCOME_DEFINITIONS): queue waits
 * when executions are placed, run times and job outcomes when their ends are written. Run times
 * are of the executions this process placed (their placement time is kept here, bounded: the
 * oldest are forgotten first); one placed by an earlier leader ends without a run time.
 */
export class JobMeter {
	private readonly placedAt = new Map<number, { at: number; jobType: string }>();

	constructor(
		private readonly sink: MetricSink,
		private readonly names: OutcomeNames & { queueWait: string; runTime: string },
		private readonly now: () => number = () => performance.now(),
		private readonly max = 100000
	) {}

	placed(exes: readonly PlacedForMeter[]): void {
		const at = this.now();
		for (const exe of exes) {
			const jobType = `${exe.name}:${exe.version}`;
			if (exe.queue_wait_s !== undefined)
				this.sink.observe(this.names.queueWait, Math.max(0, exe.queue_wait_s), {
					job_type: jobType
				});
			this.placedAt.set(exe.id, { at, jobType });
		}
		for (const id of this.placedAt.keys()) {
			if (this.placedAt.size <= this.max) break;
			this.placedAt.delete(id);
		}
	}

	ended(result: EndedForMeter): void {
		const at = this.now();
		for (const id of result.ended) {
			const placed = this.placedAt.get(id);
			if (!placed) continue;
			this.placedAt.delete(id);
			this.sink.observe(this.names.runTime, (at - placed.at) / 1000, {
				job_type: placed.jobType
			});
		}
		countOutcomes(this.sink, this.names, result);
	}
}
