/**
 * Completions with products, in-process against a throwaway PostgreSQL: PRODUCTS_N executions,
 * each with one product, completed in batches of PRODUCTS_BATCH by two report transactions at
 * once (the scheduler's `flushConcurrency`), through finishExecutions as the scheduler writes
 * them. Two mixes: every uuid new (no two transactions share one), and reruns (each uuid
 * completed twice, its two executions in batches written at once, so one transaction waits for
 * the other). Prints completions/s, a batch's p50/p99 ms and the published products per uuid
 * (1 when none was left published beside another). Run it A/B, alternating.
 *
 *   npm run bench:products        PRODUCTS_N=4000 PRODUCTS_BATCH=50 npm run bench:products
 */
import fs from "fs";
import os from "os";
import path from "path";
import type { Sequelize } from "sequelize";
import { CONFLICT_RETRY, PIPELINED, transaction } from "../lib/db/run";
import { finishExecutions } from "../lib/executions/finish";
import { queueNewJobs } from "../lib/jobs/new-job";
import { addFileJobType, addNode } from "../test/helpers/completion";
import { completedReport } from "./lib/instant-agent";
import { benchDatabase, percentile } from "./lib/cluster";

const N = Number(process.env.PRODUCTS_N) || 4000;
const BATCH = Number(process.env.PRODUCTS_BATCH) || 50;
const AGENT = "bench-agent";

async function rows<T = any>(db: Sequelize, sql: string, bind: unknown[] = []): Promise<T[]> {
	const [result] = await db.query(sql, { bind });
	return result as T[];
}

/**
 * RUNNING executions of a new job type, one per source file of `sources` (made here), each
 * source given to `copies` jobs; answers the executions in completion order: for reruns, a
 * batch's sources again in the batch after it.
 */
async function runningExes(
	db: Sequelize,
	workspaceId: number,
	nodeId: number,
	name: string,
	sources: number,
	copies: number
): Promise<number[]> {
	const jobTypeId = await addFileJobType(db, name);
	const files = await rows<{ id: number }>(
		db,
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid)
		 SELECT 'SOURCE', $1, $2 || i || '.tif', 'in/' || $2 || i || '.tif', 'image/tiff', 1,
			md5($2 || i) FROM generate_series(1, $3) AS i ORDER BY i RETURNING id`,
		[workspaceId, name, sources]
	);
	const order: number[] = [];
	for (let start = 0; start < files.length; start += BATCH)
		for (let copy = 0; copy < copies; copy++)
			order.push(...files.slice(start, start + BATCH).map(f => f.id));
	const queued = [];
	for (let start = 0; start < order.length; start += 1000)
		queued.push(
			...(await transaction(db, t =>
				queueNewJobs(
					db,
					t,
					order.slice(start, start + 1000).map(fileId => ({
						jobTypeId,
						jobData: {
							input_data: [{ name: "image", file_id: fileId }],
							output_data: [
								{ name: "result", workspace_id: workspaceId },
								{ name: "extras", workspace_id: workspaceId }
							]
						}
					}))
				)
			))
		);
	const exeIds = queued.map(q => q.jobExeId);
	await rows(db, `DELETE FROM queue WHERE job_exe_id = ANY($1::int[])`, [exeIds]);
	await rows(
		db,
		`UPDATE job_exe SET status = 'RUNNING', started = now(), node_id = $2, agent_id = $3
		 WHERE id = ANY($1::int[])`,
		[exeIds, nodeId, AGENT]
	);
	await rows(
		db,
		`UPDATE job SET status = 'RUNNING', started = now(), last_status_change = now()
		 WHERE id = ANY($1::int[])`,
		[queued.map(q => q.jobId)]
	);
	return exeIds;
}

/** Completes the executions in batches, two transactions at once; answers the figures. */
async function complete(db: Sequelize, workspaceId: number, exeIds: number[]) {
	const batches: number[][] = [];
	for (let start = 0; start < exeIds.length; start += BATCH)
		batches.push(exeIds.slice(start, start + BATCH));
	const ms: number[] = [];
	let next = 0;
	const worker = async () => {
		while (next < batches.length) {
			const batch = batches[next++];
			const began = process.hrtime.bigint();
			await transaction(db, { ...PIPELINED, retry: CONFLICT_RETRY }, sql =>
				finishExecutions(sql, {
					finished: batch.map(id => ({
						...completedReport(id, AGENT),
						products: [
							{
								outputName: "result",
								workspaceId,
								filePath: `out/${id}/result.txt`,
								fileName: "result.txt",
								mediaType: "text/plain",
								size: 1
							}
						]
					}))
				})
			);
			ms.push(Number(process.hrtime.bigint() - began) / 1e6);
		}
	};
	const started = process.hrtime.bigint();
	await Promise.all([worker(), worker()]);
	const seconds = Number(process.hrtime.bigint() - started) / 1e9;
	ms.sort((a, b) => a - b);
	return { rate: exeIds.length / seconds, p50: percentile(ms, 50), p99: percentile(ms, 99) };
}

async function main() {
	const { db, stop } = await benchDatabase();
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-products-"));
	try {
		const [ws] = await rows<{ id: number }>(
			db,
			`INSERT INTO workspace (name, json_config) VALUES ('out', $1) RETURNING id`,
			[JSON.stringify({ version: "1.0", broker: { type: "host", host_path: dir } })]
		);
		const nodeId = await addNode(db, "bench.example");
		for (const [mix, copies] of [
			["new uuids", 1],
			["reruns", 2]
		] as const) {
			const exeIds = await runningExes(
				db,
				ws.id,
				nodeId,
				mix.replace(" ", "-"),
				N / copies,
				copies
			);
			await rows(db, "ANALYZE");
			const f = await complete(db, ws.id, exeIds);
			const [check] = await rows<{ published: number; uuids: number }>(
				db,
				`SELECT count(*) FILTER (WHERE f.is_published)::int AS published,
					count(DISTINCT f.uuid)::int AS uuids
				 FROM scale_file f JOIN job_exe e ON e.id = f.job_exe_id
				 WHERE f.job_exe_id = ANY($1::int[])`,
				[exeIds]
			);
			console.log(
				`${mix}: ${exeIds.length} completions with a product, batches of ${BATCH}, 2 at once: ` +
					`${f.rate.toFixed(0)}/s, batch p50 ${f.p50.toFixed(1)} ms p99 ${f.p99.toFixed(1)} ms; ` +
					`published per uuid ${(check.published / check.uuids).toFixed(3)}`
			);
		}
	} finally {
		await stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
