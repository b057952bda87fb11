import type { DetailsRow } from "../records/job-details";

/** What creating and queueing jobs takes and answers, shared by new-job.ts and prepare-job.ts. */

/** One job to create and queue. */
export interface NewJobRequest {
	jobTypeId: number;
	/** the job data document as given (checked against the job type's current interface) */
	jobData: unknown;
	/** the trigger event that caused the job; when absent a USER event is created, processed */
	eventId?: number;
	/** field path of the job data in error messages (default `job_data`) */
	dataField?: string;
	/** field path of the job type id in error messages (default `job_type_id`) */
	jobTypeField?: string;
	/**
	 * Names requests whose job data documents are the same but for the ids of their files (a
	 * trigger rule's jobs, one per file; each id an integer the caller has checked): the first of
	 * them per job type is checked against the interface, and the others take the result with
	 * their own ids (prepareEachNewJob).
	 */
	dataTemplate?: string;
}

/** What was created for one request, in the order of the requests. */
export interface QueuedJob {
	jobId: number;
	jobExeId: number;
	eventId: number;
	/**
	 * The job as written, with the parts of its details (when asked for and the job has a new
	 * USER event): its details without reading them back.
	 */
	details?: DetailsRow;
}
