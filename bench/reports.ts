/**
 * The speed of the metrics and reports ("[7 of 8]") on P4's database (`npm run bench:seed`: a
 * million jobs over 90 days), its metrics computed for those days first (set-based, timed and
 * printed): plot data of one column over 90 days and every report, at concurrency 32 for
 * BENCH_SECONDS each, beside the same gateway's `GET /api/version/`; targets p99 <= 50 ms and
 * >= 1,000 requests/s. Each with the CPU per request of the service, PostgreSQL and this client.
 *
 *   npm run bench:seed && npm run bench:reports      DATABASE_URL=postgres://... npm run bench:reports
 *   BENCH_ONLY=/nodes/status/ npm run bench:reports   (those mixes only, beside /version/)
 */
import { createSequelize } from "../lib/db/connection";
import { migrate } from "../lib/db/migrate";
import { computeDailyMetrics } from "../lib/metrics/compute";
import { ALL_SERVICES } from "../lib/launch/config";
import { startService } from "./lib/cluster";
import { run } from "./lib/load";
import { cpuReader } from "./lib/cpu";
import { openP4Database } from "./lib/p4-db";

const SECONDS = Number(process.env.BENCH_SECONDS) || 10;
const CONNECTIONS = 32;
const TARGET = { p99: 50, rps: 1000 };
/** as bench:lists: no scheduler or agent to write to the tables under measurement */
const SERVICES = ALL_SERVICES.filter(s => s !== "scheduler" && s !== "node-agent");

async function main() {
	const database = await openP4Database(msg => console.log(msg));
	const db = createSequelize(database.url, { poolMax: 4 });
	let service: Awaited<ReturnType<typeof startService>> | null = null;
	try {
		await migrate(db);
		const [[range]] = (await db.query(
			`SELECT min(ended)::date AS first, max(ended)::date AS last,
				(SELECT count(DISTINCT occurred) FROM metrics_job_type)::int AS computed
			 FROM job WHERE ended IS NOT NULL`
		)) as any;
		if (!range.first)
			throw new Error(`no jobs in ${database.where}: run npm run bench:seed first`);
		const days: string[] = [];
		for (
			let d = new Date(range.first);
			d <= new Date(range.last);
			d.setUTCDate(d.getUTCDate() + 1)
		)
			days.push(d.toISOString().slice(0, 10));
		if (range.computed < days.length) {
			const started = Date.now();
			let slowest = 0;
			for (const day of days) {
				const t0 = Date.now();
				await computeDailyMetrics(db, day);
				slowest = Math.max(slowest, Date.now() - t0);
			}
			const [[jobs]] = (await db.query(
				`SELECT count(*)::int AS n FROM job WHERE ended IS NOT NULL`
			)) as any;
			console.log(
				`metrics computed for ${days.length} days (${jobs.n} ended jobs) in ${((Date.now() - started) / 1000).toFixed(1)} s; the slowest day ${slowest} ms`
			);
		}
		const [[choices]] = (await db.query(
			`SELECT array_agg(DISTINCT job_type_id) AS ids FROM metrics_job_type`
		)) as any;
		const ids: number[] = choices.ids ?? [];
		const pick = <T>(values: readonly T[]): T =>
			values[Math.floor(Math.random() * values.length)];

		service = await startService(database.url, { SERVICES: SERVICES.join(",") });
		const cpuNow = cpuReader(service.proc.pid!, database.pgPid);
		const mixes: [string, () => string][] = [
			["/version/", () => "/version/"],
			[
				"/metrics/job-types/plot-data/ one column, 90 days, one job type",
				() =>
					`/metrics/job-types/plot-data/?column=total_count&started=P90D&choice_id=${pick(ids)}`
			],
			[
				"/metrics/job-types/plot-data/ one column, 90 days, all job types summed",
				() => "/metrics/job-types/plot-data/?column=total_count&started=P90D"
			],
			[
				"/metrics/job-types/plot-data/ the web UI's failure rates (60 choices, 4 columns, 90 days)",
				() =>
					`/metrics/job-types/plot-data/?${ids
						.slice(0, 60)
						.map(id => `choice_id=${id}`)
						.join(
							"&"
						)}&column=system_error_count&column=algorithm_error_count&column=data_error_count&column=total_count&dataType=job-types&started=P90D`
			],
			["/metrics/", () => "/metrics/"],
			["/metrics/job-types/", () => "/metrics/job-types/"],
			["/job-types/status/?started=PT3H", () => "/job-types/status/?started=PT3H"],
			[
				"/job-types/running/?pageNumber=0&pageSize=25",
				() => "/job-types/running/?pageNumber=0&pageSize=25"
			],
			["/job-types/system-failures/", () => "/job-types/system-failures/"],
			["/nodes/status/", () => "/nodes/status/"],
			["/queue/status/", () => "/queue/status/"]
		];
		/** Waits until PostgreSQL has no statement of the service running (a slow mix's backlog). */
		const idle = async () => {
			for (let i = 0; i < 600; i++) {
				const [[row]] = (await db.query(
					`SELECT count(*)::int AS n FROM pg_stat_activity
					 WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
				)) as any;
				if (row.n === 0) return;
				await new Promise(r => setTimeout(r, 100));
			}
		};
		// BENCH_ONLY=/nodes/status/,/queue/: the mixes whose label holds one of these (and /version/)
		const only = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
		const chosen = mixes.filter(
			([label]) =>
				label === "/version/" ||
				only.length === 0 ||
				only.some(part => label.includes(part))
		);
		for (const [label, draw] of chosen) {
			// each mix alone: the requests a slow one left queued are answered first
			await idle();
			await run(service.api, draw, CONNECTIONS, 2);
			const before = cpuNow();
			const r = await run(service.api, draw, CONNECTIONS, SECONDS);
			const after = cpuNow();
			const perRequest = (a: number | null, b: number | null) =>
				a === null || b === null
					? "-"
					: (((a - b) / Math.max(1, r.total)) * 1000).toFixed(2);
			const cpu = `CPU ms/req service ${perRequest(after.service, before.service)}, PostgreSQL ${perRequest(after.pg, before.pg)}, this client ${perRequest(after.client, before.client)}`;
			const met =
				label === "/version/"
					? ""
					: r.p99 <= TARGET.p99 && r.rps >= TARGET.rps
						? " (met)"
						: " (missed)";
			console.log(
				`${label}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms${r.non2xx ? `, non-2xx ${r.codes}` : ""}${met}; ${cpu}`
			);
		}
		console.log(
			`targets: p99 <= ${TARGET.p99} ms and >= ${TARGET.rps} req/s at concurrency ${CONNECTIONS}`
		);
	} finally {
		if (service) await service.stop();
		await db.close();
		await database.stop();
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
