import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, type Reply } from "../helpers/broker";
import { startNats, type NatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import { startProcess, waitUntil, type ServiceProcess } from "../helpers/process";
import { job as script, makeJobsExecutable } from "../fixtures/agent";

/** The control plane, less `triggers`, which runs in a process of its own to be killed. */
const CONTROL_PLANE = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"ingest",
	"nodes",
	"scheduler"
];

const FILES = 200;
/** after this many files the triggers process is killed, */
const KILL_TRIGGERS_AT = 30;
/** after this many the agent running the strike's monitor, */
const KILL_AGENT_AT = 80;
/** and after this many the triggers process is started again. */
const RESTART_TRIGGERS_AT = 150;
/** the agent is killed after a burst of this many files, */
const BURST = 5;
/** of at most this many bursts. */
const MAX_BURSTS = 12;
const PAUSE_MS = 30;

const NAMES = Array.from({ length: FILES }, (_, i) => `f-${String(i).padStart(3, "0")}.txt`);
const contentOf = (name: string) => `the content of ${name}\n`;

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

interface ExeRow {
	id: number;
	status: string;
	agent_id: string | null;
	node_id: number | null;
	error_name: string | null;
}

/**
 * A control plane, a triggers process and two agents, each its own OS process, over a real
 * nats-server. Files arrive in a strike's directory while the triggers process is killed (SIGKILL)
 * and later started again (the ingests' jobs do not wait for it), and while the agent running the
 * strike's monitor is killed (SIGKILL):
 * the strike's job moves to the other agent, whose monitor takes up what the first left, and in
 * the end every file is ingested once, stored once in the workspace, and has one INGEST event,
 * processed once, and one job of the ingest rule.
 */
describe("a strike whose agent and triggers process die mid-stream", () => {
	let nats: NatsServer;
	let db: TestDatabase;
	let triggers: ServiceProcess;
	const agents: Record<string, ServiceProcess> = {};
	/** every process started, in order, for the output on failure */
	const started: [string, ServiceProcess][] = [];
	let api: string;
	let root: string;
	let strikeDir: string;
	let stagingDir: string;
	let rawDir: string;

	function outputs(): string {
		return started.map(([name, p]) => `${name}:\n${p.output()}`).join("\n");
	}

	/** Runs `step`; on failure, adds the processes' output to the message. */
	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			const error = err as Error;
			error.message = `${error.message}\n${outputs()}`;
			throw error;
		}
	}

	function start(name: string, env: Record<string, string>): ServiceProcess {
		const p = startProcess(env);
		started.push([name, p]);
		return p;
	}

	function startTriggers(): ServiceProcess {
		return start(
			`triggers (#${started.filter(([n]) => n.startsWith("triggers")).length + 1})`,
			{
				SERVICES: "triggers",
				TRANSPORTER: nats.url,
				NODE_ID: "cluster-triggers",
				DATABASE_URL: db.url
			}
		);
	}

	async function q<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await db.db.query(sql, { bind });
		return rows as T[];
	}

	async function ok(method: string, url: string, body?: unknown, status = 200): Promise<any> {
		const res: Reply = await request(method, `${api}${url}`, body);
		if (res.status !== status)
			throw new Error(`${method} ${url}: expected ${status}, got ${res.status}: ${res.text}`);
		return res.body;
	}

	/** Polls `probe` until `done` says yes; on time-out, the last value is in the message. */
	async function until<T>(
		what: string,
		probe: () => Promise<T>,
		done: (value: T) => boolean,
		timeoutMs: number
	): Promise<T> {
		const deadline = Date.now() + timeoutMs;
		let last: T | undefined;
		let failure: unknown = null;
		for (;;) {
			try {
				last = await probe();
				failure = null;
				if (done(last)) return last;
			} catch (err) {
				failure = err;
			}
			if (Date.now() > deadline) {
				const seen = failure ? String(failure) : JSON.stringify(last)?.slice(0, 3000);
				throw new Error(`timed out waiting for ${what}; last: ${seen}\n${outputs()}`);
			}
			await sleep(100);
		}
	}

	const exes = (jobId: number) =>
		q<ExeRow>(
			`SELECT e.id, e.status, e.agent_id, e.node_id, er.name AS error_name
			 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
			 WHERE e.job_id = $1 ORDER BY e.id`,
			[jobId]
		);

	/** Delivers file `i`: mostly written aside and renamed in, every fifth under the suffix. */
	function deliver(i: number): void {
		const name = NAMES[i];
		const temp =
			i % 5 === 0 ? path.join(strikeDir, `${name}_tmp`) : path.join(stagingDir, name);
		fs.writeFileSync(temp, contentOf(name));
		fs.renameSync(temp, path.join(strikeDir, name));
	}

	/** Every regular file under `dir`, relative to it. */
	function filesUnder(dir: string): string[] {
		if (!fs.existsSync(dir)) return [];
		return (fs.readdirSync(dir, { recursive: true }) as string[]).filter(rel =>
			fs.statSync(path.join(dir, rel)).isFile()
		);
	}

	beforeAll(async () => {
		makeJobsExecutable();
		root = fs.mkdtempSync(path.join(os.tmpdir(), "strike-restart-"));
		fs.chmodSync(root, 0o755);
		strikeDir = path.join(root, "incoming");
		stagingDir = path.join(root, "staging");
		rawDir = path.join(root, "raw");
		for (const dir of [strikeDir, stagingDir, rawDir]) fs.mkdirSync(dir, { mode: 0o755 });
		nats = await startNats();
		db = await createTestDatabase();
		const port = await freePort();
		api = `http://127.0.0.1:${port}/api`;
		start("control plane", {
			SERVICES: CONTROL_PLANE.join(","),
			TRANSPORTER: nats.url,
			NODE_ID: "cluster-control",
			DATABASE_URL: db.url,
			PORT: String(port)
		});
		triggers = startTriggers();
		for (const id of ["agent-1", "agent-2"]) {
			const workDir = path.join(root, id);
			fs.mkdirSync(workDir, { mode: 0o755 });
			agents[id] = start(id, {
				SERVICES: "node-agent",
				TRANSPORTER: nats.url,
				NODE_ID: id,
				AGENT_WORK_DIR: workDir
			});
		}
		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${api}/nodes/`);
					if (res.status !== 200) return false;
					const active = res.body.results.filter((n: any) => n.is_active);
					const live = await q<{ agent_id: string }>(
						"SELECT agent_id FROM node WHERE is_active AND agent_id IS NOT NULL"
					);
					return active.length === 2 && live.length === 2;
				},
				60000,
				"two active nodes"
			)
		);
	}, 90000);

	afterAll(async () => {
		for (const [, p] of started) await p.stop("SIGKILL").catch(() => undefined);
		await db?.drop().catch(() => undefined);
		await nats?.stop().catch(() => undefined);
		if (root) fs.rmSync(root, { recursive: true, force: true });
	}, 60000);

	it("ingests every file once, and makes one event and one job of each", async () => {
		await ok(
			"POST",
			"/workspaces/",
			{
				name: "raw",
				title: "Raw",
				json_config: { version: "1.0", broker: { type: "host", host_path: rawDir } }
			},
			201
		);
		// Paused: its jobs are queued, not run; what counts here is how many there are.
		const type = await ok(
			"POST",
			"/job-types/",
			{
				name: "after-ingest",
				version: "1.0",
				title: "After Ingest",
				is_paused: true,
				cpus_required: 0.25,
				mem_required: 16,
				disk_out_const_required: 0,
				timeout: 60,
				interface: {
					version: "1.0",
					command: script("print-args.sh"),
					command_arguments: "${job_output_dir} ${input}",
					input_data: [{ name: "input", type: "file" }],
					output_data: [{ name: "args", type: "file" }]
				},
				trigger_rule: {
					type: "INGEST",
					configuration: {
						condition: { data_types: ["tagged"] },
						data: { input_data_name: "input", workspace_name: "raw" }
					}
				}
			},
			201
		);

		const created = await ok("POST", "/strike/create/", {
			name: "incoming",
			title: "Incoming",
			configuration: {
				version: "1.0",
				mount: strikeDir,
				transfer_suffix: "_tmp",
				files_to_ingest: [
					{
						filename_regex: "^f-\\d+\\.txt$",
						data_types: ["tagged"],
						workspace_path: "in",
						workspace_name: "raw"
					}
				]
			}
		});
		const strikeId: number = created.strike_id;
		const strike = await withOutput(async () => {
			let last: any = null;
			await waitUntil(
				async () => {
					last = await ok("GET", `/strikes/${strikeId}/`);
					return last.job?.status === "RUNNING";
				},
				60000,
				"the strike's job to run"
			);
			return last;
		});
		const strikeJobId: number = strike.job.id;

		// Which agent runs the monitor: the RUNNING execution's node, whose agent the database names.
		const listed = await ok("GET", `/job-executions/?job_id=${strikeJobId}&order=-id`);
		const running = listed.results.filter((e: any) => e.status === "RUNNING");
		expect(running).toHaveLength(1);
		const first = running[0];
		const [firstNode] = await q<{ agent_id: string }>(
			"SELECT agent_id FROM node WHERE id = $1",
			[first.node.id]
		);
		const lostAgent = firstNode.agent_id;
		expect(Object.keys(agents)).toContain(lostAgent);
		const otherAgent = lostAgent === "agent-1" ? "agent-2" : "agent-1";
		const [otherNode] = await q<{ id: number }>("SELECT id FROM node WHERE agent_id = $1", [
			otherAgent
		]);
		// the monitor is watching once the strike's directory has its aside folders
		await withOutput(() =>
			waitUntil(
				async () => fs.existsSync(path.join(strikeDir, "errored")),
				30000,
				"the monitor to watch the strike's directory"
			)
		);

		let next = 0;
		let waitingAtRestart = -1;
		/** Delivers the files up to `end`, killing and restarting the triggers process on the way. */
		const deliverUntil = async (end: number, pauseMs: number) => {
			for (; next < end; next++) {
				if (next === KILL_TRIGGERS_AT) await triggers.stop("SIGKILL");
				if (next === RESTART_TRIGGERS_AT) {
					const [row] = await q<{ n: number }>(
						`SELECT count(*)::int AS n FROM trigger_event
						 WHERE type = 'INGEST' AND processed IS NULL`
					);
					waitingAtRestart = row.n;
					triggers = startTriggers();
				}
				deliver(next);
				if (pauseMs > 0) await sleep(pauseMs);
			}
		};
		await deliverUntil(KILL_AGENT_AT, PAUSE_MS);

		// The agent is killed in the middle of a move: files come in bursts, and after each the
		// agent is frozen (SIGSTOP) until its calls on the way have landed; it is killed
		// (SIGKILL) if files are recorded being moved (moves under way, or INGESTING ingests)
		// while still in the strike's directory, else let go on (SIGCONT).
		const agent = agents[lostAgent];
		let caught: string[] = [];
		while (caught.length === 0 && next < KILL_AGENT_AT + MAX_BURSTS * BURST) {
			await deliverUntil(next + BURST, 0);
			await sleep(Math.random() * 10);
			agent.proc.kill("SIGSTOP");
			await sleep(50);
			const ingesting = await q<{ file_name: string }>(
				`SELECT file_name FROM ingest WHERE strike_id = $1 AND status = 'INGESTING'
				 UNION ALL SELECT file_name FROM ingest_move WHERE strike_id = $1`,
				[strikeId]
			);
			caught = ingesting
				.map(r => r.file_name)
				.filter(name => fs.existsSync(path.join(strikeDir, name)));
			if (caught.length === 0) agent.proc.kill("SIGCONT");
		}
		await agent.stop("SIGKILL");
		const [{ n: ingestedAtKill }] = await q<{ n: number }>(
			`SELECT count(*)::int AS n FROM ingest WHERE strike_id = $1 AND status = 'INGESTED'`,
			[strikeId]
		);
		await deliverUntil(FILES, PAUSE_MS);

		// The monitor was at work when its agent died: it had ingested files, and recorded some it
		// had not moved yet.
		expect(ingestedAtKill).toBeGreaterThan(0);
		expect(caught.length).toBeGreaterThan(0);
		// No event waited for the triggers process while it was down: an ingest's transaction
		// writes its INGEST event processed, with the rule's job (lib/triggers recordFileEvents).
		expect(waitingAtRestart).toBe(0);

		// The strike's job runs again, on the other agent.
		await until(
			"the strike's job to run again",
			() => exes(strikeJobId),
			rows => rows.some(r => r.id > first.id && r.status === "RUNNING"),
			60000
		);
		await until(
			"every file to be ingested",
			async () =>
				(
					await q<{ status: string; n: number }>(
						`SELECT status, count(*)::int AS n FROM ingest WHERE strike_id = $1
						 GROUP BY status ORDER BY status`,
						[strikeId]
					)
				).map(r => `${r.status}: ${r.n}`),
			counts => counts.join() === `INGESTED: ${FILES}`,
			60000
		);
		// no move is left under way: each was written as its ingest
		const [{ n: moving }] = await q<{ n: number }>(
			`SELECT count(*)::int AS n FROM ingest_move WHERE strike_id = $1`,
			[strikeId]
		);
		expect(moving).toBe(0);
		await until(
			"every INGEST event to be processed",
			async () =>
				(
					await q<{ waiting: number; events: number }>(
						`SELECT count(*) FILTER (WHERE processed IS NULL)::int AS waiting,
							count(*)::int AS events
						 FROM trigger_event WHERE type = 'INGEST'`
					)
				)[0],
			row => row.waiting === 0 && row.events >= FILES,
			30000
		);
		await sleep(1000);

		await withOutput(async () => {
			const rows = await exes(strikeJobId);
			expect(rows[0]).toMatchObject({
				id: first.id,
				status: "FAILED",
				agent_id: lostAgent,
				node_id: first.node.id,
				error_name: "node-lost"
			});
			const live = rows.filter(r => r.status === "RUNNING");
			expect(live).toHaveLength(1);
			expect(live[0]).toMatchObject({ agent_id: otherAgent, node_id: otherNode.id });
			expect(live[0].id).toBeGreaterThan(first.id);
			const now = await ok("GET", `/strikes/${strikeId}/`);
			expect(now.job).toMatchObject({ id: strikeJobId, status: "RUNNING" });
			const exesListed = await ok("GET", `/job-executions/?job_id=${strikeJobId}&order=-id`);
			expect(exesListed.results[0]).toMatchObject({
				id: live[0].id,
				status: "RUNNING",
				node: { id: otherNode.id }
			});
			expect(exesListed.results.find((e: any) => e.id === first.id)?.status).toBe("FAILED");

			// One ingest per file, INGESTED: none lost, none twice, none left open or aside.
			const ingests = await q<{
				file_name: string;
				status: string;
				file_path: string;
				file_size: number;
				source_file_id: number;
				data_type: string[];
			}>(
				`SELECT file_name, status, file_path, file_size::int AS file_size, source_file_id,
					data_type
				 FROM ingest WHERE strike_id = $1 ORDER BY file_name, id`,
				[strikeId]
			);
			expect(ingests.map(r => r.file_name)).toEqual(NAMES);
			expect(ingests.filter(r => r.status !== "INGESTED")).toEqual([]);

			// One source file per name, where its ingest says, holding what was written.
			const sources = await q<{
				id: number;
				file_name: string;
				file_path: string;
				file_size: number;
				data_type: string[];
			}>(
				`SELECT id, file_name, file_path, file_size::int AS file_size, data_type
				 FROM scale_file
				 WHERE file_type = 'SOURCE' ORDER BY file_name, id`
			);
			expect(sources.map(s => s.file_name)).toEqual(NAMES);
			for (const [i, s] of sources.entries()) {
				const ingest = ingests[i];
				expect(ingest.source_file_id).toBe(s.id);
				expect(s.file_path).toBe(ingest.file_path);
				expect(s.file_path).toMatch(
					new RegExp(`^in/\\d{4}/\\d{2}/\\d{2}/${s.file_name.replace(".", "\\.")}$`)
				);
				const stored = path.join(rawDir, s.file_path);
				expect(fs.readFileSync(stored, "utf8")).toBe(contentOf(s.file_name));
				expect(s.file_size).toBe(Buffer.byteLength(contentOf(s.file_name)));
				expect(ingest.file_size).toBe(s.file_size);
			}
			// Each keeps the data types its strike rule gave it (what the ingest rule matches).
			const untagged = (list: { file_name: string; data_type: string[] }[]) =>
				list.filter(r => r.data_type.join() !== "tagged").map(r => r.file_name);
			expect(untagged(ingests)).toEqual([]);
			expect(untagged(sources)).toEqual([]);
			// The workspace holds those files and nothing else (no copy, no leftover).
			expect(filesUnder(rawDir).sort()).toEqual(sources.map(s => s.file_path).sort());
			// Nothing is left in the strike's directory, nor put aside.
			expect(filesUnder(strikeDir)).toEqual([]);
			expect(filesUnder(stagingDir)).toEqual([]);

			// One INGEST event per file, each processed, and one job of the rule per file.
			const events = await q<{ id: number; file_name: string; processed: Date | null }>(
				`SELECT id, description->>'file_name' AS file_name, processed FROM trigger_event
				 WHERE type = 'INGEST' ORDER BY description->>'file_name', id`
			);
			expect(events.map(e => e.file_name)).toEqual(NAMES);
			expect(events.filter(e => e.processed === null)).toEqual([]);
			const jobs = await q<{
				id: number;
				event_id: number;
				file_name: string;
				file_id: string;
			}>(
				`SELECT j.id, j.event_id, e.description->>'file_name' AS file_name,
					e.description->>'file_id' AS file_id
				 FROM job j JOIN trigger_event e ON e.id = j.event_id
				 WHERE j.job_type_id = $1 ORDER BY e.description->>'file_name', j.id`,
				[type.id]
			);
			expect(jobs.map(j => j.file_name)).toEqual(NAMES);
			expect(jobs.map(j => j.event_id)).toEqual(events.map(e => e.id));
			expect(jobs.map(j => Number(j.file_id))).toEqual(sources.map(s => s.id));
			const byRest = await ok("GET", `/jobs/?job_type_id=${type.id}&page_size=1000`);
			expect(byRest.count).toBe(FILES);
		});
	}, 150000);
});
