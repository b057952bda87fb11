/**
 * Why lists at clients' windows cost more (docs/decisions.md, "Lists at clients' windows"): the
 * jobs list on the P4 database at concurrency 32, pages 1-20, with no window, one fixed absolute
 * window, windows differing within a minute, and a distinct window per request (`started` 1-30
 * days back, `ended` now) read ascending (each page starts at its own rows) and descending (the
 * newest rows, the same pages). CPU per request of the service and PostgreSQL beside each.
 *
 *   npm run bench:windows            (the embedded database under data/bench-p4, as bench:lists)
 *   BENCH_SECONDS=10 BENCH_ONLY=distinct,distinct-desc npm run bench:windows
 */
import { ALL_SERVICES } from "../lib/launch/config";
import { startService } from "./lib/cluster";
import { cpuReader } from "./lib/cpu";
import { run } from "./lib/load";
import { openP4Database } from "./lib/p4-db";

const SECONDS = Number(process.env.BENCH_SECONDS) || 5;
const DAY = 86400000;
const iso = (ms: number) => new Date(ms).toISOString();
const page = () => 1 + Math.floor(Math.random() * 20);
const q = () => `page=${page()}&page_size=100`;

async function main() {
	const database = await openP4Database(() => undefined);
	const service = await startService(database.url, {
		SERVICES: ALL_SERVICES.filter(s => s !== "scheduler" && s !== "node-agent").join(",")
	});
	try {
		const fixed = Date.now() - 10 * DAY;
		const distinct = (order: string) => () => {
			const now = Date.now();
			const started = now - (1 + Math.random() * 29) * DAY;
			return `/jobs/?${order}${q()}&started=${iso(started)}&ended=${iso(now)}`;
		};
		const mixes: [string, () => string][] = [
			["none", () => `/jobs/?${q()}`],
			["fixed", () => `/jobs/?${q()}&started=${iso(fixed)}&ended=${iso(fixed + 20 * DAY)}`],
			[
				"same-minute",
				() =>
					`/jobs/?${q()}&started=${iso(fixed + Math.random() * 50000)}&ended=${iso(Date.now())}`
			],
			["distinct", distinct("")],
			["distinct-desc", distinct("order=-last_modified&")]
		];
		const only = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
		const cpu = cpuReader(service.proc.pid!, database.pgPid);
		console.log(`/jobs/ windows, c=32, ${SECONDS} s each after 2 s of warm-up`);
		console.log("window          req/s   p50   p99  CPU ms/req svc / pg");
		for (const [name, draw] of mixes) {
			if (only.length > 0 && !only.includes(name)) continue;
			await run(service.api, draw, 32, 2);
			const before = cpu();
			const r = await run(service.api, draw, 32, SECONDS);
			const after = cpu();
			const per = (a: number, b: number) => (((a - b) / r.total) * 1000).toFixed(2);
			const pg = after.pg === null || before.pg === null ? "-" : per(after.pg, before.pg);
			console.log(
				`${name.padEnd(14)} ${r.rps.toFixed(0).padStart(6)} ${String(r.p50).padStart(5)} ${String(r.p99).padStart(5)}  ${per(after.service, before.service)} / ${pg}${r.non2xx + r.errors > 0 ? `  (${r.non2xx} non-2xx, ${r.errors} errors)` : ""}`
			);
		}
	} finally {
		await service.stop();
		await database.stop();
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
