import type { ServiceSchema } from "moleculer";
import {
	GAUGE_DEFINITIONS,
	registerMetrics,
	METRICS,
	readGauges,
	type GaugeValues
} from "../lib/observability/gauges";

/**
 * With METRICS_PORT set, keeps the cluster's gauges (queue depth by job type, running
 * executions, nodes online and paused, ingests by status) up to date in this process's
 * Prometheus metrics, read from PostgreSQL every `gaugeRefreshMs`. Every process running the
 * service reports them (Prometheus: take the max across nodeIDs). The service needs `this.db`.
 */
export function PrometheusGaugesMixin(gaugeRefreshMs = 5000): Partial<ServiceSchema> {
	return {
		created() {
			if (!this.broker.isMetricsEnabled()) return;
			registerMetrics(this.broker.metrics, GAUGE_DEFINITIONS);
			this.queuedTypes = new Set<string>();
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
			}
		}
	};
}
