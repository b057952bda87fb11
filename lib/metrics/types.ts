/**
 * The metrics types of Scale 3.0 (scale/metrics/models.py, registry.py): for each, its name,
 * title, description, filters, groups and plot columns, and the table and choice column its
 * daily rows are read from. Column names are those of the tables (migrations/0002), which are
 * Scale's model field names; `COLUMN_ALIASES` holds the other names Scale's web UI asks for.
 */

export type Aggregate = "sum" | "min" | "max" | "avg";

export interface MetricsFilter {
	param: string;
	type: string;
}

export interface MetricsGroup {
	name: string;
	title: string;
	description: string;
}

export interface MetricsColumn {
	name: string;
	title: string;
	description: string;
	units: string;
	group: string;
	aggregate: Aggregate;
}

export type ChoiceKind = "job-type" | "strike" | "error";

export interface MetricsType {
	name: string;
	title: string;
	description: string;
	filters: MetricsFilter[];
	groups: MetricsGroup[];
	columns: MetricsColumn[];
	/** the table of daily rows, one per `occurred` date and choice */
	table: string;
	/** the table's column naming the choice */
	choiceColumn: string;
	/** what a choice is */
	choice: ChoiceKind;
	/** other names a column is asked for by, mapped to the column's name */
	aliases: Record<string, string>;
}

const column = (
	name: string,
	title: string,
	description: string,
	units: string,
	group: string,
	aggregate: Aggregate
): MetricsColumn => ({ name, title, description, units, group, aggregate });

/** The four sum/min/max/avg columns of a timing or size. */
function stats(
	base: string,
	title: string,
	what: string,
	units: string,
	group = base
): MetricsColumn[] {
	const parts: [Aggregate, string, string][] = [
		["sum", "Sum", "Total"],
		["min", "Min", "Minimum"],
		["max", "Max", "Maximum"],
		["avg", "Avg", "Average"]
	];
	return parts.map(([aggregate, short, long]) =>
		column(
			`${base}_${aggregate}`,
			`${title} (${short})`,
			`${long} ${what}`,
			units,
			group,
			aggregate
		)
	);
}

const JOB_TYPES: MetricsType = {
	name: "job-types",
	title: "Job Types",
	description: "Metrics for jobs and executions grouped by job type.",
	filters: [
		{ param: "name", type: "string" },
		{ param: "version", type: "string" }
	],
	groups: [
		{ name: "overview", title: "Overview", description: "Overall counts based on job status." },
		{ name: "errors", title: "Errors", description: "Overall error counts based on category." },
		{ name: "queue_time", title: "Queue Time", description: "When jobs were in the queue." },
		{ name: "pre_time", title: "Pre-task Time", description: "When jobs were being prepared." },
		{
			name: "job_time",
			title: "Job Task Time",
			description: "When jobs were executing their actual goal."
		},
		{
			name: "post_time",
			title: "Post-task Time",
			description: "When jobs were being cleaned up."
		},
		{
			name: "run_time",
			title: "Run Time",
			description: "When related tasks were run (pre, job, post)."
		},
		{
			name: "stage_time",
			title: "Stage Time",
			description: "Times related to the overhead of the system."
		}
	],
	columns: [
		column(
			"completed_count",
			"Completed Count",
			"Number of successfully completed jobs.",
			"count",
			"overview",
			"sum"
		),
		column(
			"failed_count",
			"Failed Count",
			"Number of incomplete failed jobs.",
			"count",
			"overview",
			"sum"
		),
		column(
			"canceled_count",
			"Canceled Count",
			"Number of incomplete canceled jobs.",
			"count",
			"overview",
			"sum"
		),
		column(
			"total_count",
			"Total Count",
			"Number of completed, failed, and canceled jobs.",
			"count",
			"overview",
			"sum"
		),
		column(
			"error_system_count",
			"System Error Count",
			"Number of failed jobs due to a system error.",
			"count",
			"errors",
			"sum"
		),
		column(
			"error_data_count",
			"Data Error Count",
			"Number of failed jobs due to a data error.",
			"count",
			"errors",
			"sum"
		),
		column(
			"error_algorithm_count",
			"Algorithm Error Count",
			"Number of failed jobs due to an algorithm error.",
			"count",
			"errors",
			"sum"
		),
		...stats("queue_time", "Queue Time", "time the job waited in the queue.", "seconds"),
		...stats("pre_time", "Pre-task Time", "time spent preparing the job task.", "seconds"),
		...stats("job_time", "Job Task Time", "time spent running the job task.", "seconds"),
		...stats("post_time", "Post-task Time", "time spent finalizing the job task.", "seconds"),
		...stats(
			"run_time",
			"Run Time",
			"time spent running the pre, job, and post tasks.",
			"seconds"
		),
		...stats("stage_time", "Stage Time", "overhead time spent managing tasks.", "seconds")
	],
	table: "metrics_job_type",
	choiceColumn: "job_type_id",
	choice: "job-type",
	// Scale 3.0's web UI (jobTypesFailureRatesController.js) asks for these names
	aliases: {
		system_error_count: "error_system_count",
		data_error_count: "error_data_count",
		algorithm_error_count: "error_algorithm_count"
	}
};

const INGESTS: MetricsType = {
	name: "ingests",
	title: "Ingests",
	description: "Metrics for ingests grouped by strike process.",
	filters: [{ param: "name", type: "string" }],
	groups: [
		{
			name: "overview",
			title: "Overview",
			description: "Overall counts based on ingest status."
		},
		{
			name: "file_size",
			title: "File Size",
			description: "Size information about ingested files."
		},
		{
			name: "transfer_time",
			title: "Transfer Time",
			description: "When files were being transferred before ingest."
		},
		{
			name: "ingest_time",
			title: "Ingest Time",
			description: "When files were processed during ingest."
		}
	],
	columns: [
		column(
			"deferred_count",
			"Deferred Count",
			"Number of files deferred (ignored) by the ingest process.",
			"count",
			"overview",
			"sum"
		),
		column(
			"ingested_count",
			"Ingested Count",
			"Number of files successfully ingested.",
			"count",
			"overview",
			"sum"
		),
		column(
			"errored_count",
			"Errored Count",
			"Number of files that failed to ingest.",
			"count",
			"overview",
			"sum"
		),
		column(
			"duplicate_count",
			"Duplicate Count",
			"Number of files that were duplicates of previous ingests.",
			"count",
			"overview",
			"sum"
		),
		column(
			"total_count",
			"Total Count",
			"Number of deferred, ingested, errored, and duplicate ingests.",
			"count",
			"overview",
			"sum"
		),
		...stats("file_size", "File Size", "size of ingested files.", "bytes"),
		...stats(
			"transfer_time",
			"Transfer Time",
			"time spent transferring files before ingest.",
			"seconds"
		),
		...stats(
			"ingest_time",
			"Ingest Time",
			"time spent processing files during ingest.",
			"seconds"
		)
	],
	table: "metrics_ingest",
	choiceColumn: "strike_id",
	choice: "strike",
	aliases: {}
};

const ERRORS: MetricsType = {
	name: "errors",
	title: "Errors",
	description: "Metrics for jobs grouped by errors.",
	filters: [
		{ param: "name", type: "string" },
		{ param: "category", type: "string" }
	],
	groups: [
		{ name: "overview", title: "Overview", description: "Overall counts based on error type." }
	],
	columns: [
		column(
			"total_count",
			"Total Count",
			"Number of jobs that failed with a particular error type.",
			"count",
			"overview",
			"sum"
		)
	],
	table: "metrics_error",
	choiceColumn: "error_id",
	choice: "error",
	aliases: {}
};

/** In Scale's order of registration (scale/metrics/apps.py). */
export const METRICS_TYPES: readonly MetricsType[] = [ERRORS, INGESTS, JOB_TYPES];

export function findMetricsType(name: string): MetricsType | undefined {
	return METRICS_TYPES.find(t => t.name === name);
}

/** A type as Scale's MetricsTypeSerializer gives it (the list). */
export function serializeMetricsType(t: MetricsType) {
	return {
		name: t.name,
		title: t.title,
		description: t.description,
		filters: t.filters,
		groups: t.groups,
		columns: t.columns
	};
}
