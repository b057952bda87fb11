/**
 * The plans of the list statements on the seeded P4 database (`npm run bench:seed` first): for
 * each filter and order the spec lists, whether the page is read through an index with no sort
 * of more than a page and no sequential scan of a large table, how long it takes, and how far
 * the list's `count` (exact up to EXACT_COUNT_LIMIT, the planner's estimate beyond) is from the
 * true count.
 *
 *   npm run bench:plans            (the embedded database bench:seed made, or DATABASE_URL)
 */
import type { Sequelize } from "sequelize";
import { createSequelize } from "../lib/db/connection";
import { select } from "../lib/db/run";
import { parseListQuery } from "../lib/list/params";
import { countRows, EXACT_COUNT_LIMIT, pageSql, runLookups } from "../lib/list/run";
import type { ListSource } from "../lib/list/types";
import { cachedPageSql } from "../lib/list/cached-list";
import type { RecordSpec } from "../lib/list/record-spec";
import { JOB_LIST, JOB_RECORD, JOB_UPDATE_RECORD, JOB_UPDATES_LIST } from "../lib/records/job";
import { INGEST_LIST } from "../lib/records/ingest";
import { JOB_EXE_LIST, JOB_EXE_RECORD } from "../lib/records/job-exe";
import { PRODUCT_LIST, PRODUCT_RECORD, PRODUCT_UPDATES_LIST } from "../lib/records/product-file";
import {
	SOURCE_LIST,
	SOURCE_RECORD,
	SOURCE_UPDATE_RECORD,
	SOURCE_UPDATES_LIST
} from "../lib/records/source-file";
import { openP4Database } from "./lib/p4-db";

/** Tables that grow with the cluster's history: never read whole by a list. */
const LARGE_TABLES = new Set(["job", "job_exe", "scale_file", "ingest", "trigger_event"]);

/**
 * The lists of kept records (lib/list/cached-list.ts) run their own page statement, of keys and
 * versions; the others the page statement of whole rows. (The product updates' source is the
 * products', with the same versions.)
 */
const KEPT = new Map<ListSource, RecordSpec<never>>([
	[JOB_LIST, JOB_RECORD],
	[JOB_UPDATES_LIST, JOB_UPDATE_RECORD],
	[JOB_EXE_LIST, JOB_EXE_RECORD],
	[PRODUCT_LIST, PRODUCT_RECORD],
	[SOURCE_LIST, SOURCE_RECORD],
	[SOURCE_UPDATES_LIST, SOURCE_UPDATE_RECORD]
]);

interface PlanNode {
	"Node Type": string;
	"Relation Name"?: string;
	"Index Name"?: string;
	"Actual Rows": number;
	"Actual Loops": number;
	Plans?: PlanNode[];
}

function* walk(node: PlanNode): Generator<PlanNode> {
	yield node;
	for (const child of node.Plans ?? []) yield* walk(child);
}

/** What makes a plan's work grow with the table: sequential scans and sorts of many rows. */
function problems(plan: PlanNode, pageRows: number): string[] {
	const found: string[] = [];
	for (const node of walk(plan)) {
		if (node["Node Type"] === "Seq Scan" && LARGE_TABLES.has(node["Relation Name"] ?? ""))
			found.push(`Seq Scan on ${node["Relation Name"]}`);
		if (node["Node Type"] === "Sort" || node["Node Type"] === "Incremental Sort") {
			const input = node.Plans?.[0];
			const rows = input ? input["Actual Rows"] * input["Actual Loops"] : 0;
			if (rows > pageRows) found.push(`${node["Node Type"]} of ${rows} rows`);
		}
	}
	return found;
}

function indexesOf(plan: PlanNode): string[] {
	const names = new Set<string>();
	for (const node of walk(plan)) if (node["Index Name"]) names.add(node["Index Name"]);
	return [...names];
}

async function timeMs(db: Sequelize, sql: string, bind: unknown[]): Promise<number> {
	const runs: number[] = [];
	for (let i = 0; i < 15; i++) {
		const start = process.hrtime.bigint();
		await select(db, sql, bind);
		runs.push(Number(process.hrtime.bigint() - start) / 1e6);
	}
	runs.sort((a, b) => a - b);
	return runs[Math.floor(runs.length / 2)];
}

async function main() {
	const database = await openP4Database(msg => console.log(msg));
	const db = createSequelize(database.url, { poolMax: 2 });
	try {
		const [{ n }] = await select<{ n: string }>(db, "SELECT count(*) AS n FROM job");
		if (Number(n) === 0) throw new Error("no jobs: run `npm run bench:seed` first");
		const [type] = await select<{ name: string }>(
			db,
			"SELECT name FROM job_type ORDER BY id LIMIT 1 OFFSET 2"
		);
		const [node] = await select<{ id: number }>(db, "SELECT id FROM node ORDER BY id LIMIT 1");
		const cases: [string, ListSource, Record<string, string>][] = [
			["/jobs/", JOB_LIST, {}],
			[
				"/jobs/?status=FAILED&order=-last_modified",
				JOB_LIST,
				{ status: "FAILED", order: "-last_modified" }
			],
			[
				`/jobs/?job_type_name=${type.name}&started=P7D`,
				JOB_LIST,
				{ job_type_name: type.name, started: "P7D" }
			],
			[`/jobs/?job_type_name=${type.name}`, JOB_LIST, { job_type_name: type.name }],
			["/jobs/?job_type_category=(first)", JOB_LIST, { job_type_category: "" }],
			["/jobs/?status=RUNNING", JOB_LIST, { status: "RUNNING" }],
			["/jobs/?order=-created", JOB_LIST, { order: "-created" }],
			["/jobs/?page=500", JOB_LIST, { page: "500" }],
			[`/job-executions/?node_id=${node.id}`, JOB_EXE_LIST, { node_id: String(node.id) }],
			["/job-executions/?status=FAILED", JOB_EXE_LIST, { status: "FAILED" }],
			[
				`/job-executions/?job_type_name=${type.name}`,
				JOB_EXE_LIST,
				{ job_type_name: type.name }
			],
			["/job-executions/?page=500", JOB_EXE_LIST, { page: "500" }],
			["/jobs/updates/", JOB_UPDATES_LIST, {}],
			["/jobs/updates/?status=FAILED", JOB_UPDATES_LIST, { status: "FAILED" }],
			["/jobs/updates/?started=P1D", JOB_UPDATES_LIST, { started: "P1D" }],
			["/products/", PRODUCT_LIST, {}],
			["/products/?is_operational=false", PRODUCT_LIST, { is_operational: "false" }],
			[`/products/?job_type_name=${type.name}`, PRODUCT_LIST, { job_type_name: type.name }],
			["/products/updates/", PRODUCT_UPDATES_LIST, {}],
			["/products/?page=500", PRODUCT_LIST, { page: "500" }],
			["/sources/", SOURCE_LIST, {}],
			["/sources/?is_parsed=true", SOURCE_LIST, { is_parsed: "true" }],
			["/sources/updates/", SOURCE_UPDATES_LIST, {}],
			["/ingests/", INGEST_LIST, {}],
			["/ingests/?status=INGESTED", INGEST_LIST, { status: "INGESTED" }],
			[
				"/ingests/?order=-ingest_started&started=P7D",
				INGEST_LIST,
				{ order: "-ingest_started", started: "P7D" }
			],
			["/ingests/?page=500", INGEST_LIST, { page: "500" }]
		];
		const [category] = await select<{ category: string }>(
			db,
			"SELECT category FROM job_type WHERE category IS NOT NULL ORDER BY id LIMIT 1"
		);
		console.log(
			`\nlist statements at page_size=100 (exact count up to ${EXACT_COUNT_LIMIT}, estimate beyond)\n`
		);
		console.log(
			"request | ms (median of 15) | index-backed | indexes | count answered | true count | off by"
		);
		let failures = 0;
		for (const [name, source, query] of cases) {
			if (query.job_type_category === "") query.job_type_category = category?.category ?? "";
			const q = { page_size: "100", ...query };
			const p = parseListQuery(q, source, new Date(), await runLookups(db, source, q));
			const kept = KEPT.get(source);
			const sql = kept ? cachedPageSql(source, kept, p) : pageSql(source, p);
			const [explained] = await select<{ "QUERY PLAN": { Plan: PlanNode }[] }>(
				db,
				`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
				p.bind
			);
			const plan = explained["QUERY PLAN"][0].Plan;
			// a sort of a few rows more than the page (ties of an order's first key) is bounded
			const found = problems(plan, 2 * (p.offset + p.limit + 1));
			if (found.length > 0) failures++;
			const ms = await timeMs(db, sql, p.bind);
			const counted = await countRows(db, source.from, p.where, p.bind);
			const [{ n: truth }] = await select<{ n: string }>(
				db,
				`SELECT count(*) AS n FROM ${source.from} WHERE ${p.where}`,
				p.bind
			);
			const off = Number(truth) === 0 ? 0 : (counted - Number(truth)) / Number(truth);
			console.log(
				[
					name,
					ms.toFixed(2),
					found.length === 0 ? "yes" : `NO: ${found.join(", ")}`,
					indexesOf(plan).join(" "),
					counted,
					truth,
					`${(off * 100).toFixed(1)}%`
				].join(" | ")
			);
		}
		console.log(
			failures === 0
				? "\nevery list statement is index-backed"
				: `\n${failures} list statements are not index-backed`
		);
	} finally {
		await db.close();
		await database.stop();
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
