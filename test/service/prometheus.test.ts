import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { freePort } from "../helpers/ports";
import { readGauges } from "../../lib/observability/gauges";
import { checkMetrics } from "../helpers/promtool";

const SERVICES = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"queue",
	"jobs",
	"nodes",
	"scheduler"
];

async function scrape(port: number): Promise<string> {
	const res = await fetch(`http://127.0.0.1:${port}/metrics`);
	expect(res.status).toBe(200);
	return res.text();
}

/** The value of one sample line (`name{labels} value`), or null when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | null {
	for (const line of text.split("\n")) {
		if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
		if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
		return Number(line.slice(line.lastIndexOf(" ") + 1));
	}
	return null;
}

describe("Prometheus metrics (METRICS_PORT)", () => {
	let tdb: TestDatabase;
	let svc: TestApi;
	let port: number;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		port = await freePort();
		// nodes: one online, one paused and out of its lease, one archived
		await tdb.db.query(
			`INSERT INTO node (hostname, slave_id, agent_id, is_paused, is_active, last_heartbeat)
			 VALUES ('a', 's1', 'agent-a', false, true, now()),
				('b', 's2', 'agent-b', true, true, now() - interval '1 hour'),
				('c', 's3', NULL, true, false, NULL)`
		);
		svc = await startServices(tdb.url, SERVICES, { METRICS_PORT: String(port) });
		const status = svc.broker.getLocalService("status") as any;
		status.settings.apiPort = 0;
	}, 30000);

	afterAll(async () => {
		await svc?.stop();
		await tdb?.drop();
	});

	it("serves Moleculer's metrics and the cluster's gauges", async () => {
		expect((await request("PATCH", `${svc.api}/scheduler/`, { is_paused: true })).status).toBe(
			200
		);
		const type = await request("POST", `${svc.api}/job-types/`, {
			name: "counted",
			version: "2.0",
			title: "Counted",
			interface: {
				version: "1.0",
				command: "/bin/true",
				command_arguments: "",
				input_data: [],
				output_data: []
			}
		});
		expect(type.status).toBe(201);
		for (let i = 0; i < 3; i++) {
			const res = await request("POST", `${svc.api}/queue/new-job/`, {
				job_type_id: type.body.id,
				job_data: { version: "1.0", input_data: [], output_data: [] }
			});
			expect(res.status).toBe(201);
		}
		const status = svc.broker.getLocalService("status") as any;
		status.applyGauges(await readGauges(tdb.db, 15000));

		const text = await scrape(port);
		expect(text).toMatch(/^moleculer_request_total\{/m);
		expect(text).toMatch(/# TYPE scale_queue_depth gauge/);
		expect(sample(text, "scale_queue_depth", { job_type: "counted:2.0" })).toBe(3);
		expect(sample(text, "scale_executions_running")).toBe(0);
		expect(sample(text, "scale_nodes_online")).toBe(1);
		expect(sample(text, "scale_nodes_paused")).toBe(1);
		expect(sample(text, "scale_ingests", { status: "INGESTED" })).toBe(0);
		expect(sample(text, "scale_ingests", { status: "ERRORED" })).toBe(0);
		expect(sample(text, "scale_node_free_cpus", { node: "1", hostname: "a" })).toBe(0);
		expect(sample(text, "scale_node_executions_running", { node: "1" })).toBe(0);

		// a pass of the leading scheduler is counted once it leads and is woken
		expect((await request("PATCH", `${svc.api}/scheduler/`, { is_paused: false })).status).toBe(
			200
		);
		const deadline = Date.now() + 10000;
		let passes: number | null = null;
		while (Date.now() < deadline) {
			passes = sample(await scrape(port), "scale_scheduler_passes_total");
			if (passes !== null && passes > 0) break;
			await new Promise(r => setTimeout(r, 100));
		}
		expect(passes).toBeGreaterThan(0);
		const text2 = await scrape(port);
		expect(sample(text2, "scale_scheduler_pass_duration_seconds_count")).toBeGreaterThan(0);
		expect(
			sample(text2, "scale_scheduler_pass_duration_seconds_bucket", { le: "+Inf" })
		).toBeGreaterThan(0);
		expect(sample(text2, "scale_scheduler_leader")).toBe(1);
		// a histogram has its buckets, _sum and _count, and nothing else under its name
		const underName = text2
			.split("\n")
			.filter(l => l.startsWith("scale_scheduler_pass_duration_seconds"))
			.map(l => l.replace(/[{ ].*$/, ""));
		expect(new Set(underName)).toEqual(
			new Set([
				"scale_scheduler_pass_duration_seconds_bucket",
				"scale_scheduler_pass_duration_seconds_sum",
				"scale_scheduler_pass_duration_seconds_count"
			])
		);
		const check = checkMetrics(text2);
		expect(check.output).toBe("");
		expect(check.status).toBe(0);
	});

	it("names by the book: base units, _total on counters only, no rates", async () => {
		const text = await scrape(port);
		expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
		expect(text).toMatch(/^# TYPE moleculer_request_time_seconds histogram$/m);
		expect(text).not.toMatch(/_rate[{ ]/);
		expect(text).not.toMatch(/quantile=/);
		expect(text).not.toMatch(/_ms[_{ ]/);
		for (const line of text.split("\n").filter(l => l.startsWith("# TYPE "))) {
			const [, , name, type] = line.split(" ");
			expect([name, name.endsWith("_total")]).toEqual([name, type === "counter"]);
		}
	});

	it("drops a job type's depth to 0 when nothing of it is queued", async () => {
		await tdb.db.query("DELETE FROM queue");
		const status = svc.broker.getLocalService("status") as any;
		status.applyGauges(await readGauges(tdb.db, 15000));
		expect(sample(await scrape(port), "scale_queue_depth", { job_type: "counted:2.0" })).toBe(
			0
		);
	});
});

describe("job outcomes outside the scheduler", () => {
	let tdb: TestDatabase;
	let svc: TestApi;
	let port: number;

	beforeAll(async () => {
		tdb = await createTestDatabase();
		port = await freePort();
		// no scheduler: each end below is written by the service that counts it
		svc = await startServices(tdb.url, ["api", "job-types", "queue", "jobs", "nodes"], {
			METRICS_PORT: String(port)
		});
	}, 30000);

	afterAll(async () => {
		await svc?.stop();
		await tdb?.drop();
	});

	async function q(text: string, bind: unknown[] = []): Promise<any[]> {
		const [rows] = await tdb.db.query(text, { bind });
		return rows as any[];
	}

	it("counts a node-lost failure (nodes) and a user's cancel (jobs) once each", async () => {
		const type = await request("POST", `${svc.api}/job-types/`, {
			name: "ends",
			version: "1.0",
			title: "Ends",
			interface: {
				version: "1.0",
				command: "/bin/true",
				command_arguments: "",
				input_data: [],
				output_data: []
			}
		});
		expect(type.status).toBe(201);
		const newJob = async () => {
			const res = await request("POST", `${svc.api}/queue/new-job/`, {
				job_type_id: type.body.id,
				job_data: { version: "1.0", input_data: [], output_data: [] }
			});
			expect(res.status).toBe(201);
			return res.body.id as number;
		};
		const counted = async () => {
			const text = await scrape(port);
			const check = checkMetrics(text);
			expect(check.output).toBe("");
			expect(check.status).toBe(0);
			return {
				failed: sample(text, "scale_jobs_failed_total", {
					job_type: "ends:1.0",
					error_category: "SYSTEM"
				}),
				canceled: sample(text, "scale_jobs_canceled_total", { job_type: "ends:1.0" })
			};
		};
		expect(await counted()).toEqual({ failed: null, canceled: null });

		// a QUEUED job canceled
		const queued = await newJob();
		expect(
			(await request("PATCH", `${svc.api}/jobs/${queued}/`, { status: "CANCELED" })).status
		).toBe(200);
		expect(await counted()).toEqual({ failed: null, canceled: 1 });
		// canceled again: refused, not counted
		expect(
			(await request("PATCH", `${svc.api}/jobs/${queued}/`, { status: "CANCELED" })).status
		).toBe(400);

		// a RUNNING execution on its last try that its agent no longer lists: node-lost, for good
		const lost = await newJob();
		const { nodeId } = await svc.broker.call<{ nodeId: number }, any>("nodes.register", {
			agentId: svc.broker.nodeID,
			slaveId: "s-ends",
			hostname: "ends.example.com",
			resources: { cpus: 4, mem: 4096, disk: 10000 }
		});
		await q("DELETE FROM queue WHERE job_id = $1", [lost]);
		await q(
			`UPDATE job_exe SET status = 'RUNNING', node_id = $2, agent_id = $3,
				started = now() - interval '1 hour' WHERE job_id = $1`,
			[lost, nodeId, svc.broker.nodeID]
		);
		await q(
			`UPDATE job SET status = 'RUNNING', num_exes = 1, max_tries = 1, started = now()
			 WHERE id = $1`,
			[lost]
		);
		const beat = () =>
			svc.broker.call("nodes.heartbeat", {
				agentId: svc.broker.nodeID,
				slaveId: "s-ends",
				resources: { cpus: 4, mem: 4096, disk: 10000 },
				running: []
			});
		await beat();
		expect((await q("SELECT status FROM job WHERE id = $1", [lost]))[0].status).toBe("FAILED");
		expect(await counted()).toEqual({ failed: 1, canceled: 1 });
		// the next heartbeat finds nothing more to fail
		await beat();
		// a FAILED job canceled (Scale allows it): it had ended, it is not counted again
		expect(
			(await request("PATCH", `${svc.api}/jobs/${lost}/`, { status: "CANCELED" })).status
		).toBe(200);
		expect(await counted()).toEqual({ failed: 1, canceled: 1 });
	});
});

describe("a node agent's metrics", () => {
	it("pass promtool check metrics, with the process's own by their standard names", async () => {
		const port = await freePort();
		const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "metrics-agent-"));
		const agent = await startServices("", ["node-agent"], {
			METRICS_PORT: String(port),
			AGENT_WORK_DIR: workDir
		});
		try {
			const text = await scrape(port);
			expect(text).toMatch(/^process_cpu_seconds_total [\d.e-]+$/m);
			expect(text).toMatch(/^moleculer_broker_local_services \d+$/m);
			const check = checkMetrics(text);
			expect(check.output).toBe("");
			expect(check.status).toBe(0);
		} finally {
			await agent.stop();
			fs.rmSync(workDir, { recursive: true, force: true });
		}
	});
});

describe("without METRICS_PORT", () => {
	it("serves no metrics", async () => {
		const tdb = await createTestDatabase();
		const svc = await startServices(tdb.url, ["status"]);
		try {
			expect(svc.broker.isMetricsEnabled()).toBe(false);
		} finally {
			await svc.stop();
			await tdb.drop();
		}
	});
});

describe("where the metrics port binds", () => {
	/** The address the Prometheus reporter of `svc`'s broker listens on, once it does. */
	async function metricsAddress(svc: TestApi): Promise<{ address: string; port: number }> {
		const server = (svc.broker as any).metrics.reporter[0].server;
		while (!server.listening) await new Promise(r => setTimeout(r, 20));
		return server.address();
	}

	it.each([
		["loopback by default, not the API's HOST", {}, "127.0.0.1"],
		["METRICS_HOST when set", { METRICS_HOST: "127.0.0.2" }, "127.0.0.2"]
	])("is %s", async (_, env: Record<string, string>, address) => {
		const tdb = await createTestDatabase();
		const svc = await startServices(tdb.url, ["api", "status"], {
			HOST: "127.0.0.3",
			METRICS_PORT: String(await freePort()),
			...env
		});
		try {
			const bound = await metricsAddress(svc);
			expect(bound.address).toBe(address);
			expect((await fetch(`http://${address}:${bound.port}/metrics`)).status).toBe(200);
		} finally {
			await svc.stop();
			await tdb.drop();
		}
	});
});
