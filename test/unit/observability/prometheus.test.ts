import { exposedName, familyLines, snakeCase } from "../../../lib/observability/prometheus";
import { JobMeter } from "../../../lib/observability/job-meter";

const metric = (over: Record<string, unknown>, items: any[] = []) => ({
	name: "x",
	type: "gauge",
	labelNames: [] as string[],
	snapshot: () => items,
	...over
});

describe("exposedName", () => {
	it.each([
		["process.memory.rss", "gauge", "byte", "process_memory_rss_bytes"],
		["moleculer.request.time", "histogram", "millisecond", "moleculer_request_time_seconds"],
		[
			"moleculer.transporter.packets.sent.bytes",
			"counter",
			"byte",
			"moleculer_transporter_packets_sent_bytes_total"
		],
		["moleculer.request.total", "counter", "request", "moleculer_request_total"],
		[
			"moleculer.broker.local.services.total",
			"gauge",
			undefined,
			"moleculer_broker_local_services"
		],
		[
			"moleculer.event.broadcast-local.total",
			"counter",
			"event",
			"moleculer_event_broadcast_local_total"
		],
		["os.hostname", "info", undefined, "os_hostname_info"],
		["scale_scheduler_passes_total", "counter", undefined, "scale_scheduler_passes_total"]
	])("%s (%s, %s) is %s", (name, type, unit, out) => {
		expect(exposedName({ name, type, unit })).toBe(out);
	});

	it("writes labels in snake_case", () => {
		expect(snakeCase("nodeID")).toBe("node_id");
		expect(snakeCase("errorName")).toBe("error_name");
	});
});

describe("familyLines", () => {
	it("writes a histogram in milliseconds as seconds: buckets, _sum, _count only", () => {
		const lines = familyLines(
			metric({ name: "t", type: "histogram", unit: "millisecond", labelNames: ["a"] }, [
				{
					labels: { a: "x" },
					count: 3,
					sum: 1500,
					buckets: { 10: 1, 1000: 2 },
					min: 1,
					rate: 2
				}
			])
		);
		expect(lines).toEqual([
			"# HELP t_seconds t",
			"# TYPE t_seconds histogram",
			't_seconds_bucket{a="x",le="0.01"} 1',
			't_seconds_bucket{a="x",le="1"} 2',
			't_seconds_bucket{a="x",le="+Inf"} 3',
			't_seconds_sum{a="x"} 1.5',
			't_seconds_count{a="x"} 3'
		]);
	});

	it("writes a metric without labels and without a value as 0, one with labels not at all", () => {
		expect(familyLines(metric({ name: "g", description: "G" }))).toEqual([
			"# HELP g G",
			"# TYPE g gauge",
			"g 0"
		]);
		expect(familyLines(metric({ name: "g", labelNames: ["a"] }))).toEqual([]);
	});

	it("escapes label values", () => {
		const lines = familyLines(metric({ name: "g" }, [{ labels: { a: 'q"\\\n' }, value: 1 }]));
		expect(lines[2]).toBe('g{a="q\\"\\\\\\n"} 1');
	});
});

describe("JobMeter", () => {
	it("observes queue waits at placement, run times and outcomes at the end", () => {
		const calls: unknown[][] = [];
		const sink = {
			increment: (...a: unknown[]) => calls.push(["inc", ...a]),
			observe: (...a: unknown[]) => calls.push(["obs", ...a])
		};
		let now = 1000;
		const meter = new JobMeter(
			sink,
			{ queueWait: "w", runTime: "r", completed: "c", failed: "f", canceled: "x" },
			() => now
		);
		meter.placed([{ id: 7, name: "t", version: "1", queue_wait_s: 2.5 }]);
		now = 4000;
		meter.ended({
			ended: new Set([7, 8]),
			completedJobs: [70],
			failedJobs: [80],
			canceledJobs: [],
			jobTypes: new Map([
				[70, "t:1"],
				[80, "u:2"]
			]),
			failureCategories: new Map([[80, "SYSTEM"]])
		});
		expect(calls).toEqual([
			["obs", "w", 2.5, { job_type: "t:1" }],
			["obs", "r", 3, { job_type: "t:1" }],
			["inc", "c", { job_type: "t:1" }],
			["inc", "f", { job_type: "u:2", error_category: "SYSTEM" }]
		]);
	});
});
