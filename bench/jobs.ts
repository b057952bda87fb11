/**
 * The job benchmarks of issue "[3 of 6]", each printed beside its reference from the same run:
 *   P1  trivial jobs (/bin/true) end to end through the REST API on one agent, jobs/s, beside
 *       the bare rate of spawning /bin/true from a fresh Node process on this machine (the best
 *       of three runs of 3 s); at the machine's own speed and slowed (a launcher taking 5 ms a
 *       launch, as a machine whose bare spawn runs ~170/s: BENCH_SPEED=own|slow|both, default
 *       both; BENCH_SLOW_LAUNCH_MS), slowed beside the bare rate spawned at that pace;
 *       5,000 jobs measured after a warm-up of 3,000 (its rate printed too): the first
 *       thousands of jobs run while V8 compiles the service's hot paths, at half the rate;
 *   P2  the control plane alone (agents that finish instantly), jobs/s from new job to
 *       COMPLETED, beside graphile-worker's no-op jobs/s on the same PostgreSQL;
 *   P3  latency from QUEUED to process started on an idle cluster, p50 and p99.
 *
 *   npm run bench:jobs              (all three)   npm run bench:jobs -- p2   (one)
 *   P1_JOBS=10000 P1_WARMUP=1000 P2_JOBS=10000 P3_JOBS=300 npm run bench:jobs
 */
import os from "os";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { loadConfig } from "../lib/launch/config";
import { loadServiceSchemas } from "../lib/launch/services";
import { queueNewJobs } from "../lib/jobs/new-job";
import { bestBareSpawnRate } from "./lib/spawn-rate";
import { benchSpeeds } from "./lib/launches";
import { graphileNoopRate } from "./lib/graphile";
import { instantAgent } from "./lib/instant-agent";
import { ownCpuSeconds, treeCpuSeconds } from "./lib/cpu";
import {
	benchDatabase,
	patchJson,
	percentile,
	postJson,
	postJsonExpecting,
	startService,
	trueJobType,
	waitForCount
} from "./lib/cluster";
import { transaction } from "../lib/db/run";

const TRUE_JOB_TYPE = trueJobType();

const NEW_JOB = (jobTypeId: number) => ({
	job_type_id: jobTypeId,
	job_data: { input_data: [], output_data: [] }
});

/** CPU time of the service, PostgreSQL and this client, read before and after a run. */
function cpuReading(servicePid: number, pgPid: number) {
	const own = process.cpuUsage();
	return {
		service: treeCpuSeconds(servicePid),
		serviceOwn: ownCpuSeconds(servicePid),
		pg: treeCpuSeconds(pgPid),
		client: (own.user + own.system) / 1e6
	};
}

/**
 * P1 with the service started with `env` (a speed of benchSpeeds), each line labelled; the bare
 * rate spawned at the slowed launcher's pace where `env` slows it.
 */
async function p1(n: number, warmup: number, label: string, env: Record<string, string>) {
	const log = (line: string): void => console.log(`[${label}] ${line}`);
	const paceMs = Number(env.BENCH_SLOW_LAUNCH_MS) || 0;
	const { url, db, pgPid, stop } = await benchDatabase();
	const service = await startService(url, env).catch(async (e: unknown) => {
		await stop();
		throw e;
	});
	try {
		const jt = await postJson(`${service.api}/job-types/`, TRUE_JOB_TYPE);
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		/** Posts `count` new jobs from 16 clients, waits for `completed` COMPLETED jobs: seconds. */
		const round = async (count: number, completed: number) => {
			const started = process.hrtime.bigint();
			let next = 0;
			const submit = async () => {
				while (next < count) {
					next++;
					await postJsonExpecting(`${service.api}/queue/new-job/`, NEW_JOB(jt.id), 201);
				}
			};
			await Promise.all(Array.from({ length: 16 }, submit));
			await waitForCount(
				db,
				"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
				completed,
				600000
			);
			return Number(process.hrtime.bigint() - started) / 1e9;
		};
		// V8 compiles the service's hot paths, and the database caches its plans, while the
		// first thousands of jobs run: measured apart, and printed, not mixed into the rate
		const coldRate = warmup / (await round(warmup, warmup));
		const before = cpuReading(service.proc.pid!, pgPid);
		const seconds = await round(n, warmup + n);
		const rate = n / seconds;
		const after = cpuReading(service.proc.pid!, pgPid);
		const perJob = (key: "service" | "serviceOwn" | "pg" | "client") =>
			(((after[key] - before[key]) / n) * 1000).toFixed(2);
		const busy =
			after.service + after.pg + after.client - before.service - before.pg - before.client;
		const [[failed]] = (await db.query(
			"SELECT count(*) AS n FROM job WHERE status <> 'COMPLETED'"
		)) as any;
		// the REST half alone: new jobs with the scheduler paused (they stay queued)
		await patchJson(`${service.api}/scheduler/`, { is_paused: true });
		const restRate = n / (await round(n, warmup + n));
		// the other half alone: those jobs placed, run and completed once the scheduler resumes
		const drainBefore = cpuReading(service.proc.pid!, pgPid);
		const drainStarted = process.hrtime.bigint();
		await patchJson(`${service.api}/scheduler/`, { is_paused: false });
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
			warmup + 2 * n,
			600000
		);
		const drainRate = n / (Number(process.hrtime.bigint() - drainStarted) / 1e9);
		const drainAfter = cpuReading(service.proc.pid!, pgPid);
		const drainPerJob = (key: "service" | "serviceOwn" | "pg") =>
			(((drainAfter[key] - drainBefore[key]) / n) * 1000).toFixed(2);
		await service.stop();
		const bare = await bestBareSpawnRate(3, 3000, 4, paceMs);
		log(
			`P1 /bin/true jobs through REST, one agent: ${rate.toFixed(1)} jobs/s (${n} jobs in ${seconds.toFixed(1)} s, ${failed.n} not completed), after a warm-up of ${warmup} jobs that ran at ${coldRate.toFixed(1)} jobs/s`
		);
		log(
			`P1 bare spawn of /bin/true from a fresh Node process (${paceMs > 0 ? `one at a time, each after ${paceMs} ms` : "4 at a time"}, best of 3 runs of 3 s): ${bare.toFixed(1)} /s`
		);
		log(`P1 ratio: ${(rate / bare).toFixed(3)} (target >= 0.9)`);
		log(
			`P1 new jobs through REST alone (scheduler paused, 16 clients): ${restRate.toFixed(1)} /s`
		);
		log(
			`P1 the same jobs queued, then run alone (scheduler resumed): ${drainRate.toFixed(1)} jobs/s; CPU per job: service ${drainPerJob("service")} ms (its own process ${drainPerJob("serviceOwn")} ms), PostgreSQL ${drainPerJob("pg")} ms`
		);
		log(
			`P1 CPU per job: service ${perJob("service")} ms (its own process ${perJob("serviceOwn")} ms, the rest the agent's launchers and tasks), PostgreSQL ${perJob("pg")} ms, this client ${perJob("client")} ms; ${((busy / seconds / os.cpus().length) * 100).toFixed(0)}% of ${os.cpus().length} cpus busy`
		);
	} finally {
		if (service.proc.exitCode === null) await service.stop();
		await stop();
	}
}

async function p2(n: number) {
	const { url, db, stop } = await benchDatabase();
	const config = loadConfig({
		LOG_LEVEL: "warn",
		SERVICES: "job-types,queue,jobs,nodes,scheduler",
		DATABASE_URL: url
	});
	const broker = new ServiceBroker({ ...brokerOptions(config, url), nodeID: "bench-p2" });
	for (const schema of loadServiceSchemas(config)) broker.createService(schema);
	broker.createService(instantAgent());
	try {
		await broker.start();
		const jt: any = await broker.call("job-types.create", TRUE_JOB_TYPE);
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		const started = process.hrtime.bigint();
		for (let i = 0; i < n; i += 1000) {
			const batch = Array.from({ length: Math.min(1000, n - i) }, () => ({
				jobTypeId: jt.id,
				jobData: NEW_JOB(jt.id).job_data
			}));
			await transaction(db, t => queueNewJobs(db, t, batch));
			broker.emit("queue.changed", { count: batch.length });
		}
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
			n,
			600000
		);
		const rate = n / (Number(process.hrtime.bigint() - started) / 1e9);
		await broker.stop();
		const reference = await graphileNoopRate(url, n);
		console.log(
			`P2 control plane alone (instant agents): ${rate.toFixed(1)} jobs/s from new job to COMPLETED (${n} jobs)`
		);
		console.log(
			`P2 graphile-worker no-op jobs, same PostgreSQL: ${reference.toFixed(1)} jobs/s`
		);
		console.log(`P2 ratio: ${(rate / reference).toFixed(3)} (target >= 1.0)`);
	} finally {
		await broker.stop().catch(() => undefined);
		await stop();
	}
}

async function p3(n: number) {
	const { url, db, stop } = await benchDatabase();
	const service = await startService(url).catch(async (e: unknown) => {
		await stop();
		throw e;
	});
	try {
		const jt = await postJson(`${service.api}/job-types/`, TRUE_JOB_TYPE);
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		for (let i = 1; i <= n; i++) {
			await postJson(`${service.api}/queue/new-job/`, NEW_JOB(jt.id));
			await waitForCount(
				db,
				"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
				i,
				30000
			);
			await new Promise(r => setTimeout(r, 10));
		}
		const [rows] = (await db.query(
			`SELECT extract(epoch FROM job_started - queued) * 1000 AS ms FROM job_exe
			 WHERE job_started IS NOT NULL ORDER BY 1`
		)) as any;
		const ms = rows.map((r: { ms: string }) => Number(r.ms));
		console.log(
			`P3 QUEUED -> process started, idle cluster (${ms.length} jobs): p50 ${percentile(ms, 50).toFixed(1)} ms, p99 ${percentile(ms, 99).toFixed(1)} ms (target p99 <= 50 ms)`
		);
	} finally {
		await service.stop();
		await stop();
	}
}

async function main() {
	const which = process.argv.slice(2);
	const want = (p: string) => which.length === 0 || which.includes(p);
	console.log(
		`${os.cpus().length} cpus, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`
	);
	if (want("p1"))
		for (const speed of benchSpeeds())
			await p1(
				Number(process.env.P1_JOBS) || 5000,
				Number(process.env.P1_WARMUP) || 3000,
				speed.label,
				speed.env
			);
	if (want("p2")) await p2(Number(process.env.P2_JOBS) || 5000);
	if (want("p3")) await p3(Number(process.env.P3_JOBS) || 200);
}

main().then(
	() => process.exit(0),
	err => {
		console.error(err);
		process.exit(1);
	}
);
