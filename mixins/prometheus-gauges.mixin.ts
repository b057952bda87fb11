import type { ServiceSchema } from "moleculer";
import {
	GAUGE_DEFINITIONS,
	registerMetrics,
	METRICS,
	readGauges,
	type GaugeValues,
	type MetricDefinition
} from "../lib/observability/gauges";

/**
 * With METRICS_PORT set, keeps the cluster's gauges (queue depth by job type, running
 * executions, nodes online and paused, ingests by status, each active node's running
 * executions and free resources) up to date in this process's
 * Prometheus metrics, read from PostgreSQL every `gaugeRefreshMs`. Every process running the
 * service reports them (Prometheus: take the max across nodeIDs). The service needs `this.db`.
 */
export function PrometheusGaugesMixin(gaugeRefreshMs = 5000): Partial<ServiceSchema> {
	return {
		created() {
			if (!this.broker.isMetricsEnabled()) return;
			registerMetrics(this.broker.metrics, GAUGE_DEFINITIONS);
			this.queuedTypes = new Set<string>();
			this.nodeLabels = new Map<string, { node: string; hostname: string }>();
			// present from the start, before the first read
			const m = this.broker.metrics;
			for (const name of [
				METRICS.executionsRunning,
				METRICS.nodesOnline,
				METRICS.nodesPaused
			])
				m.set(name, 0);
		},

		async started() {
			if (!this.broker.isMetricsEnabled()) return;
			const refresh = async () => {
				try {
					this.applyGauges(await readGauges(this.db, 15000));
				} catch (err) {
					this.logger.warn({ err }, "metrics: cannot read the gauges");
				}
			};
			await refresh();
			this.gaugeTimer = setInterval(refresh, gaugeRefreshMs);
			this.gaugeTimer.unref?.();
		},

		stopped() {
			if (this.gaugeTimer) clearInterval(this.gaugeTimer);
		},

		methods: {
			applyGauges(values: GaugeValues) {
				const m = this.broker.metrics;
				// a job type no longer queued drops to 0 rather than keeping its last depth
				for (const type of this.queuedTypes)
					if (!values.queueDepth.has(type))
						m.set(METRICS.queueDepth, 0, { job_type: type });
				for (const [type, n] of values.queueDepth) {
					m.set(METRICS.queueDepth, n, { job_type: type });
					this.queuedTypes.add(type);
				}
				m.set(METRICS.executionsRunning, values.executionsRunning);
				m.set(METRICS.nodesOnline, values.nodesOnline);
				m.set(METRICS.nodesPaused, values.nodesPaused);
				for (const [status, n] of values.ingests) m.set(METRICS.ingests, n, { status });
				// a node no longer active drops to 0 as well
				const seen = new Set<string>();
				for (const n of values.nodes) {
					const labels = { node: n.node, hostname: n.hostname };
					m.set(METRICS.nodeExecutionsRunning, n.running, labels);
					m.set(METRICS.nodeFreeCpus, n.freeCpus, labels);
					m.set(METRICS.nodeFreeMemory, n.freeMemory, labels);
					m.set(METRICS.nodeFreeDisk, n.freeDisk, labels);
					seen.add(`${n.node}\u0000${n.hostname}`);
					this.nodeLabels.set(`${n.node}\u0000${n.hostname}`, labels);
				}
				for (const [key, labels] of this.nodeLabels)
					if (!seen.has(key))
						for (const name of [
							METRICS.nodeExecutionsRunning,
							METRICS.nodeFreeCpus,
							METRICS.nodeFreeMemory,
							METRICS.nodeFreeDisk
						])
							m.set(name, 0, labels);
			}
		}
	};
}

/**
 * With METRICS_PORT set, registers a service's own counters and histograms (`defs`) and sets
 * `this.metered`; every one without labels is then present from the start, at 0.
 */
export function MetricsMixin(defs: MetricDefinition[]): Partial<ServiceSchema> {
	return {
		created() {
			this.metered = this.broker.isMetricsEnabled();
			if (this.metered) registerMetrics(this.broker.metrics, defs);
		}
	};
}

/** What MetricsMixin adds to a service. */
export interface Metered {
	metered?: boolean;
}
