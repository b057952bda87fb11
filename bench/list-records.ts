/**
 * What a page of records read whole costs (docs/decisions.md, "Lists at clients' windows"): each
 * list of P4's `+window` mixes called in this process, without the gateway, with the record
 * cache off, so that every record of every page is read and serialized as an ascending window's
 * are. CPU per call of this process (the service's part) and of PostgreSQL beside each; a
 * figure to compare between two builds run one after the other (the machine's load moves it).
 *
 *   npm run bench:records                  (the embedded database under data/bench-p4)
 *   BENCH_CALLS=800 BENCH_ONLY=/products/ npm run bench:records
 */
import { createSequelize } from "../lib/db/connection";
import { runCachedList } from "../lib/list/cached-list";
import { recordCache } from "../lib/list/record-cache";
import type { ListSource } from "../lib/list/types";
import type { RecordSpec } from "../lib/list/record-spec";
import type { Embedded } from "../lib/list/embedded";
import { INPUT_FILES, SOURCE_FILES } from "../lib/records/file-records";
import { JOB_LIST, JOB_RECORD, JOB_UPDATE_RECORD, JOB_UPDATES_LIST } from "../lib/records/job";
import { JOB_EXE_LIST, JOB_EXE_RECORD } from "../lib/records/job-exe";
import {
	PRODUCT_LIST,
	PRODUCT_RECORD,
	PRODUCT_UPDATE_RECORD,
	PRODUCT_UPDATES_LIST
} from "../lib/records/product-file";
import {
	SOURCE_LIST,
	SOURCE_RECORD,
	SOURCE_UPDATE_RECORD,
	SOURCE_UPDATES_LIST
} from "../lib/records/source-file";
import { treeCpuSeconds } from "./lib/cpu";
import { openP4Database } from "./lib/p4-db";

const CALLS = Number(process.env.BENCH_CALLS) || 400;
const CONCURRENCY = 4;
const DAY = 86400000;

const LISTS: [string, ListSource, RecordSpec<any>, Embedded?][] = [
	["/jobs/", JOB_LIST, JOB_RECORD],
	["/jobs/updates/", JOB_UPDATES_LIST, JOB_UPDATE_RECORD, INPUT_FILES],
	["/job-executions/", JOB_EXE_LIST, JOB_EXE_RECORD],
	["/products/", PRODUCT_LIST, PRODUCT_RECORD],
	["/products/updates/", PRODUCT_UPDATES_LIST, PRODUCT_UPDATE_RECORD, SOURCE_FILES],
	["/sources/", SOURCE_LIST, SOURCE_RECORD],
	["/sources/updates/", SOURCE_UPDATES_LIST, SOURCE_UPDATE_RECORD]
];

/** A request as the `+window` mixes draw them: page 1-20, started 1-30 days back, ended now. */
function windowRequest(path: string) {
	const now = Date.now();
	return {
		query: {
			page: String(1 + Math.floor(Math.random() * 20)),
			page_size: "100",
			started: new Date(now - (1 + Math.random() * 29) * DAY).toISOString(),
			ended: new Date(now).toISOString()
		},
		baseUrl: "http://127.0.0.1",
		path: `/api${path}`
	};
}

async function main() {
	if (process.env.LIST_CACHE_MB !== "0")
		throw new Error("run with LIST_CACHE_MB=0 (npm run bench:records sets it)");
	const database = await openP4Database(() => undefined);
	const db = createSequelize(database.url, { poolMax: CONCURRENCY });
	const only = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
	try {
		console.log(
			`records read whole (cache off: ${recordCache.allocated} bytes), ${CALLS} calls per list at concurrency ${CONCURRENCY} after 50 of warm-up`
		);
		console.log("list                  CPU ms/call here / PostgreSQL   bytes/answer");
		for (const [path, source, spec, embedded] of LISTS) {
			if (only.length > 0 && !only.some(part => path.includes(part))) continue;
			const call = () =>
				runCachedList(
					db,
					source,
					spec,
					windowRequest(path),
					"http://127.0.0.1/api",
					embedded
				);
			for (let i = 0; i < 50; i++) await call();
			const pg0 = database.pgPid === null ? null : treeCpuSeconds(database.pgPid);
			const cpu0 = process.cpuUsage();
			let bytes = 0;
			for (let i = 0; i < CALLS; i += CONCURRENCY) {
				const answers = await Promise.all(Array.from({ length: CONCURRENCY }, call));
				for (const answer of answers) bytes += answer.length;
			}
			const cpu = process.cpuUsage(cpu0);
			const here = (cpu.user + cpu.system) / 1000 / CALLS;
			const pg =
				pg0 === null
					? "-"
					: (((treeCpuSeconds(database.pgPid!) - pg0) * 1000) / CALLS).toFixed(2);
			console.log(
				`${path.padEnd(21)} ${here.toFixed(2).padStart(6)} / ${pg.padStart(5)}          ${Math.round(bytes / CALLS)}`
			);
		}
	} finally {
		await db.close();
		await database.stop();
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
