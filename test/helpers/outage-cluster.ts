import fs from "fs";
import os from "os";
import path from "path";
import type { Sequelize } from "sequelize";
import { LocalCluster } from "../../lib/cluster/cluster";
import { createSequelize } from "../../lib/db/connection";
import { schedulerLeader } from "../../lib/records/status";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort, freePortRun } from "./ports";

/**
 * A cluster on this machine (lib/cluster: nats-server over TLS with a user per process, its own
 * embedded PostgreSQL, control planes and agents, each an OS process) with a job type that
 * sleeps and writes one product, for outages of NATS and of PostgreSQL under running jobs:
 * test/cluster/outages.test.ts asserts on them, bench/outages.ts prints their figures.
 */

// from the sources, run as TypeScript (the tests) or from dist/ (the bench)
const JOB = path.join(PROJECT_ROOT, "test", "fixtures", "jobs", "sleep-then-output.sh");
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

export interface OutageClusterOptions {
	controlPlanes: number;
	agents: number;
	/** the processes' LOG_LEVEL (warn) */
	logLevel?: string;
	/** every output line of the processes (prefixed by their names) */
	write?: (line: string) => void;
}

/** How soon work was placed again (ms), and the jobs each step queued. */
export interface Resumed {
	/**
	 * from the server's return to the placement of the jobs queued while it was down (NATS), or
	 * of the first job the API took once it was back (PostgreSQL: the API needs it)
	 */
	backToPlaced: number;
	/** ... and to their start on the agent (its step report) */
	backToStarted: number;
	/** from the 201 of a job queued once it was back to that job's placement */
	queuedToPlaced: number;
	queuedToStarted: number;
	/** from the server's return to the first 201 of a new job (the API serving again) */
	backToQueued: number;
	jobIds: number[];
}

export class OutageCluster {
	readonly log: string[] = [];
	cluster!: LocalCluster;
	db!: Sequelize;
	private dir = "";
	private typeId = 0;
	private wsId = 0;

	constructor(private readonly opts: OutageClusterOptions) {}

	async start(): Promise<void> {
		this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "outages-"));
		fs.chmodSync(this.dir, 0o755);
		const ws = path.join(this.dir, "products");
		fs.mkdirSync(ws, { mode: 0o777 });
		fs.chmodSync(ws, 0o777);
		this.cluster = new LocalCluster({
			dataDir: path.join(this.dir, "cluster"),
			apiPort: await freePortRun(this.opts.controlPlanes),
			natsPort: await freePort(),
			pgPort: await freePort(),
			controlPlanes: this.opts.controlPlanes,
			agents: this.opts.agents,
			logLevel: this.opts.logLevel ?? "warn",
			write: line => {
				this.log.push(line);
				this.opts.write?.(line);
			}
		});
		await this.cluster.start();
		this.db = createSequelize(this.cluster.databaseUrl, { poolMax: 2 });
		await this.until(
			async () =>
				Number((await this.q("SELECT count(*) AS n FROM node WHERE is_active"))[0].n) ===
					this.opts.agents && (await schedulerLeader(this.db)) !== null,
			90000,
			"the agents registered and a leader"
		);
		this.wsId = (
			await this.call("POST", "/workspaces/", {
				name: "products",
				json_config: { broker: { type: "host", host_path: ws } }
			})
		).id;
		this.typeId = (
			await this.call("POST", "/job-types/", {
				name: "sleep-then-output",
				version: "1.0",
				cpus_required: 0.1,
				mem_required: 16,
				// a second try would show as a second execution: the tests want one per job
				max_tries: 3,
				interface: {
					version: "1.0",
					command: JOB,
					command_arguments: "${seconds} ${job_output_dir}",
					input_data: [{ name: "seconds", type: "property" }],
					output_data: [{ name: "out", type: "file" }]
				}
			})
		).id;
	}

	/** A statement on the cluster's database (tried again while PostgreSQL is away). */
	async q<T = any>(sql: string, bind: unknown[] = []): Promise<T[]> {
		for (let attempt = 0; ; attempt++) {
			try {
				return (await this.db.query(sql, { bind }))[0] as T[];
			} catch (err) {
				if (attempt > 600) throw err;
				await sleep(100);
			}
		}
	}

	/** A request to the first control plane that answers 2xx; 5xx and no answer are tried again. */
	async call(method: string, p: string, body?: unknown, timeoutMs = 60000): Promise<any> {
		const deadline = Date.now() + timeoutMs;
		let last = "";
		for (;;) {
			for (let i = 0; i < this.opts.controlPlanes; i++) {
				try {
					const res = await fetch(`${this.cluster.apiUrl(i)}${p}`, {
						method,
						headers: body ? { "Content-Type": "application/json" } : {},
						body: body ? JSON.stringify(body) : undefined,
						signal: AbortSignal.timeout(10000)
					});
					const text = await res.text();
					if (res.status < 300) return JSON.parse(text);
					last = `${res.status} ${text}`;
					if (res.status < 500) throw new Error(`${method} ${p}: ${last}`);
				} catch (err) {
					if (String((err as Error).message).startsWith(`${method} ${p}: 4`)) throw err;
					last = (err as Error).message;
				}
			}
			if (Date.now() > deadline) throw new Error(`${method} ${p}: no answer: ${last}`);
			await sleep(50);
		}
	}

	/** The first control plane's answer to a request, whatever its status. */
	async raw(method: string, p: string): Promise<{ status: number; retryAfter: string | null }> {
		const res = await fetch(`${this.cluster.apiUrl(0)}${p}`, {
			method,
			signal: AbortSignal.timeout(15000)
		});
		await res.text();
		return { status: res.status, retryAfter: res.headers.get("retry-after") };
	}

	async queue(seconds: number): Promise<number> {
		return (
			await this.call("POST", "/queue/new-job/", {
				job_type_id: this.typeId,
				job_data: {
					version: "1.0",
					input_data: [{ name: "seconds", value: String(seconds) }],
					output_data: [{ name: "out", workspace_id: this.wsId }]
				}
			})
		).id;
	}

	async until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
		const deadline = Date.now() + timeoutMs;
		while (!(await check().catch(() => false))) {
			if (Date.now() > deadline)
				throw new Error(`timed out waiting for ${what}\n${this.log.slice(-60).join("\n")}`);
			await sleep(20);
		}
	}

	/** Waits until every one of the jobs runs on its agent (its start step recorded). */
	async started(jobIds: number[]): Promise<void> {
		await this.until(
			async () =>
				Number(
					(
						await this.q(
							`SELECT count(*) AS n FROM job_exe WHERE job_id = ANY($1::int[])
							 AND status = 'RUNNING' AND job_started IS NOT NULL`,
							[jobIds]
						)
					)[0].n
				) === jobIds.length,
			60000,
			`jobs ${jobIds.join(", ")} running`
		);
	}

	/** Ms from `since` until the jobs are placed (RUNNING on a node), then started there. */
	async placed(jobIds: number[], since: number): Promise<{ placed: number; started: number }> {
		const count = async (condition: string) =>
			Number(
				(
					await this.q(
						`SELECT count(*) AS n FROM job_exe WHERE job_id = ANY($1::int[]) AND ${condition}`,
						[jobIds]
					)
				)[0].n
			);
		await this.until(
			async () => (await count("node_id IS NOT NULL")) === jobIds.length,
			60000,
			`jobs ${jobIds.join(", ")} placed`
		);
		const placed = Date.now() - since;
		await this.until(
			async () => (await count("job_started IS NOT NULL")) === jobIds.length,
			60000,
			`jobs ${jobIds.join(", ")} started`
		);
		return { placed, started: Date.now() - since };
	}

	/**
	 * nats-server stopped for `downMs` while `running` jobs of `seconds` run on the agents; jobs
	 * queued during the outage (the API and the scheduler need PostgreSQL, not NATS) and one
	 * queued once it is back: how soon they are placed.
	 */
	async natsOutage(downMs: number, running: number, seconds: number): Promise<Resumed> {
		const before = await Promise.all(
			Array.from({ length: running }, () => this.queue(seconds))
		);
		await this.started(before);
		await this.cluster.stopNats();
		await sleep(Math.min(1000, downMs / 2));
		const during = [await this.queue(2), await this.queue(2)];
		await sleep(downMs - Math.min(1000, downMs / 2));
		await this.cluster.startNats();
		const back = Date.now();
		const duringPlaced = this.placed(during, back);
		const after = await this.queue(2);
		const queued = Date.now();
		const [d, a] = await Promise.all([duringPlaced, this.placed([after], queued)]);
		return {
			backToPlaced: d.placed,
			backToStarted: d.started,
			queuedToPlaced: a.placed,
			queuedToStarted: a.started,
			backToQueued: queued - back,
			jobIds: [...before, ...during, after]
		};
	}

	/**
	 * PostgreSQL stopped for `downMs` while `running` jobs of `seconds` run on the agents (they
	 * end while it is down); `during` is called meanwhile (to look at the API). Then a job
	 * queued as soon as the API takes one: how soon it is placed.
	 */
	async postgresOutage(
		downMs: number,
		running: number,
		seconds: number,
		during?: () => Promise<void>
	): Promise<Resumed> {
		const before = await Promise.all(
			Array.from({ length: running }, () => this.queue(seconds))
		);
		await this.started(before);
		const pg = this.cluster.pg!;
		await pg.stop();
		const stopped = Date.now();
		await during?.();
		await sleep(Math.max(0, downMs - (Date.now() - stopped)));
		await pg.start();
		const back = Date.now();
		const after = await this.queue(2);
		const queued = Date.now();
		const a = await this.placed([after], back);
		return {
			backToPlaced: a.placed,
			backToStarted: a.started,
			queuedToPlaced: a.placed - (queued - back),
			queuedToStarted: a.started - (queued - back),
			backToQueued: queued - back,
			jobIds: [...before, after]
		};
	}

	/** Waits for the jobs to end; answers the jobs not COMPLETED with exactly one execution. */
	async notCompletedOnce(jobIds: number[], timeoutMs = 120000): Promise<unknown[]> {
		await this.until(
			async () =>
				Number(
					(
						await this.q(
							`SELECT count(*) AS n FROM job WHERE id = ANY($1::int[])
							 AND status IN ('COMPLETED', 'FAILED', 'CANCELED')`,
							[jobIds]
						)
					)[0].n
				) === jobIds.length,
			timeoutMs,
			`${jobIds.length} jobs to end`
		);
		return this.q(
			`SELECT j.id, j.status, count(e.id)::int AS executions,
				string_agg(e.status || coalesce(':' || er.name, ''), ',' ORDER BY e.id) AS ends
			 FROM job j JOIN job_exe e ON e.job_id = j.id LEFT JOIN error er ON er.id = e.error_id
			 WHERE j.id = ANY($1::int[]) GROUP BY j.id
			 HAVING j.status <> 'COMPLETED' OR count(e.id) <> 1
				OR bool_or(e.status <> 'COMPLETED')
			 ORDER BY j.id`,
			[jobIds]
		);
	}

	/**
	 * SIGTERM to every process (agents first, then the control planes, as `npm run cluster`
	 * stops them): how long each took to exit, and its exit code.
	 */
	async terminate(): Promise<{ name: string; ms: number; code: number | null }[]> {
		const stops: { name: string; ms: number; code: number | null }[] = [];
		const stop = async (p: LocalCluster["processes"][number]) => {
			const started = Date.now();
			await p.stop("SIGTERM", 30000);
			stops.push({ name: p.name, ms: Date.now() - started, code: p.proc?.exitCode ?? null });
		};
		await Promise.all(this.cluster.agents.map(stop));
		await Promise.all([...this.cluster.extras, ...this.cluster.controls].map(stop));
		return stops;
	}

	async stop(): Promise<void> {
		await this.db?.close().catch(() => undefined);
		await this.cluster?.stop().catch(() => undefined);
		if (this.dir) fs.rmSync(this.dir, { recursive: true, force: true });
	}
}
