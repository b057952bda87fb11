/**
 * Benchmark P4, the read side at millions of rows: requests/s and latency of the lists on the
 * database `npm run bench:seed` made, at concurrency 32, each beside the same gateway's
 * `GET /api/version/` (no database) measured in the same run; then page 500 of the jobs and
 * executions lists at concurrency 4; the service's largest RSS meanwhile; and the `count` each
 * list answered beside the true count computed in SQL.
 *
 * Each list is measured with a mix of requests, not one URL: every request draws its page
 * (1-20) and its filter value (job type, node, status) at random, so no cached answer can
 * stand in for the work. Each is measured again with the time window real clients send: Scale's
 * web UI computes absolute `started`/`ended` timestamps at every page load, so each request has
 * its own (`started` 1-30 days back, `ended` now, both to the millisecond).
 *
 *   npm run bench:seed && npm run bench:lists      (the embedded database under data/bench-p4)
 *   DATABASE_URL=postgres://... npm run bench:lists
 *   BENCH_SECONDS=20 npm run bench:lists
 *   BENCH_ONLY=/jobs/?status,/products/ npm run bench:lists     (those mixes only)
 */
import os from "os";
import { Client } from "pg";
import { ALL_SERVICES } from "../lib/launch/config";
import { startService } from "./lib/cluster";
import { run } from "./lib/load";
import { cpuReader, rssSampler } from "./lib/cpu";
import { openP4Database } from "./lib/p4-db";

const SECONDS = Number(process.env.BENCH_SECONDS) || 10;
/** each mix runs this long, unmeasured, before it is measured: plans cached, pages in memory */
const WARMUP_SECONDS = 2;
const CONNECTIONS = 32;
const DEEP_CONNECTIONS = 4;
const PAGE_SIZE = 100;
const TARGET = { listP99: 50, listRps: 1000, deepP99: 100, rssMiB: 300 };

/**
 * The seed's RUNNING executions belong to agents that do not exist and its QUEUED ones wait for
 * nodes: a scheduler would fail the first (node-lost) and place the second on a local agent,
 * writing to the tables under measurement. Every other service runs, as in a control plane.
 */
const SERVICES = ALL_SERVICES.filter(s => s !== "scheduler" && s !== "node-agent");

interface Figures {
	rps: number;
	p50: number;
	p99: number;
	errors: number;
	non2xx: number;
	/** the status codes other than 2xx, with their counts, e.g. "404 x 41230" */
	codes: string;
	/** CPU milliseconds per request of the service, PostgreSQL (null: not ours) and this client */
	cpu: { service: number; pg: number | null; client: number };
	/** the service's largest RSS during the run, MiB */
	rssMiB: number;
}

/** A list measured with a mix of requests. */
interface Mix {
	label: string;
	/** a request's path under the API, drawn at random */
	draw: () => string;
	/** the same shape with fixed values, for the count check (none for the windowed mixes) */
	countPath?: string;
	/** the true count of countPath's rows, in SQL */
	countSql: string;
	countBind: unknown[];
}

const pick = <T>(values: readonly T[]): T => values[Math.floor(Math.random() * values.length)];
const page = () => 1 + Math.floor(Math.random() * 20);

async function main() {
	const database = await openP4Database(msg => console.log(msg));
	const client = new Client({ connectionString: database.url });
	await client.connect();
	let service: Awaited<ReturnType<typeof startService>> | null = null;
	try {
		const { rows: tables } = await client.query("SELECT to_regclass('job') IS NOT NULL AS ok");
		const { rows: seeded } = tables[0].ok
			? await client.query(
					"SELECT (SELECT count(*) FROM job)::int AS jobs, (SELECT count(*) FROM job_exe)::int AS exes, (SELECT count(*) FROM scale_file)::int AS files"
				)
			: { rows: [{ jobs: 0 }] };
		if (seeded[0].jobs === 0)
			throw new Error(`no jobs in ${database.where}: run npm run bench:seed first`);
		const names: string[] = (
			await client.query("SELECT name FROM job_type ORDER BY id")
		).rows.map(r => r.name);
		const nodes: number[] = (await client.query("SELECT id FROM node ORDER BY id")).rows.map(
			r => r.id
		);
		const statuses: string[] = (
			await client.query("SELECT DISTINCT status FROM job ORDER BY status")
		).rows.map(r => r.status);
		// BENCH_ONLY=jobs,products: the mixes whose label holds one of these, and no page 500
		const only = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
		const mixes = withWindows(listMixes(names, nodes, statuses)).filter(
			mix => only.length === 0 || only.some(part => mix.label.includes(part))
		);

		service = await startService(database.url, { SERVICES: SERVICES.join(",") });
		const api = service.api;
		const rss = rssSampler(service.proc.pid!);

		const servicePid = service.proc.pid!;
		const cpuNow = cpuReader(servicePid, database.pgPid);
		const measure = async (draw: () => string, connections: number): Promise<Figures> => {
			rss.mark();
			await run(api, draw, connections, WARMUP_SECONDS);
			const before = cpuNow();
			const { total, ...raw } = await run(api, draw, connections, SECONDS);
			const after = cpuNow();
			const rssMiB = rss.mark();
			const perRequest = (a: number, b: number) => ((a - b) / Math.max(1, total)) * 1000;
			return {
				...raw,
				rssMiB,
				cpu: {
					service: perRequest(after.service, before.service),
					pg:
						after.pg === null || before.pg === null
							? null
							: perRequest(after.pg, before.pg),
					client: perRequest(after.client, before.client)
				}
			};
		};
		const version = await measure(() => "/version/", CONNECTIONS);
		const lists: [string, Figures][] = [];
		for (const mix of mixes) lists.push([mix.label, await measure(mix.draw, CONNECTIONS)]);
		const deep: [string, Figures][] = [];
		for (const list of only.length === 0 ? ["/jobs/", "/job-executions/"] : []) {
			const path = `${list}?page=500&page_size=${PAGE_SIZE}`;
			deep.push([path, await measure(() => path, DEEP_CONNECTIONS)]);
		}
		const maxRss = rss.stop();

		const counts = [];
		for (const mix of mixes)
			if (mix.countPath !== undefined) counts.push(await checkCount(api, client, mix));

		console.log(
			`P4 lists on ${seeded[0].jobs.toLocaleString("en-US")} jobs, ${seeded[0].exes.toLocaleString("en-US")} executions, ${seeded[0].files.toLocaleString("en-US")} files (${database.where}); ${SECONDS} s per run after ${WARMUP_SECONDS} s of warm-up; ${os.cpus().length} cpus; services: all but scheduler and node-agent`
		);
		console.log(
			"each list: page 1-20 of 100 rows and its filter value drawn at random per request; +window: started 1-30 days back and ended now, absolute, to the ms, distinct per request"
		);
		printTable(version, lists, deep, maxRss);
		printCounts(counts);
	} finally {
		if (service) await service.stop();
		await client.end();
		await database.stop();
	}
}

function listMixes(names: string[], nodes: number[], statuses: string[]): Mix[] {
	const jobsOfType = `SELECT count(*)::int AS n FROM job j JOIN job_type jt ON jt.id = j.job_type_id
		WHERE jt.name = $1 AND j.last_modified >= now() - interval '7 days'`;
	// /products/ and /sources/ as Scale 3.0's managers: products ever published, every source
	const products =
		"SELECT count(*)::int AS n FROM scale_file WHERE file_type = 'PRODUCT' AND has_been_published";
	const sources = "SELECT count(*)::int AS n FROM scale_file WHERE file_type = 'SOURCE'";
	const q = `page_size=${PAGE_SIZE}`;
	return [
		{
			label: "/jobs/",
			draw: () => `/jobs/?page=${page()}&${q}`,
			countPath: `/jobs/?${q}`,
			countSql: "SELECT count(*)::int AS n FROM job",
			countBind: []
		},
		{
			label: "/jobs/?status=<s>&order=-last_modified",
			draw: () => `/jobs/?status=${pick(statuses)}&order=-last_modified&page=${page()}&${q}`,
			countPath: `/jobs/?status=FAILED&order=-last_modified&${q}`,
			countSql: "SELECT count(*)::int AS n FROM job WHERE status = 'FAILED'",
			countBind: []
		},
		{
			label: "/jobs/?job_type_name=<t>&started=P7D",
			draw: () =>
				`/jobs/?job_type_name=${encodeURIComponent(pick(names))}&started=P7D&page=${page()}&${q}`,
			countPath: `/jobs/?job_type_name=${encodeURIComponent(names[0])}&started=P7D&${q}`,
			countSql: jobsOfType,
			countBind: [names[0]]
		},
		{
			label: "/job-executions/?node_id=<n>",
			draw: () => `/job-executions/?node_id=${pick(nodes)}&page=${page()}&${q}`,
			countPath: `/job-executions/?node_id=${nodes[0]}&${q}`,
			countSql: "SELECT count(*)::int AS n FROM job_exe WHERE node_id = $1",
			countBind: [nodes[0]]
		},
		{
			label: "/jobs/updates/",
			draw: () => `/jobs/updates/?page=${page()}&${q}`,
			countPath: `/jobs/updates/?${q}`,
			countSql: "SELECT count(*)::int AS n FROM job",
			countBind: []
		},
		{
			label: "/products/",
			draw: () => `/products/?page=${page()}&${q}`,
			countPath: `/products/?${q}`,
			countSql: products,
			countBind: []
		},
		{
			label: "/products/updates/",
			draw: () => `/products/updates/?page=${page()}&${q}`,
			countPath: `/products/updates/?${q}`,
			countSql: products,
			countBind: []
		},
		{
			label: "/sources/?is_parsed=true",
			draw: () => `/sources/?is_parsed=true&page=${page()}&${q}`,
			countPath: `/sources/?is_parsed=true&${q}`,
			countSql: `${sources} AND is_parsed`,
			countBind: []
		},
		{
			label: "/sources/updates/",
			draw: () => `/sources/updates/?page=${page()}&${q}`,
			countPath: `/sources/updates/?${q}`,
			countSql: sources,
			countBind: []
		}
	];
}

/** An ISO-8601 instant to the millisecond, as a browser's toISOString writes it. */
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Each mix again with the window a client computes at each page load: absolute `started` and
 * `ended` (a relative `started=P7D` replaced), distinct per request.
 */
function withWindows(mixes: Mix[]): Mix[] {
	const windowed = mixes.map(mix => ({
		label: `${mix.label.replace(/&started=P7D$/, "")} +window`,
		draw: () => {
			const now = Date.now();
			const started = now - (1 + Math.random() * 29) * 86400000;
			return `${mix.draw().replace(/&started=P7D/, "")}&started=${iso(started)}&ended=${iso(now)}`;
		},
		countSql: mix.countSql,
		countBind: mix.countBind
	}));
	return [...mixes, ...windowed];
}

interface CountCheck {
	path: string;
	/** the API's count, or its status when it did not answer 200 */
	api: number | string;
	truth: number;
}

async function checkCount(api: string, client: Client, mix: Mix): Promise<CountCheck> {
	const res = await fetch(api + mix.countPath!);
	const body = res.status === 200 ? ((await res.json()) as { count: number }) : null;
	if (!body) await res.arrayBuffer();
	const { rows } = await client.query(mix.countSql, mix.countBind);
	return {
		path: mix.countPath!,
		api: body ? body.count : `HTTP ${res.status}`,
		truth: rows[0].n
	};
}

function printTable(
	version: Figures,
	lists: [string, Figures][],
	deep: [string, Figures][],
	maxRss: number
) {
	const ok = (f: Figures) => f.non2xx === 0 && f.errors === 0;
	const row = (label: string, f: Figures, target: string, met: string) =>
		[
			label.padEnd(48),
			f.rps.toFixed(0).padStart(7),
			String(f.p50).padStart(5),
			String(f.p99).padStart(5),
			String(f.non2xx).padStart(8),
			String(f.errors).padStart(6),
			(f.rps / version.rps).toFixed(3).padStart(9),
			[f.cpu.service, f.cpu.pg, f.cpu.client]
				.map(ms => (ms === null ? "-" : ms.toFixed(2)))
				.join(" / ")
				.padStart(20),
			f.rssMiB.toFixed(0).padStart(4),
			target.padEnd(26),
			met
		].join(" ");
	console.log(
		[
			"request".padEnd(48),
			"req/s".padStart(7),
			"p50".padStart(5),
			"p99".padStart(5),
			"non-2xx".padStart(8),
			"errors".padStart(6),
			"÷version".padStart(9),
			"CPU ms/req svc/pg/cli".padStart(20),
			"RSS".padStart(4),
			"target".padEnd(26),
			"met"
		].join(" ")
	);
	console.log(row(`/version/ (reference, c=${CONNECTIONS})`, version, "", ""));
	const verdict = (f: Figures, pass: boolean) =>
		!ok(f) ? `no (${f.codes || `${f.errors} errors`})` : pass ? "yes" : "no";
	for (const [label, f] of lists)
		console.log(
			row(
				label,
				f,
				`p99<=${TARGET.listP99} ms, >=${TARGET.listRps}/s`,
				verdict(f, f.p99 <= TARGET.listP99 && f.rps >= TARGET.listRps)
			)
		);
	for (const [label, f] of deep)
		console.log(
			row(
				`${label} (c=${DEEP_CONNECTIONS})`,
				f,
				`p99<=${TARGET.deepP99} ms`,
				verdict(f, f.p99 <= TARGET.deepP99)
			)
		);
	console.log(
		`service RSS, largest sample over all runs: ${maxRss.toFixed(0)} MiB (target <= ${TARGET.rssMiB} MiB): ${maxRss <= TARGET.rssMiB ? "yes" : "no"}`
	);
	console.log(
		"req/s: mean over the run; p50, p99: milliseconds; ÷version: req/s over /version/'s; CPU per request of the service, PostgreSQL and this load generator; RSS: the service's largest during the run, MiB"
	);
}

function printCounts(counts: CountCheck[]) {
	console.log(
		"count answered beside SELECT count(*) in SQL (products: ever published; sources: all)"
	);
	for (const c of counts) {
		const error =
			typeof c.api === "number" && c.truth > 0
				? `${(((c.api - c.truth) / c.truth) * 100).toFixed(2)}%`
				: typeof c.api === "number" && c.api === c.truth
					? "0.00%"
					: "-";
		console.log(
			`${c.path.padEnd(62)} api ${String(typeof c.api === "number" ? c.api.toLocaleString("en-US") : c.api).padStart(11)}   sql ${c.truth.toLocaleString("en-US").padStart(11)}   error ${error.padStart(8)}`
		);
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
