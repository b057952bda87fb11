/**
 * P5, Strike ingest ("[5 of 8]"), on the process layout of `npm start` (control plane and one
 * node agent in one process, the strike's monitor on that agent) against a throwaway embedded
 * PostgreSQL:
 *   A  10,000 small files renamed into the strike's directory as fast as this client can: files/s
 *      from the first rename to the last INGESTED, and each file's latency from its rename to
 *      its `ingest_ended`, p50/p99; then 10,000 more renamed at a steady 1,000/s
 *      (P5_PACED_RATE): the latency of a stream the service keeps up with, without a backlog;
 *   B  the same (a burst, then a steady stream) with an ingest rule that creates a job per file:
 *      latency from rename to the job's `queued`, p50/p99 (the job type is paused, so that the jobs wait QUEUED and the
 *      measure is the path file → ingest → trigger → queue, not the running of 10,000 jobs);
 *   P1 beside it, in the same run: trivial jobs through REST, jobs/s, and the bare spawn rate.
 *
 * Each at the machine's own speed and slowed (a launcher taking 5 ms a launch: a machine whose
 * bare spawn runs ~170/s; BENCH_SPEED=own|slow|both, BENCH_SLOW_LAUNCH_MS), with the agent's
 * largest backlog and launch rate beside P1 (B's jobs wait paused: nothing is launched for them).
 *
 *   npm run bench:ingest                P5_FILES=2000 BENCH_SPEED=slow npm run bench:ingest
 */
import fs from "fs";
import os from "os";
import path from "path";
import { bestBareSpawnRate } from "./lib/spawn-rate";
import { cpuReader } from "./lib/cpu";
import { benchSpeeds, describeLaunches, launchFigures } from "./lib/launches";
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

const FILES = Number(process.env.P5_FILES) || 10_000;
const P1_JOBS = Number(process.env.P1_JOBS) || 3000;
/** files/s offered in the paced run of A */
const PACED = Number(process.env.P5_PACED_RATE) || 1000;
/**
 * The phases run, in this order: a (burst A), c (A paced), b (burst B; each "b" listed one more
 * burst, on files of its own), d (B paced), p1. P5_PHASES=b,b,b: three bursts B on one service.
 */
const PHASES = (process.env.P5_PHASES ?? "a,c,b,d,p1").split(",");
/** how often the phases' progress is asked for (see measure) */
const POLL_MS = 200;

/**
 * Renames the staged files into the directory, as fast as it can or `perSecond` at most (in
 * slices of 10 ms); answers each rename's time.
 */
async function renameAll(
	staging: string,
	target: string,
	names: string[],
	perSecond = Infinity
): Promise<Map<string, number>> {
	const at = new Map<string, number>();
	const started = Date.now();
	for (let i = 0; i < names.length; i++) {
		const due = started + (i / perSecond) * 1000;
		if (due > Date.now() + 10) await new Promise(r => setTimeout(r, due - Date.now()));
		fs.renameSync(path.join(staging, names[i]), path.join(target, names[i]));
		at.set(names[i], Date.now());
	}
	return at;
}

function stage(staging: string, prefix: string, n: number): string[] {
	const names: string[] = [];
	for (let i = 0; i < n; i++) {
		const name = `${prefix}-${String(i).padStart(5, "0")}.dat`;
		fs.writeFileSync(path.join(staging, name), `file ${i}\n`);
		names.push(name);
	}
	return names;
}

function summary(latencies: number[]): string {
	const sorted = [...latencies].sort((a, b) => a - b);
	return `p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted.at(-1)} ms`;
}

async function main() {
	for (const speed of benchSpeeds()) await runAt(speed.label, speed.env);
}

async function runAt(label: string, env: Record<string, string>) {
	const log = (...parts: unknown[]): void => console.log(`[${label}]`, ...parts);
	const root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-ingest-"));
	fs.chmodSync(root, 0o755);
	const strikeDir = path.join(root, "incoming");
	const staging = path.join(root, "staging");
	const rawDir = path.join(root, "raw");
	for (const dir of [strikeDir, staging, rawDir]) fs.mkdirSync(dir);
	const { url, db, pgPid, stop } = await benchDatabase();
	const service = await startService(url, env).catch(async (e: unknown) => {
		await stop();
		throw e;
	});
	const cpu = cpuReader(service.proc.pid!, pgPid);
	const q = async <T>(sql: string, bind: unknown[] = []) =>
		(await db.query(sql, { bind }))[0] as T[];
	try {
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		await postJson(`${service.api}/workspaces/`, {
			name: "raw",
			title: "Raw",
			json_config: { version: "1.0", broker: { type: "host", host_path: rawDir } }
		});
		const typeB = await postJson(`${service.api}/job-types/`, {
			name: "per-file",
			version: "1.0",
			is_paused: true,
			cpus_required: 0.01,
			mem_required: 1,
			disk_out_const_required: 0,
			interface: {
				command: "/bin/true",
				command_arguments: "${input}",
				input_data: [{ name: "input", type: "file" }]
			},
			trigger_rule: {
				type: "INGEST",
				configuration: {
					condition: { data_types: ["per-file"] },
					data: { input_data_name: "input", workspace_name: "raw" }
				}
			}
		});
		const strike = await postJson(`${service.api}/strike/create/`, {
			name: "bench",
			configuration: {
				mount: strikeDir,
				transfer_suffix: "_tmp",
				files_to_ingest: [
					{ filename_regex: "^[ac]-", workspace_path: "a", workspace_name: "raw" },
					{
						filename_regex: "^[bd]-",
						data_types: ["per-file"],
						workspace_path: "b",
						workspace_name: "raw"
					},
					{ filename_regex: "^probe", workspace_path: "p", workspace_name: "raw" }
				]
			}
		});
		// the monitor is up once a file is ingested
		fs.writeFileSync(path.join(strikeDir, "probe"), "probe\n");
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM ingest WHERE status = 'INGESTED' AND file_name = 'probe'",
			1,
			60000
		);
		log(`strike ${strike.strike_id} is running its monitor; ${FILES} files per phase`);

		let queuedSoFar = 0;
		// P5_DIAG: what PostgreSQL is busy with, sampled from pg_stat_activity
		const busy = new Map<string, number>();
		let sampling = !!process.env.P5_DIAG;
		const sample = async () => {
			while (sampling) {
				const rows = await q<{ query: string }>(
					`SELECT query FROM pg_stat_activity
					 WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
				);
				for (const { query } of rows) {
					const key = query.replace(/\s+/g, " ").slice(0, 160);
					busy.set(key, (busy.get(key) ?? 0) + 1);
				}
				await new Promise(r => setTimeout(r, 5));
			}
		};
		const sampler = sample();

		// P5_DIAG: each table's scans over a phase (its renames to its last INGESTED), before the
		// bench's own queries of the phase's rows
		const scans = () =>
			q<{
				relname: string;
				seq_scan: string;
				seq_tup_read: string;
				idx_scan: string;
				autovacuums: string;
				autoanalyzes: string;
			}>(
				`SELECT relname, seq_scan, seq_tup_read, idx_scan, autovacuum_count AS autovacuums,
					autoanalyze_count AS autoanalyzes
				 FROM pg_stat_user_tables`
			);
		const scansSince = async (before: Awaited<ReturnType<typeof scans>>) => {
			await q("SELECT pg_stat_clear_snapshot()");
			const then = new Map(before.map(r => [r.relname, r]));
			return (await scans())
				.map(r => {
					const b = then.get(r.relname);
					return {
						table: r.relname,
						seq_scan: Number(r.seq_scan) - Number(b?.seq_scan ?? 0),
						seq_tup_read: Number(r.seq_tup_read) - Number(b?.seq_tup_read ?? 0),
						idx_scan: Number(r.idx_scan) - Number(b?.idx_scan ?? 0),
						autovacuums: Number(r.autovacuums) - Number(b?.autovacuums ?? 0),
						autoanalyzes: Number(r.autoanalyzes) - Number(b?.autoanalyzes ?? 0)
					};
				})
				.filter(
					r => r.seq_scan > 0 || r.idx_scan > 0 || r.autovacuums > 0 || r.autoanalyzes > 0
				)
				.sort((x, y) => y.seq_tup_read - x.seq_tup_read);
		};

		const measure = async (prefix: string, perSecond = Infinity) => {
			const names = stage(staging, prefix, FILES);
			const scansBefore = process.env.P5_DIAG ? await scans() : [];
			const before = cpu();
			const started = Date.now();
			const renamed = await renameAll(staging, strikeDir, names, perSecond);
			const writeSeconds = (Date.now() - started) / 1000;
			// polled on the (status, last_modified, id) list index, counting this phase's entries
			// only (settled since it started), every 200 ms: a count of every INGESTED ingest
			// read ~20,000–40,000 rows, ~13 ms of PostgreSQL each time, ~3% of its CPU in a burst.
			// The figures come from the ingests' own times.
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM ingest WHERE status = 'INGESTED'
				 AND last_modified >= to_timestamp(${started / 1000})`,
				FILES,
				600000,
				POLL_MS
			);
			const after = cpu();
			if (process.env.P5_DIAG) {
				log(`   scans of each table from the renames to the last INGESTED (${prefix}):`);
				console.table(await scansSince(scansBefore));
			}
			const rows = await q<{ file_name: string; ended: Date }>(
				`SELECT file_name, ingest_ended AS ended FROM ingest
				 WHERE status = 'INGESTED' AND file_name LIKE $1`,
				[`${prefix}-%`]
			);
			const last = Math.max(...rows.map(r => new Date(r.ended).getTime()));
			const latencies = rows.map(
				r => new Date(r.ended).getTime() - renamed.get(r.file_name)!
			);
			const [{ n: other }] = await q<{ n: number }>(
				`SELECT count(*)::int AS n FROM ingest WHERE status <> 'INGESTED' AND file_name LIKE $1`,
				[`${prefix}-%`]
			);
			return {
				renamed,
				cpuBefore: before,
				writeRate: FILES / writeSeconds,
				// CPU per file, µs: the service (with its agent and the monitor) and PostgreSQL
				cpu: `${(((after.service - before.service) * 1e6) / FILES).toFixed(0)} µs of the service and ${(((after.pg! - before.pg!) * 1e6) / FILES).toFixed(0)} µs of PostgreSQL per file`,
				rate: FILES / ((last - started) / 1000),
				latencies,
				other
			};
		};

		if (PHASES.includes("a")) {
			const a = await measure("a");
			log(
				`P5 A: ${FILES} files renamed in at ${a.writeRate.toFixed(0)} files/s; ingested at ${a.rate.toFixed(0)} files/s (first rename to last INGESTED; target >= 1,000); rename → INGESTED ${summary(a.latencies)} (target p99 <= 1,000 ms); ${a.other} not INGESTED; ${a.cpu}`
			);
		}
		if (PHASES.includes("c")) {
			const paced = await measure("c", PACED);
			log(
				`P5 A at a steady ${PACED} files/s (renames paced): ingested at ${paced.rate.toFixed(0)} files/s; rename → INGESTED ${summary(paced.latencies)}; ${paced.other} not INGESTED; ${paced.cpu}`
			);
		}

		/** Measures a run whose files the rule turns into jobs: ingest, then rename → job QUEUED. */
		const measureJobs = async (prefix: string, perSecond = Infinity) => {
			const run = await measure(prefix, perSecond);
			queuedSoFar += FILES;
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM job WHERE job_type_id = ${Number(typeB.id)} AND status = 'QUEUED'`,
				queuedSoFar,
				600000,
				POLL_MS
			);
			const afterQueued = cpu();
			const jobs = await q<{ file_name: string; queued: Date }>(
				`SELECT f.file_name, j.queued FROM job j
				 JOIN scale_file f ON f.id = (j.data->'input_data'->0->>'file_id')::int
				 WHERE j.job_type_id = $1 AND f.file_name LIKE $2`,
				[typeB.id, `${prefix}-%`]
			);
			const toJob = jobs.map(
				j => new Date(j.queued).getTime() - run.renamed.get(j.file_name)!
			);
			const lastQueued = Math.max(...jobs.map(j => new Date(j.queued).getTime()));
			const firstRename = Math.min(...run.renamed.values());
			// how the triggers service took the events: transactions (one processed time each)
			const [batches] = await q<{ n: number; lag_ms: number }>(
				`SELECT count(DISTINCT processed)::int AS n,
					(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM processed - occurred)) * 1000)::int AS lag_ms
				 FROM trigger_event WHERE type = 'INGEST' AND description->>'file_name' LIKE $1`,
				[`${prefix}-%`]
			);
			log(
				`   (the triggers service took these ${FILES} events in ${batches.n} transactions, ${(FILES / batches.n).toFixed(0)} per transaction; INGEST event → processed p99 ${batches.lag_ms} ms)`
			);
			if (process.env.P5_DIAG && perSecond === Infinity) {
				// each transaction of the triggers service during a burst: when it began (ms after
				// the first rename), its events, and how many files were INGESTED by then
				const timeline = await q<{ at: number; events: number; ingested: number }>(
					`SELECT (extract(epoch FROM e.processed) * 1000 - $2)::int AS at,
						count(*)::int AS events,
						(SELECT count(*)::int FROM ingest i WHERE i.file_name LIKE $1
							AND i.ingest_ended <= e.processed) AS ingested
					 FROM trigger_event e
					 WHERE e.type = 'INGEST' AND e.description->>'file_name' LIKE $1
					 GROUP BY e.processed ORDER BY e.processed`,
					[`${prefix}-%`, firstRename]
				);
				log(
					"   transactions (began at ms, events, files INGESTED by then):",
					timeline.map(t => `${t.at}/${t.events}/${t.ingested}`).join(" ")
				);
			}
			return {
				...run,
				cpuToQueued: `${(((afterQueued.service - run.cpuBefore.service) * 1e6) / FILES).toFixed(0)} µs of the service and ${(((afterQueued.pg! - run.cpuBefore.pg!) * 1e6) / FILES).toFixed(0)} µs of PostgreSQL per file`,
				jobs: jobs.length,
				jobRate: FILES / ((lastQueued - firstRename) / 1000),
				toJob
			};
		};
		// each burst B of the phases its own files (b, b-1, b-2 ...)
		const bursts = PHASES.filter(phase => phase === "b").length;
		for (let run = 0; run < bursts; run++) {
			if (process.env.P5_DIAG) await q("SELECT pg_stat_statements_reset()");
			const b = await measureJobs(run === 0 ? "b" : `b-${run}`);
			if (process.env.P5_DIAG) {
				// where PostgreSQL's time went in burst B, statement by statement
				const statements = await q<Record<string, unknown>>(
					`SELECT round(total_exec_time)::int AS ms, calls, rows,
					round(total_exec_time * 1000 / ${FILES})::int AS us_per_file,
					left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS statement
				 FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'
				 ORDER BY total_exec_time DESC LIMIT 14`
				);
				log("   PostgreSQL's statements in burst B (exec time, µs per file):");
				console.table(statements);
			}
			log(
				`P5 B: with an ingest rule making a job per file: ingested at ${b.rate.toFixed(0)} files/s, rename → INGESTED ${summary(b.latencies)}; ${b.jobs} jobs QUEUED at ${b.jobRate.toFixed(0)} jobs/s; rename → job QUEUED ${summary(b.toJob)} (target p99 <= 1,000 ms); up to the last INGESTED, ${b.cpu}; up to the last QUEUED, ${b.cpuToQueued}`
			);
		}
		if (PHASES.includes("d")) {
			const pacedB = await measureJobs("d", PACED);
			log(
				`P5 B at a steady ${PACED} files/s: ingested at ${pacedB.rate.toFixed(0)} files/s, rename → INGESTED ${summary(pacedB.latencies)}; ${pacedB.jobs} jobs QUEUED at ${pacedB.jobRate.toFixed(0)} jobs/s; rename → job QUEUED ${summary(pacedB.toJob)}`
			);
		}

		sampling = false;
		await sampler;
		if (process.env.P5_DIAG) {
			for (const [query, n] of [...busy].sort((x, y) => y[1] - x[1]).slice(0, 12))
				log(String(n).padStart(6), query);
			const scans = await q<Record<string, unknown>>(
				`SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_live_tup
				 FROM pg_stat_user_tables ORDER BY seq_tup_read DESC LIMIT 8`
			);
			console.table(scans);
		}

		if (!PHASES.includes("p1")) return;
		// P1 beside it, on the same service: trivial jobs through REST to COMPLETED
		const jt = await postJson(`${service.api}/job-types/`, trueJobType());
		const round = async (count: number) => {
			const [{ n: before }] = await q<{ n: number }>(
				"SELECT count(*)::int AS n FROM job WHERE status = 'COMPLETED'"
			);
			const t0 = Date.now();
			let next = 0;
			const submit = async () => {
				while (next < count) {
					next++;
					await postJsonExpecting(
						`${service.api}/queue/new-job/`,
						{ job_type_id: jt.id, job_data: { input_data: [], output_data: [] } },
						201
					);
				}
			};
			await Promise.all(Array.from({ length: 16 }, submit));
			await waitForCount(
				db,
				"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
				before + count,
				600000
			);
			return count / ((Date.now() - t0) / 1000);
		};
		await round(Math.min(1000, P1_JOBS));
		const [{ id: exeP1Before }] = await q<{ id: number }>(
			`SELECT coalesce(max(id), 0)::int AS id FROM job_exe`
		);
		const p1 = await round(P1_JOBS);
		const p1Launches = await launchFigures(db, exeP1Before);
		await patchJson(`${service.api}/job-types/${typeB.id}/`, { is_paused: true });
		await service.stop();
		const bare = await bestBareSpawnRate(3, 3000, 4);
		log(
			`P1 in the same run: ${p1.toFixed(0)} jobs/s (${P1_JOBS} /bin/true jobs after a warm-up of ${Math.min(1000, P1_JOBS)}), bare spawn ${bare.toFixed(0)} /s, ratio ${(p1 / bare).toFixed(2)}; ${describeLaunches(p1Launches)}`
		);
	} finally {
		if (service.proc.exitCode === null) await service.stop();
		await stop();
		fs.rmSync(root, { recursive: true, force: true });
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
