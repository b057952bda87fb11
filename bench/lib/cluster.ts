import fs from "fs";
import http from "http";
import os from "os";
import path from "path";
import { spawn, type ChildProcess } from "child_process";
import type { Sequelize } from "sequelize";
import { CONTROL_ENV, CONTROL_NODE_OPTIONS } from "../../lib/cluster/node-process";
import { EmbeddedPostgres } from "../../lib/db/embedded";
import { createSequelize } from "../../lib/db/connection";
import { migrate } from "../../lib/db/migrate";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort } from "../../test/helpers/ports";

/** A throwaway embedded PostgreSQL, migrated, for one benchmark run. */
export async function benchDatabase(): Promise<{
	url: string;
	db: Sequelize;
	/** the postmaster's pid (its backends are its children) */
	pgPid: number;
	stop(): Promise<void>;
}> {
	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-"));
	fs.chmodSync(tmp, 0o755);
	const pg = new EmbeddedPostgres({
		dataDir: path.join(tmp, "pg"),
		port: await freePort(),
		database: "bench",
		// P5_DIAG: each statement's time and calls (pg_stat_statements), besides the samples
		// BENCH_PG_SETTINGS: more server settings, space-separated name=value
		settings: [
			...(process.env.P5_DIAG ? ["shared_preload_libraries=pg_stat_statements"] : []),
			...(process.env.BENCH_PG_SETTINGS ?? "").split(" ").filter(Boolean)
		]
	});
	await pg.start();
	const db = createSequelize(pg.url, { poolMax: 4 });
	await migrate(db);
	if (process.env.P5_DIAG) await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
	const pgPid = Number(
		fs.readFileSync(path.join(pg.dataDir, "postmaster.pid"), "utf8").split("\n")[0]
	);
	return {
		url: pg.url,
		db,
		pgPid,
		async stop() {
			await db.close();
			await pg.stop();
			fs.rmSync(tmp, { recursive: true, force: true });
		}
	};
}

/** `node dist/bin/start.js` (what npm start runs) against the bench database. */
export async function startService(
	databaseUrl: string,
	env: Record<string, string> = {}
): Promise<{ api: string; proc: ChildProcess; workDir: string; stop(): Promise<void> }> {
	const port = await freePort();
	const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-agent-"));
	// the service's node runs with the options `npm start` gives it, unless BENCH_SERVICE_NODE_ARGS
	// replaces them (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"; "" for node's defaults)
	const nodeArgs =
		process.env.BENCH_SERVICE_NODE_ARGS === undefined
			? CONTROL_NODE_OPTIONS
			: process.env.BENCH_SERVICE_NODE_ARGS.split(" ").filter(Boolean);
	const proc = spawn(
		process.execPath,
		[...nodeArgs, path.join(PROJECT_ROOT, "dist", "bin", "start.js")],
		{
			env: {
				...process.env,
				...CONTROL_ENV,
				DATABASE_URL: databaseUrl,
				PORT: String(port),
				LOG_LEVEL: "warn",
				AGENT_WORK_DIR: workDir,
				...env
			},
			stdio: ["ignore", "ignore", "inherit"]
		}
	);
	const api = `http://127.0.0.1:${port}/api`;
	const deadline = Date.now() + 30000;
	for (;;) {
		try {
			if ((await fetch(`${api}/version/`)).status === 200) break;
		} catch {
			/* not listening yet */
		}
		// a service that exits or never answers is not left behind, nor is its work directory
		const failure =
			proc.exitCode !== null || proc.signalCode !== null
				? `the service exited (${proc.exitCode ?? proc.signalCode}) before it answered`
				: Date.now() > deadline
					? "the service did not answer within 30 s"
					: null;
		if (failure) {
			if (proc.exitCode === null && proc.signalCode === null) {
				const exited = new Promise(resolve => proc.once("exit", resolve));
				proc.kill("SIGKILL");
				await exited;
			}
			fs.rmSync(workDir, { recursive: true, force: true });
			throw new Error(failure);
		}
		await new Promise(r => setTimeout(r, 100));
	}
	return {
		api,
		proc,
		workDir,
		stop: () =>
			new Promise(resolve => {
				proc.once("exit", () => {
					fs.rmSync(workDir, { recursive: true, force: true });
					resolve();
				});
				proc.kill("SIGTERM");
			})
	};
}

/** Kept-alive connections for the load the benchmarks make: the client's own cost stays small. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** POSTs JSON and answers the parsed JSON body; throws on a status of 300 or more. */
export function postJson(url: string, body: unknown): Promise<any> {
	return sendJson("POST", url, body);
}

/** PATCHes JSON, as postJson. */
export function patchJson(url: string, body: unknown): Promise<any> {
	return sendJson("PATCH", url, body);
}

/**
 * POSTs JSON and checks the status only (`expected`), the body read but not parsed: a load
 * generator that shares the machine with the service should spend as little CPU as it can.
 */
export function postJsonExpecting(url: string, body: unknown, expected: number): Promise<void> {
	return sendJson("POST", url, body, expected);
}

function sendJson(method: string, url: string, body: unknown, expected?: number): Promise<any> {
	const payload = Buffer.from(JSON.stringify(body));
	return new Promise((resolve, reject) => {
		const req = http.request(
			url,
			{
				method,
				agent,
				headers: { "Content-Type": "application/json", "Content-Length": payload.length }
			},
			res => {
				if (expected !== undefined && res.statusCode === expected) {
					res.resume();
					res.on("end", () => resolve(undefined));
					res.on("error", reject);
					return;
				}
				const chunks: Buffer[] = [];
				res.on("data", (chunk: Buffer) => chunks.push(chunk));
				res.on("end", () => {
					const text = Buffer.concat(chunks).toString("utf8");
					if ((res.statusCode ?? 0) >= 300 || expected !== undefined)
						return reject(new Error(`${url}: ${res.statusCode} ${text}`));
					try {
						resolve(JSON.parse(text));
					} catch (error) {
						reject(error);
					}
				});
				res.on("error", reject);
			}
		);
		req.on("error", reject);
		req.end(payload);
	});
}

/** Waits until `sql` (a count) reaches `n`, polling the database. */
/**
 * Waits until `sql` (a count, `n`) reaches `n`, asking every `intervalMs`. Each ask is load on
 * PostgreSQL beside what is measured: where the figures come from the rows' own times, not from
 * when the wait ended, ask rarely.
 */
export async function waitForCount(
	db: Sequelize,
	sql: string,
	n: number,
	timeoutMs: number,
	intervalMs = 20
): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const [[row]] = (await db.query(sql)) as any;
		if (Number(row.n) >= n) return;
		if (Date.now() > deadline) throw new Error(`timed out: ${row.n} of ${n} (${sql})`);
		await new Promise(r => setTimeout(r, intervalMs));
	}
}

export function percentile(sorted: number[], p: number): number {
	if (sorted.length === 0) return NaN;
	return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/**
 * The benchmarks' trivial job type: `/bin/true`, one try, small enough (0.01 cpu, 1 MiB) that an
 * agent's resources never limit how many run at once.
 */
export function trueJobType(name = "true") {
	return {
		name,
		version: "1.0",
		cpus_required: 0.01,
		mem_required: 1,
		disk_out_const_required: 0,
		max_tries: 1,
		interface: { command: "/bin/true", command_arguments: "" }
	};
}
