import fs from "fs";
import os from "os";
import path from "path";
import type { Sequelize } from "sequelize";
import { LocalCluster } from "../../lib/cluster/cluster";
import { createSequelize } from "../../lib/db/connection";
import { schedulerLeader } from "../../lib/records/status";
import { ensureNatsServer } from "../helpers/nats";
import { freePort, freePortRun } from "../helpers/ports";
import { waitUntil } from "../helpers/process";

const JOB = path.resolve(__dirname, "..", "fixtures", "jobs", "sleep-then-output.sh");
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/**
 * Faults survived, each on a cluster of its own (lib/cluster: nats-server with a password,
 * PostgreSQL, two control planes, two agents, each an OS process): the scheduler leader killed,
 * an agent restarted under its identity mid-task, NATS restarted, PostgreSQL restarted, all
 * under load; then every job COMPLETED once, with its one product.
 */
interface Rig {
	cluster: LocalCluster;
	db: Sequelize;
	dir: string;
	wsId: number;
	typeId: number;
	log: string[];
	call(method: string, p: string, body?: unknown): Promise<any>;
	queue(n: number): Promise<number[]>;
	q<T = any>(sql: string, bind?: unknown[]): Promise<T[]>;
	stop(): Promise<void>;
}

async function rig(name: string, seconds: number): Promise<Rig> {
	ensureNatsServer();
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), `faults-${name}-`));
	fs.chmodSync(dir, 0o755);
	const ws = path.join(dir, "products");
	fs.mkdirSync(ws, { mode: 0o777 });
	const log: string[] = [];
	const apiPort = await freePortRun(2);
	const cluster = new LocalCluster({
		dataDir: path.join(dir, "cluster"),
		apiPort,
		natsPort: await freePort(),
		pgPort: await freePort(),
		controlPlanes: 2,
		agents: 2,
		logLevel: "warn",
		write: line => {
			log.push(line);
			if (log.length > 400) log.shift();
		}
	});
	await cluster.start();
	const db = createSequelize(cluster.databaseUrl, { poolMax: 2 });
	const bases = [cluster.apiUrl(0), cluster.apiUrl(1)];
	const call = async (method: string, p: string, body?: unknown): Promise<any> => {
		let last = "";
		for (let attempt = 0; attempt < 60; attempt++) {
			for (const base of bases) {
				try {
					const res = await fetch(`${base}${p}`, {
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
			await sleep(500);
		}
		throw new Error(`${method} ${p}: no control plane answered: ${last}`);
	};
	const q = async <T = any>(sql: string, bind: unknown[] = []) =>
		(await db.query(sql, { bind }))[0] as T[];
	await waitUntil(
		async () =>
			Number((await q("SELECT count(*) AS n FROM node WHERE is_active"))[0].n) === 2 &&
			(await schedulerLeader(db)) !== null,
		60000,
		"two agents registered and a leader"
	);
	const wsId = (
		await call("POST", "/workspaces/", {
			name: "products",
			title: "Products",
			json_config: { broker: { type: "host", host_path: ws } }
		})
	).id;
	const typeId = (
		await call("POST", "/job-types/", {
			name: "sleep-then-output",
			version: "1.0",
			title: "Sleep Then Output",
			cpus_required: 0.1,
			mem_required: 16,
			max_tries: 5,
			interface: {
				version: "1.0",
				command: JOB,
				command_arguments: `${seconds} \${job_output_dir}`,
				input_data: [],
				output_data: [{ name: "out", type: "file" }]
			}
		})
	).id;
	const queue = async (n: number) => {
		const ids: number[] = [];
		for (let i = 0; i < n; i++)
			ids.push(
				(
					await call("POST", "/queue/new-job/", {
						job_type_id: typeId,
						job_data: {
							version: "1.0",
							input_data: [],
							output_data: [{ name: "out", workspace_id: wsId }]
						}
					})
				).id
			);
		return ids;
	};
	return {
		cluster,
		db,
		dir,
		wsId,
		typeId,
		log,
		call,
		queue,
		q,
		async stop() {
			await db.close().catch(() => undefined);
			await cluster.stop().catch(() => undefined);
			fs.rmSync(dir, { recursive: true, force: true });
		}
	};
}

/** Waits until every job of the type is terminal; then checks each COMPLETED once, one product. */
async function expectAllCompletedOnce(r: Rig, jobIds: number[], timeoutMs = 90000) {
	try {
		await waitUntil(
			async () => {
				const [row] = await r.q(
					`SELECT count(*) AS n FROM job WHERE id = ANY($1::int[])
					 AND status IN ('COMPLETED', 'FAILED', 'CANCELED')`,
					[jobIds]
				);
				return Number(row.n) === jobIds.length;
			},
			timeoutMs,
			`${jobIds.length} jobs to end`
		);
	} catch (err) {
		(err as Error).message += `\n${r.log.slice(-80).join("\n")}`;
		throw err;
	}
	const statuses = await r.q(
		"SELECT status, count(*)::int AS n FROM job WHERE id = ANY($1::int[]) GROUP BY status",
		[jobIds]
	);
	expect(statuses).toEqual([{ status: "COMPLETED", n: jobIds.length }]);
	const [twice] = await r.q(
		`SELECT count(*)::int AS n FROM (SELECT job_id FROM job_exe WHERE job_id = ANY($1::int[])
			AND status = 'COMPLETED' GROUP BY job_id HAVING count(*) > 1) x`,
		[jobIds]
	);
	expect(twice.n).toBe(0);
	const products = await r.q(
		`SELECT job_id, count(*)::int AS n FROM scale_file WHERE file_type = 'PRODUCT'
		 AND job_id = ANY($1::int[]) GROUP BY job_id`,
		[jobIds]
	);
	expect(products).toHaveLength(jobIds.length);
	expect(products.every(p => p.n === 1)).toBe(true);
	const [ghosts] = await r.q("SELECT count(*)::int AS n FROM job_exe WHERE status = 'RUNNING'");
	expect(ghosts.n).toBe(0);
}

describe("the scheduler leader killed under load", () => {
	let r: Rig;
	beforeAll(async () => {
		r = await rig("leader", 1);
	}, 120000);
	afterAll(() => r?.stop(), 60000);

	it("the other replica leads within 5 s and no job runs twice", async () => {
		const first = await r.queue(30);
		await waitUntil(
			async () =>
				Number(
					(await r.q("SELECT count(*) AS n FROM job_exe WHERE status = 'RUNNING'"))[0].n
				) > 0,
			30000,
			"jobs running"
		);
		const leader = (await schedulerLeader(r.db))!;
		const victim = r.cluster.byName(leader)!;
		const killed = Date.now();
		await victim.kill();
		let takeover = 0;
		for (;;) {
			const now = await schedulerLeader(r.db);
			if (now && now !== leader) {
				takeover = Date.now() - killed;
				break;
			}
			if (Date.now() - killed > 30000) throw new Error("no replica took the lead in 30 s");
			await sleep(50);
		}
		process.stdout.write(
			`leader ${leader} killed (SIGKILL): the other replica led ${takeover} ms later\n`
		);
		expect(takeover).toBeLessThanOrEqual(5000);
		const second = await r.queue(20);
		victim.start();
		await expectAllCompletedOnce(r, [...first, ...second]);
	}, 180000);
});

describe("an agent restarted with its identity while its task runs", () => {
	let r: Rig;
	beforeAll(async () => {
		r = await rig("agent", 15);
	}, 120000);
	afterAll(() => r?.stop(), 60000);

	it("reconciles the execution it lost: no ghost RUNNING, the job completes", async () => {
		const [jobId] = await r.queue(1);
		let exe: { id: number; agent_id: string } | undefined;
		await waitUntil(
			async () => {
				[exe] = await r.q(
					"SELECT id, agent_id FROM job_exe WHERE job_id = $1 AND status = 'RUNNING'",
					[jobId]
				);
				return !!exe;
			},
			30000,
			"the job to run"
		);
		const agent = r.cluster.byName(exe!.agent_id)!;
		await agent.kill();
		agent.start();
		await waitUntil(
			async () =>
				(await r.q("SELECT status FROM job_exe WHERE id = $1", [exe!.id]))[0].status !==
				"RUNNING",
			60000,
			"the lost execution to leave RUNNING"
		);
		const [lost] = await r.q(
			`SELECT e.status, er.name AS error FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
			 WHERE e.id = $1`,
			[exe!.id]
		);
		expect(lost).toEqual({ status: "FAILED", error: "node-lost" });
		await expectAllCompletedOnce(r, [jobId]);
	}, 180000);
});

describe("NATS restarted under load", () => {
	let r: Rig;
	beforeAll(async () => {
		r = await rig("nats", 3);
	}, 120000);
	afterAll(() => r?.stop(), 60000);

	it("agents reconnect and the reports made while it was down arrive", async () => {
		const ids = await r.queue(6);
		await waitUntil(
			async () =>
				Number(
					(
						await r.q(
							"SELECT count(*) AS n FROM job_exe WHERE status = 'RUNNING' AND job_started IS NOT NULL"
						)
					)[0].n
				) >= 2,
			30000,
			"jobs running"
		);
		// Down for 18 s, longer than the 15 s lease: jobs finish meanwhile and their agents cannot
		// report. The scheduler knows from its nats client that it was cut off too, so no node is
		// given up for lost on account of the outage (before it knew, jobs that ran through an
		// outage this long, or a short one under load, failed as node-lost).
		const running = (
			await r.q(
				// started on their agents (their main step reported): a run still on its way when
				// NATS stops never arrives, and fails as node-lost
				`SELECT id FROM job_exe WHERE status = 'RUNNING' AND job_started IS NOT NULL
				 AND job_id = ANY($1::int[])`,
				[ids]
			)
		).map(e => e.id);
		await r.cluster.stopNats();
		await sleep(18000);
		await r.cluster.startNats();
		await expectAllCompletedOnce(r, ids);
		// What ran through the outage finished there, and its report arrived afterwards (a run
		// sent while NATS was down could not arrive: it fails as node-lost and runs again).
		const ended = await r.q(
			"SELECT status, count(*)::int AS n FROM job_exe WHERE id = ANY($1::int[]) GROUP BY status",
			[running]
		);
		expect(ended).toEqual([{ status: "COMPLETED", n: running.length }]);
		await waitUntil(
			async () =>
				(await r.call("GET", "/nodes/status/")).results.filter((n: any) => n.is_online)
					.length === 2,
			30000,
			"both agents online again"
		);
	}, 180000);
});

describe("PostgreSQL restarted under load", () => {
	let r: Rig;
	beforeAll(async () => {
		r = await rig("postgres", 2);
	}, 120000);
	afterAll(() => r?.stop(), 60000);

	it("services recover; nothing lost or doubled", async () => {
		const before = await r.queue(10);
		await waitUntil(
			async () =>
				Number(
					(await r.q("SELECT count(*) AS n FROM job_exe WHERE status = 'RUNNING'"))[0].n
				) > 0,
			30000,
			"jobs running"
		);
		await r.cluster.pg!.stop();
		await sleep(4000);
		await r.cluster.pg!.start();
		const after = await r.queue(10);
		await expectAllCompletedOnce(r, [...before, ...after]);
		await waitUntil(
			async () => (await schedulerLeader(r.db)) !== null,
			30000,
			"a scheduler leading again"
		);
	}, 180000);
});
