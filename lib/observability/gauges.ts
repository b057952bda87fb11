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
	schedulerPasses: "scale_scheduler_passes_total",
	schedulerPassDuration: "scale_scheduler_pass_duration_ms"
} as const;

export interface MetricDefinition {
	name: string;
	type: "gauge" | "counter" | "histogram";
	description: string;
	labelNames?: string[];
	buckets?: number[];
	/** Moleculer's Prometheus reporter writes `_sum` and `_count` only beside quantiles */
	quantiles?: number[];
}

/** Registers the definitions with Moleculer's registry (its typings take one metric type a call). */
export function registerMetrics(metrics: MetricRegistry, defs: MetricDefinition[]): void {
	for (const def of defs) {
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
		description: "Jobs queued, by job type (name:version)",
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
	}
];

/** The scheduler's own, counted where the leader runs its passes. */
export const SCHEDULER_DEFINITIONS: MetricDefinition[] = [
	{
		name: METRICS.schedulerPasses,
		type: "counter",
		description: "Placement passes of the leading scheduler"
	},
	{
		name: METRICS.schedulerPassDuration,
		type: "histogram",
		description: "Duration of a placement pass, milliseconds",
		buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500],
		quantiles: [0.5, 0.99]
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

export interface GaugeValues {
	/** "name:version" → queued jobs (only types with some) */
	queueDepth: Map<string, number>;
	executionsRunning: number;
	nodesOnline: number;
	nodesPaused: number;
	/** every status, zeros included */
	ingests: Map<string, number>;
}

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
	}>(
		db,
		`SELECT
			(SELECT json_agg(json_build_object('job_type', t.name || ':' || t.version, 'n', q.n))
			   FROM (SELECT job_type_id, count(*)::int AS n FROM queue GROUP BY job_type_id) q
			   JOIN job_type t ON t.id = q.job_type_id) AS queue,
			(SELECT count(*) FROM job_exe WHERE status = 'RUNNING') AS running,
			(SELECT count(*) FROM node WHERE is_active AND agent_id IS NOT NULL
				AND last_heartbeat > now() - $1 * interval '1 millisecond') AS online,
			(SELECT count(*) FROM node WHERE is_active AND is_paused) AS paused,
			(SELECT json_agg(json_build_object('status', status, 'n', n))
			   FROM (SELECT status, count(*)::int AS n FROM (
					SELECT status FROM ingest UNION ALL SELECT 'INGESTING' FROM ingest_move
				 ) x GROUP BY status) i) AS ingests`,
		[leaseMs]
	);
	const ingests = new Map(INGEST_STATUSES.map(s => [s, 0]));
	for (const i of row.ingests ?? []) ingests.set(i.status, i.n);
	return {
		queueDepth: new Map((row.queue ?? []).map(q => [q.job_type, q.n])),
		executionsRunning: Number(row.running),
		nodesOnline: Number(row.online),
		nodesPaused: Number(row.paused),
		ingests
	};
}
