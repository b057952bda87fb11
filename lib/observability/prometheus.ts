import http from "http";
import { MetricReporters, type MetricRegistry } from "moleculer";

/**
 * Prometheus's text format written by the book (prometheus.io, "Metric and label naming"), from
 * Moleculer's metric registry: base units (`_seconds`, `_bytes`; milliseconds are divided by
 * 1,000), `_total` on counters only, histograms as buckets, `_sum` and `_count` only (no
 * quantiles, minimum, mean or rates under their names), labels in snake_case, a metric without
 * labels present from the start (0). Moleculer's own reporter wrote quantiles, `_min`, `_mean`,
 * `_stddev` and `_rate` series beside a histogram and `process_memory_rss` without its unit;
 * `promtool check metrics` refused it.
 */

/** One metric as Moleculer's registry keeps it (the parts read here). */
export interface RegistryMetric {
	name: string;
	type: string;
	description?: string;
	unit?: string;
	labelNames: string[];
	snapshot(): any[];
}

const MS_UNITS = new Set(["millisecond"]);
const SECOND_UNITS = new Set(["second", "millisecond"]);

/** `errorName` → `error_name`, `nodeID` → `node_id`. */
export function snakeCase(name: string): string {
	return name
		.replace(/([a-z0-9])([A-Z])/g, "$1_$2")
		.replace(/[^a-zA-Z0-9_]/g, "_")
		.toLowerCase();
}

/** The exposed name of a metric: base unit suffix, `_total` on counters and only on them. */
export function exposedName(metric: Pick<RegistryMetric, "name" | "type" | "unit">): string {
	let name = snakeCase(metric.name.replace(/[.-]/g, "_")).replace(/_total$/, "");
	const unit = metric.unit ?? "";
	const suffix = unit === "byte" ? "_bytes" : SECOND_UNITS.has(unit) ? "_seconds" : "";
	if (suffix && !name.endsWith(suffix)) name += suffix;
	if (metric.type === "info") return `${name}_info`;
	return metric.type === "counter" ? `${name}_total` : name;
}

function escapeLabel(value: unknown): string {
	return String(value).replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Record<string, unknown> | undefined, extra?: [string, string]): string {
	const parts: string[] = [];
	for (const [k, v] of Object.entries(labels ?? {}))
		if (v !== undefined && v !== null) parts.push(`${snakeCase(k)}="${escapeLabel(v)}"`);
	if (extra) parts.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
	return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

function num(value: unknown, scale = 1): string {
	if (value === null || value === undefined) return "NaN";
	const n = Number(value);
	if (Number.isNaN(n)) return "NaN";
	if (n === Infinity) return "+Inf";
	if (n === -Infinity) return "-Inf";
	return String(n / scale);
}

/** The lines of one metric family (HELP, TYPE, samples), or none when it has nothing to say. */
export function familyLines(metric: RegistryMetric): string[] {
	const name = exposedName(metric);
	const scale = MS_UNITS.has(metric.unit ?? "") ? 1000 : 1;
	const help = (metric.description || metric.name).replace(/\\/g, "\\\\").replace(/\n/g, " ");
	const type = metric.type === "info" ? "gauge" : metric.type;
	const items = metric.snapshot();
	const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
	if (items.length === 0) {
		// a metric without labels is there from the start; one with labels has no series yet
		if (metric.labelNames.length > 0 || metric.type === "info") return [];
		if (metric.type === "histogram") items.push({ labels: {}, count: 0, sum: 0, buckets: {} });
		else items.push({ labels: {}, value: 0 });
	}
	for (const item of items) {
		if (metric.type === "info") {
			lines.push(`${name}${labelText(item.labels, ["value", String(item.value)])} 1`);
		} else if (metric.type === "histogram") {
			const bounds = Object.keys(item.buckets ?? {})
				.map(Number)
				.sort((a, b) => a - b);
			for (const le of bounds)
				lines.push(
					`${name}_bucket${labelText(item.labels, ["le", num(le, scale)])} ${num(item.buckets[le])}`
				);
			lines.push(
				`${name}_bucket${labelText(item.labels, ["le", "+Inf"])} ${num(item.count)}`
			);
			lines.push(`${name}_sum${labelText(item.labels)} ${num(item.sum, scale)}`);
			lines.push(`${name}_count${labelText(item.labels)} ${num(item.count)}`);
		} else {
			lines.push(`${name}${labelText(item.labels)} ${num(item.value, scale)}`);
		}
	}
	return lines;
}

/** The process's standard metrics (client libraries' names), read at each scrape. */
export function processLines(now = Date.now()): string[] {
	const cpu = process.cpuUsage();
	const started = Math.round((now - process.uptime() * 1000) / 10) / 100;
	return [
		"# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
		"# TYPE process_cpu_seconds_total counter",
		`process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`,
		"# HELP process_resident_memory_bytes Resident memory size in bytes.",
		"# TYPE process_resident_memory_bytes gauge",
		`process_resident_memory_bytes ${process.memoryUsage.rss()}`,
		"# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
		"# TYPE process_start_time_seconds gauge",
		`process_start_time_seconds ${started}`
	];
}

/**
 * The whole exposition. Moleculer's `os.datetime.*` (the clock as labels) are left out, and a
 * second metric that maps to a name already written (none today) is skipped rather than written
 * twice.
 */
export function exposition(metrics: Iterable<RegistryMetric>): string {
	const out: string[] = processLines();
	const seen = new Set(["process_cpu_seconds_total", "process_resident_memory_bytes"]);
	seen.add("process_start_time_seconds");
	for (const metric of metrics) {
		if (metric.name.startsWith("os.datetime")) continue;
		const name = exposedName(metric);
		if (seen.has(name)) continue;
		seen.add(name);
		out.push(...familyLines(metric));
	}
	return out.join("\n") + "\n";
}

export interface PrometheusOptions {
	host: string;
	port: number;
	path?: string;
}

/** Moleculer's metric reporter that serves `exposition` over HTTP (`/metrics`). */
export class PrometheusReporter extends MetricReporters.Base {
	server: http.Server | null = null;
	private readonly where: PrometheusOptions;

	constructor(where: PrometheusOptions) {
		super({});
		this.where = where;
	}

	override init(registry: MetricRegistry): void {
		super.init(registry);
		const path = this.where.path ?? "/metrics";
		const store = (registry as unknown as { store: Map<string, RegistryMetric> }).store;
		this.server = http.createServer((req, res) => {
			if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== path) {
				res.writeHead(404).end();
				return;
			}
			res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
			res.end(exposition(store.values()));
		});
		this.server.on("error", err => this.logger.error({ err }, "metrics: cannot listen"));
		this.server.listen(this.where.port, this.where.host);
	}

	override stop(): Promise<void> {
		return new Promise(resolve => {
			if (!this.server) return resolve();
			this.server.close(() => resolve());
			this.server.closeAllConnections();
		});
	}
}
