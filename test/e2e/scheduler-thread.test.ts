import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request } from "../helpers/broker";
import { freePort } from "../helpers/ports";
import { startProcess, waitUntil, type ServiceProcess } from "../helpers/process";

/**
 * `npm start`'s process with SCHEDULER_THREAD=true: every service, the scheduler in a worker
 * thread of its own joined by a ThreadTransporter. Jobs run through it as through one broker
 * (placed by the thread's scheduler, run by the main thread's agent, their ends recorded by the
 * thread), and SIGTERM stops both threads cleanly.
 */
describe("the scheduler in a thread of its own (SCHEDULER_THREAD=true)", () => {
	let db: TestDatabase;
	let svc: ServiceProcess;
	let api: string;
	let root: string;

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "scheduler-thread-"));
		fs.chmodSync(root, 0o755);
		db = await createTestDatabase();
		const port = await freePort();
		api = `http://127.0.0.1:${port}/api`;
		svc = startProcess({
			SCHEDULER_THREAD: "true",
			DATABASE_URL: db.url,
			PORT: String(port),
			AGENT_WORK_DIR: path.join(root, "agent")
		});
		await waitUntil(
			async () =>
				/^stop with Ctrl-C/m.test(svc.output()) &&
				(await request("GET", `${api}/nodes/`)).body?.results?.length === 1,
			60000,
			`the service and its node\n${svc.output()}`
		);
	}, 90000);

	afterAll(async () => {
		await svc?.stop("SIGKILL").catch(() => undefined);
		await db?.drop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("runs jobs to completion and stops cleanly on SIGTERM", async () => {
		expect(svc.output()).toMatch(/scheduler: in a thread of its own, node \S+-scheduler/);
		expect(svc.output()).toMatch(/^services: (?!.*scheduler).*node-agent/m);
		const type = await request("POST", `${api}/job-types/`, {
			name: "echo",
			version: "1.0",
			cpus_required: 0.1,
			mem_required: 16,
			interface: { command: "/bin/echo", command_arguments: "hello" }
		});
		expect(type.status).toBe(201);
		const ids: number[] = [];
		for (let i = 0; i < 5; i++) {
			const job = await request("POST", `${api}/queue/new-job/`, {
				job_type_id: type.body.id,
				job_data: { input_data: [], output_data: [] }
			});
			expect(job.status).toBe(201);
			ids.push(job.body.id);
		}
		await waitUntil(
			async () => {
				const list = await request("GET", `${api}/jobs/?status=COMPLETED&page_size=100`);
				return ids.every(id => list.body.results.some((j: any) => j.id === id));
			},
			30000,
			`five jobs COMPLETED\n${svc.output()}`
		);
		// placed by the thread's scheduler, run by the main thread's agent
		const [rows] = await db.db.query(
			`SELECT e.agent_id, l.stdout FROM job_exe e JOIN job_exe_log l ON l.job_exe_id = e.id
			 WHERE e.job_id IN (${ids.join(",")})`
		);
		expect(rows).toHaveLength(5);
		for (const row of rows as { agent_id: string; stdout: string }[]) {
			expect(row.agent_id).not.toMatch(/-scheduler$/);
			expect(row.stdout).toBe("hello\n");
		}
		expect(await svc.stop("SIGTERM")).toBe(0);
	}, 60000);
});
