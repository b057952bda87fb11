import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { addNode, completedReport, placeQueuedJob } from "../helpers/completion";
import { claimBatch } from "../../lib/scheduling/claim";
import { handOff } from "../../lib/scheduling/handoff";
import { finishExecutions } from "../../lib/executions/finish";
import type { Resources } from "../../lib/scheduling/matching";
import { PIPELINED, plannedPoolSql, transaction } from "../../lib/db/run";

/**
 * The hand-off over real PostgreSQL: the jobs a recipe job's completion queues are placed, in the
 * completion's transaction, in the room it frees (and the room held for them) on its node, only
 * where a pass would have placed them first; nothing of it survives a transaction that aborts.
 */

const AGENT = "agent-handoff";
let tdb: TestDatabase;
let app: TestApi;
let nodeId: number;
let fanType: number;
const types: Record<string, number> = {};

async function query<T = any>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function post(path: string, body: unknown, status = 201): Promise<any> {
	const res = await request("POST", `${app.api}${path}`, body);
	if (res.status !== status) throw new Error(`${path}: ${res.status} ${res.text}`);
	return res.body;
}

/** The recipe's jobs by name. */
async function jobsOf(recipeId: number): Promise<Record<string, any>> {
	const rows = await query(
		`SELECT rj.job_name, j.id, j.status, j.started, j.ended,
			(SELECT count(*)::int FROM queue q WHERE q.job_id = j.id) AS queued,
			(SELECT row_to_json(e) FROM job_exe e WHERE e.job_id = j.id ORDER BY e.id DESC LIMIT 1) AS exe
		 FROM recipe_job rj JOIN job j ON j.id = rj.job_id WHERE rj.recipe_id = $1`,
		[recipeId]
	);
	return Object.fromEntries(rows.map(r => [r.job_name, r]));
}

const place = (jobId: number) => placeQueuedJob(tdb.db, jobId, nodeId, AGENT);
const completed = (exeId: number) => completedReport(exeId, AGENT);

/** Completes executions with the hand-off, as the leading scheduler does. */
function complete(
	exeIds: number[],
	opts: { agents?: string[]; held?: Map<number, Resources> } = {}
) {
	return transaction(tdb.db, PIPELINED, sql =>
		finishExecutions(
			sql,
			{ finished: exeIds.map(completed) },
			{
				handOff: (tx, endedExeIds, queuedJobIds, last) =>
					handOff(
						tx,
						{
							endedExeIds,
							queuedJobIds,
							agents: opts.agents ?? [AGENT],
							held: opts.held
						},
						last
					)
			}
		)
	);
}

async function newFan(): Promise<number> {
	return (await post("/queue/new-recipe/", { recipe_type_id: fanType, recipe_data: {} })).id;
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "job-types", "recipe-types", "queue"]);
	nodeId = await addNode(tdb.db, "handoff-node");
	await query(
		`UPDATE node SET agent_id = $2, cpus_total = 100, mem_total = 100000, disk_total = 100000
		 WHERE id = $1`,
		[nodeId, AGENT]
	);
	for (const name of ["a", "b", "c", "single"])
		types[name] = (
			await post("/job-types/", {
				name: `h-${name}`,
				version: "1.0",
				interface: { command: "/bin/true", command_arguments: "" },
				cpus_required: 1,
				mem_required: 64
			})
		).id;
	const job = (name: string, deps: string[]) => ({
		name: name.toUpperCase(),
		job_type: { name: `h-${name}`, version: "1.0" },
		dependencies: deps.map(d => ({ name: d, connections: [] }))
	});
	fanType = (
		await post("/recipe-types/", {
			name: "fan",
			version: "1.0",
			definition: { input_data: [], jobs: [job("a", []), job("b", ["A"]), job("c", ["A"])] }
		})
	).id;
}, 30000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

beforeEach(async () => {
	// nothing else waits: each case sets what it needs
	await query(`UPDATE job SET status = 'CANCELED' WHERE id IN (SELECT job_id FROM queue)`);
	await query(`DELETE FROM queue`);
	await query(`UPDATE scheduler SET is_paused = false`);
	await query(`UPDATE job_type SET is_paused = false`);
	await query(
		`UPDATE node SET is_paused = false, draining_since = NULL, drain_by = NULL WHERE id = $1`,
		[nodeId]
	);
});

describe("the hand-off", () => {
	it("places a freed job in the room its completion frees, in the same transaction; the rest stays queued", async () => {
		const recipeId = await newFan();
		let jobs = await jobsOf(recipeId);
		const done = await complete([await place(jobs.A.id)]);
		jobs = await jobsOf(recipeId);
		// A's one cpu fits one of B and C: B first (queue order), C waits for a pass
		expect(done.recipeQueued.sort()).toEqual([jobs.B.id, jobs.C.id].sort());
		expect(done.handedOff).toHaveLength(1);
		const [placed] = done.handedOff;
		const handed = placed.job_id === jobs.B.id ? jobs.B : jobs.C;
		const waiting = placed.job_id === jobs.B.id ? jobs.C : jobs.B;
		expect(placed).toMatchObject({
			id: handed.exe.id,
			node_id: nodeId,
			agent_id: AGENT,
			cpus: 1,
			mem: 64,
			in_recipe: true,
			successors: 0
		});
		expect(placed.rank).toHaveLength(3);
		expect(handed).toMatchObject({ status: "RUNNING", queued: 0 });
		expect(handed.exe).toMatchObject({ status: "RUNNING", node_id: nodeId, agent_id: AGENT });
		expect(handed.exe.cpus_scheduled).toBe(1);
		// placed when A ended: one transaction, one clock
		expect(new Date(handed.started).getTime()).toBe(new Date(jobs.A.ended).getTime());
		expect(waiting).toMatchObject({ status: "QUEUED", queued: 1 });
		// a pass finds only the one left
		const rows = await claimBatch(plannedPoolSql(tdb.db), null, [], 100);
		expect(rows.map(r => r.jobId)).toEqual([waiting.id]);
	});

	it("places both with the room held for them, and nothing beyond it", async () => {
		const recipeId = await newFan();
		let jobs = await jobsOf(recipeId);
		const exeA = await place(jobs.A.id);
		const done = await complete([exeA], {
			held: new Map([[nodeId, { cpus: 1, mem: 64, disk: 64 }]])
		});
		jobs = await jobsOf(recipeId);
		expect(done.handedOff.map(p => p.job_id).sort()).toEqual([jobs.B.id, jobs.C.id].sort());
		for (const name of ["B", "C"]) expect(jobs[name].status).toBe("RUNNING");
		// held room short of a job's memory places only one
		const other = await jobsOf(await newFan());
		const short = await complete([await place(other.A.id)], {
			held: new Map([[nodeId, { cpus: 1, mem: 10, disk: 64 }]])
		});
		expect(short.handedOff).toHaveLength(1);
	});

	it("leaves them queued where a pass would place something else first, or nowhere", async () => {
		const cases: [string, () => Promise<unknown>, string[]?][] = [
			["the scheduler paused", () => query(`UPDATE scheduler SET is_paused = true`)],
			[
				"the node paused",
				() => query(`UPDATE node SET is_paused = true WHERE id = $1`, [nodeId])
			],
			[
				"the node draining",
				() =>
					query(
						`UPDATE node SET draining_since = now(), drain_by = 'user' WHERE id = $1`,
						[nodeId]
					)
			],
			[
				"a job of better priority waiting",
				async () => {
					const job = await post("/queue/new-job/", {
						job_type_id: types.single,
						job_data: { input_data: [], output_data: [] }
					});
					await query(`UPDATE queue SET priority = 1 WHERE job_id = $1`, [job.id]);
				}
			],
			["its agent not one work goes to now", async () => undefined, ["another-agent"]]
		];
		for (const [what, setUp, agents] of cases) {
			const recipeId = await newFan();
			let jobs = await jobsOf(recipeId);
			const exeA = await place(jobs.A.id);
			await setUp();
			const done = await complete([exeA], { agents });
			jobs = await jobsOf(recipeId);
			expect([what, done.handedOff]).toEqual([what, []]);
			for (const name of ["B", "C"])
				expect([what, jobs[name].status]).toEqual([what, "QUEUED"]);
			await query(`UPDATE scheduler SET is_paused = false`);
			await query(
				`UPDATE node SET is_paused = false, draining_since = NULL, drain_by = NULL WHERE id = $1`,
				[nodeId]
			);
			await query(`DELETE FROM queue`);
		}
	});

	it("skips a paused job type's job and places the other", async () => {
		const recipeId = await newFan();
		let jobs = await jobsOf(recipeId);
		const exeA = await place(jobs.A.id);
		await query(`UPDATE job_type SET is_paused = true WHERE id = $1`, [types.b]);
		const done = await complete([exeA], {
			held: new Map([[nodeId, { cpus: 1, mem: 64, disk: 64 }]])
		});
		jobs = await jobsOf(recipeId);
		expect(done.handedOff.map(p => p.job_id)).toEqual([jobs.C.id]);
		expect(jobs.B.status).toBe("QUEUED");
	});

	it("places nothing when the completion's transaction aborts", async () => {
		const recipeId = await newFan();
		let jobs = await jobsOf(recipeId);
		const exeA = await place(jobs.A.id);
		await expect(
			transaction(tdb.db, PIPELINED, async sql => {
				const done = await finishExecutions(
					{ query: sql.query },
					{ finished: [completed(exeA)] },
					{
						handOff: (tx, endedExeIds, queuedJobIds, last) =>
							handOff(tx, { endedExeIds, queuedJobIds, agents: [AGENT] }, last)
					}
				);
				expect(done.handedOff).toHaveLength(1);
				throw new Error("killed before the commit");
			})
		).rejects.toThrow("killed before the commit");
		jobs = await jobsOf(recipeId);
		expect(jobs.A.status).toBe("RUNNING");
		for (const name of ["B", "C"]) expect(jobs[name]).toMatchObject({ status: "PENDING" });
		// the report again: now B goes
		const done = await complete([exeA]);
		expect(done.handedOff).toHaveLength(1);
	});
});
