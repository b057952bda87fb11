import type { MetricRegistry } from "moleculer";
import type { Sequelize } from "sequelize";
import { select } from "../db/run";

/** The service's own metrics, beside Moleculer's (all `scale_`, Prometheus names). */
export const METRICS = {
	queueDepth: "scale_queue_depth",
	executionsRunning: "scale_executions_running",
	nodesOnline: "scale_nodes_online",
	nodesPaused: "scale_nodes_paused",
	ingests: "scale_ingests",
	nodeExecutionsRunning: "scale_node_executions_running",
	nodeFreeCpus: "scale_node_free_cpus",
	nodeFreeMemory: "scale_node_free_memory_bytes",
	nodeFreeDisk: "scale_node_free_disk_bytes",
	schedulerPasses: "scale_scheduler_passes_total",
	schedulerPassDuration: "scale_scheduler_pass_duration_seconds",
	schedulerLeader: "scale_scheduler_leader",
	jobsCompleted: "scale_jobs_completed_total",
	jobsFailed: "scale_jobs_failed_total",
	jobsCanceled: "scale_jobs_canceled_total",
	queueWait: "scale_job_exe_queue_wait_seconds",
	runTime: "scale_job_exe_run_seconds",
	ingestsEnded: "scale_ingests_ended_total",
	triggerEvents: "scale_trigger_events_processed_total"
} as const;

export interface MetricDefinition {
	name: string;
	type: "gauge" | "counter" | "histogram";
	description: string;
	labelNames?: string[];
	/** a histogram's upper bounds (its values in the unit its name ends with) */
	buckets?: number[];
}

/** Registers the definitions with Moleculer's registry (its typings take one metric type a call). */
export function registerMetrics(metrics: MetricRegistry, defs: MetricDefinition[]): void {
	for (const def of defs) {
		if (metrics.getMetric(def.name)) continue;
		if (def.type === "gauge") metrics.register({ ...def, type: "gauge" });
		else if (def.type === "counter") metrics.register({ ...def, type: "counter" });
		else metrics.register({ ...def, type: "histogram" });
	}
}

/** The gauges read from PostgreSQL (the cluster's state, the same from any process). */
export const GAUGE_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.queueDepth,
		type: "gauge",
		description: "Jobs queued, by job type (name:version; every job type, 0 when none)",
		labelNames: ["job_type"]
	},
	{ name: METRICS.executionsRunning, type: "gauge", description: "Executions RUNNING" },
	{
		name: METRICS.nodesOnline,
		type: "gauge",
		description: "Active nodes whose agent has sent a heartbeat within its lease"
	},
	{ name: METRICS.nodesPaused, type: "gauge", description: "Active nodes paused" },
	{
		name: METRICS.ingests,
		type: "gauge",
		description: "Ingests, by status",
		labelNames: ["status"]
	},
	{
		name: METRICS.nodeExecutionsRunning,
		type: "gauge",
		description: "Executions RUNNING on each active node (node: its id)",
		labelNames: ["node", "hostname"]
	},
	{
		name: METRICS.nodeFreeCpus,
		type: "gauge",
		description: "CPUs an active node offers that no running execution holds",
		labelNames: ["node", "hostname"]
	},
	{
		name: METRICS.nodeFreeMemory,
		type: "gauge",
		description: "Memory an active node offers that no running execution holds",
		labelNames: ["node", "hostname"]
	},
	{
		name: METRICS.nodeFreeDisk,
		type: "gauge",
		description: "Disk an active node offers that no running execution holds",
		labelNames: ["node", "hostname"]
	}
];

/** Seconds, from a hundredth to a day: pass durations, queue waits and run times. */
const SECOND_BUCKETS = [
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
	14400, 86400
];

/** The scheduler's own, counted where it places work and records ends. */
export const SCHEDULER_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.schedulerPasses,
		type: "counter",
		description: "Placement passes of the leading scheduler"
	},
	{
		name: METRICS.schedulerPassDuration,
		type: "histogram",
		description: "Duration of a placement pass",
		buckets: SECOND_BUCKETS.slice(0, 12)
	},
	{
		name: METRICS.schedulerLeader,
		type: "gauge",
		description: "1 while this process's scheduler leads (places work), else 0"
	},
	{
		name: METRICS.queueWait,
		type: "histogram",
		description: "Time from an execution queued to placed, by job type",
		labelNames: ["job_type"],
		buckets: SECOND_BUCKETS
	},
	{
		name: METRICS.runTime,
		type: "histogram",
		description:
			"Time from an execution placed to its end, by job type (placed by this leader)",
		labelNames: ["job_type"],
		buckets: SECOND_BUCKETS
	}
];

/**
 * Job outcomes, counted by the process that writes each end: the leading scheduler (agents'
 * reports, lost agents), nodes (executions an agent forgot) and jobs (a user's cancel). Each end
 * is counted once, in one process: the cluster's figure is their sum.
 */
export const OUTCOME_NAMES = {
	completed: METRICS.jobsCompleted,
	failed: METRICS.jobsFailed,
	canceled: METRICS.jobsCanceled
};

export const JOB_OUTCOME_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.jobsCompleted,
		type: "counter",
		description: "Jobs this process recorded COMPLETED, by job type",
		labelNames: ["job_type"]
	},
	{
		name: METRICS.jobsFailed,
		type: "counter",
		description: "Jobs this process recorded FAILED for good, by job type and error category",
		labelNames: ["job_type", "error_category"]
	},
	{
		name: METRICS.jobsCanceled,
		type: "counter",
		description: "Jobs this process recorded CANCELED (not FAILED before), by job type",
		labelNames: ["job_type"]
	}
];

export const INGEST_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.ingestsEnded,
		type: "counter",
		description: "Ingests this process settled, by the status they ended in",
		labelNames: ["status"]
	}
];

export const TRIGGER_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.triggerEvents,
		type: "counter",
		description: "Trigger events (ingests, parses) this process processed"
	}
];

export const INGEST_STATUSES = [
	"TRANSFERRING",
	"TRANSFERRED",
	"DEFERRED",
	"INGESTING",
	"INGESTED",
	"ERRORED",
	"DUPLICATE"
];

/** One active node's share of the per-node gauges. */
export interface NodeGauges {
	/** its id, as a label */
	node: string;
	hostname: string;
	running: number;
	freeCpus: number;
	/** bytes */
	freeMemory: number;
	/** bytes */
	freeDisk: number;
}

export interface GaugeValues {
	/** "name:version" → queued jobs, every job type not archived (0 when none) */
	queueDepth: Map<string, number>;
	executionsRunning: number;
	nodesOnline: number;
	nodesPaused: number;
	/** every status, zeros included */
	ingests: Map<string, number>;
	/** every active node */
	nodes: NodeGauges[];
}

const MIB = 1024 * 1024;

/**
 * Reads every gauge in one round trip. Each part is a count over an index or a small table
 * (queue, RUNNING executions through their partial index, active nodes); ingests are counted
 * by status over their table, the moves under way (ingest_move) as INGESTING.
 */
export async function readGauges(db: Sequelize, leaseMs: number): Promise<GaugeValues> {
	const [row] = await select<{
		queue: { job_type: string; n: number }[] | null;
		running: string;
		online: string;
		paused: string;
		ingests: { status: string; n: number }[] | null;
		nodes:
			| { id: number; hostname: string; n: number; cpus: number; mem: number; disk: number }[]
			| null;
	}>(
		db,
		`SELECT
			(SELECT json_agg(json_build_object('job_type', t.name || ':' || t.version,
					'n', coalesce(q.n, 0)))
			   FROM job_type t LEFT JOIN (SELECT job_type_id, count(*)::int AS n FROM queue
					GROUP BY job_type_id) q ON q.job_type_id = t.id
			  WHERE t.is_active OR q.n > 0) AS queue,
			(SELECT count(*) FROM job_exe WHERE status = 'RUNNING') AS running,
			(SELECT count(*) FROM node WHERE is_active AND agent_id IS NOT NULL
				AND last_heartbeat > now() - $1 * interval '1 millisecond') AS online,
			(SELECT count(*) FROM node WHERE is_active AND is_paused) AS paused,
			(SELECT json_agg(json_build_object('status', status, 'n', n))
			   FROM (SELECT status, count(*)::int AS n FROM (
					SELECT status FROM ingest UNION ALL SELECT 'INGESTING' FROM ingest_move
				 ) x GROUP BY status) i) AS ingests,
			(SELECT json_agg(json_build_object('id', n.id, 'hostname', n.hostname,
					'n', coalesce(s.n, 0),
					'cpus', coalesce(n.cpus_total, 0) - coalesce(s.cpus, 0),
					'mem', coalesce(n.mem_total, 0) - coalesce(s.mem, 0),
					'disk', coalesce(n.disk_total, 0) - coalesce(s.disk, 0)))
			   FROM node n LEFT JOIN LATERAL (
					SELECT count(*) AS n, sum(cpus_scheduled) AS cpus, sum(mem_scheduled) AS mem,
						sum(disk_total_scheduled) AS disk
					FROM job_exe WHERE status = 'RUNNING' AND node_id = n.id) s ON true
			  WHERE n.is_active) AS nodes`,
		[leaseMs]
	);
	const ingests = new Map(INGEST_STATUSES.map(s => [s, 0]));
	for (const i of row.ingests ?? []) ingests.set(i.status, i.n);
	return {
		queueDepth: new Map((row.queue ?? []).map(q => [q.job_type, q.n])),
		executionsRunning: Number(row.running),
		nodesOnline: Number(row.online),
		nodesPaused: Number(row.paused),
		ingests,
		nodes: (row.nodes ?? []).map(n => ({
			node: String(n.id),
			hostname: n.hostname,
			running: Number(n.n),
			freeCpus: Number(n.cpus),
			freeMemory: Number(n.mem) * MIB,
			freeDisk: Number(n.disk) * MIB
		}))
	};
}
