import { Client } from "pg";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { addNode, completedReport, placeQueuedJob } from "../helpers/completion";
import { claimBatch } from "../../lib/scheduling/claim";
import { applyPlacements } from "../../lib/scheduling/place";
import { finishExecutions } from "../../lib/executions/finish";
import { intakeGateOf } from "../../lib/recipes/intake-gate";
import type { PlacedExe } from "../../lib/executions/types";
import { PlacedExecutions } from "../../lib/scheduling/dispatch";
import { PIPELINED, plannedPoolSql, transaction } from "../../lib/db/run";
import { createRecipes } from "../../lib/recipes/create";
import { FieldError } from "../../lib/errors";
import { cancelJobTransaction } from "../../lib/queue/cancel";

/**
 * A recipe's jobs advancing in the transactions of their completions, over real PostgreSQL: a
 * completion that aborts queues nothing, a completion queues its dependents once however often
 * it is reported, and two dependencies completing at once in two transactions queue their common
 * dependent exactly once.
 */

const AGENT = "agent-recipe-advance";
let tdb: TestDatabase;
let app: TestApi;
let nodeId: number;
let diamondType: number;

async function query<T = any>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function post(path: string, body: unknown, status = 201): Promise<any> {
	const res = await request("POST", `${app.api}${path}`, body);
	if (res.status !== status) throw new Error(`${path}: ${res.status} ${res.text}`);
	return res.body;
}

/** The recipe's jobs by name: status and how many executions each has. */
async function jobsOf(
	recipeId: number
): Promise<
	Record<
		string,
		{ id: number; status: string; exes: number; queued: number; successors: number | null }
	>
> {
	const rows = await query<{
		job_name: string;
		id: number;
		status: string;
		exes: number;
		queued: number;
		successors: number | null;
	}>(
		`SELECT rj.job_name, j.id, j.status,
			(SELECT count(*)::int FROM job_exe e WHERE e.job_id = j.id) AS exes,
			(SELECT count(*)::int FROM queue q WHERE q.job_id = j.id) AS queued,
			(SELECT q.successors FROM queue q WHERE q.job_id = j.id) AS successors
		 FROM recipe_job rj JOIN job j ON j.id = rj.job_id WHERE rj.recipe_id = $1`,
		[recipeId]
	);
	return Object.fromEntries(
		rows.map(r => [
			r.job_name,
			{ id: r.id, status: r.status, exes: r.exes, queued: r.queued, successors: r.successors }
		])
	);
}

const place = (jobId: number) => placeQueuedJob(tdb.db, jobId, nodeId, AGENT);
const completed = (exeId: number) => completedReport(exeId, AGENT);

const complete = (exeIds: number[]) =>
	transaction(tdb.db, PIPELINED, sql =>
		finishExecutions(sql, { finished: exeIds.map(completed) })
	);

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "job-types", "recipe-types", "queue"]);
	nodeId = await addNode(tdb.db, "recipe-node");
	await query(`UPDATE node SET agent_id = $2 WHERE id = $1`, [nodeId, AGENT]);
	for (const name of ["a", "b", "c", "d"])
		await post("/job-types/", {
			name,
			version: "1.0",
			interface: { command: "/bin/true", command_arguments: "" }
		});
	const job = (name: string, deps: string[]) => ({
		name: name.toUpperCase(),
		job_type: { name, version: "1.0" },
		dependencies: deps.map(d => ({ name: d, connections: [] }))
	});
	diamondType = (
		await post("/recipe-types/", {
			name: "diamond",
			version: "1.0",
			definition: {
				input_data: [],
				jobs: [job("a", []), job("b", ["A"]), job("c", ["A"]), job("d", ["B", "C"])]
			}
		})
	).id;
}, 30000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

async function newDiamond(): Promise<number> {
	return (await post("/queue/new-recipe/", { recipe_type_id: diamondType, recipe_data: {} })).id;
}

describe("a recipe advancing", () => {
	it("queues nothing when the completion's transaction aborts, and its dependents once when it commits", async () => {
		const recipeId = await newDiamond();
		let jobs = await jobsOf(recipeId);
		// its queue row holds room in the launch window for the two jobs its end frees
		expect(jobs.A).toMatchObject({ status: "QUEUED", exes: 1, queued: 1, successors: 2 });
		for (const name of ["B", "C", "D"])
			expect(jobs[name]).toMatchObject({ status: "PENDING", exes: 0 });
		const exeA = await place(jobs.A.id);

		// the process dies after the completion's statements, before its commit (the statements
		// run without `commitWith`, which would send the commit with the last of them)
		await expect(
			transaction(tdb.db, PIPELINED, async sql => {
				const done = await finishExecutions(
					{ query: sql.query },
					{ finished: [completed(exeA)] }
				);
				expect(done.recipeQueued).toHaveLength(2);
				throw new Error("killed before the commit");
			})
		).rejects.toThrow("killed before the commit");
		jobs = await jobsOf(recipeId);
		expect(jobs.A.status).toBe("RUNNING");
		for (const name of ["B", "C", "D"])
			expect(jobs[name]).toMatchObject({ status: "PENDING", exes: 0, queued: 0 });

		// the agent's report comes again (it retries until answered): now it commits
		const done = await complete([exeA]);
		expect(done.recipeQueued.sort()).toEqual([jobs.B.id, jobs.C.id].sort());
		// and again: a repeat changes nothing
		expect((await complete([exeA])).recipeQueued).toEqual([]);
		jobs = await jobsOf(recipeId);
		expect(jobs.A.status).toBe("COMPLETED");
		expect(jobs.B).toMatchObject({ status: "QUEUED", exes: 1, queued: 1, successors: 1 });
		expect(jobs.C).toMatchObject({ status: "QUEUED", exes: 1, queued: 1, successors: 1 });
		expect(jobs.D).toMatchObject({ status: "PENDING", exes: 0 });
	});

	it("queues a job whose two dependencies complete at once, in two transactions, exactly once", async () => {
		for (let round = 0; round < 5; round++) {
			const recipeId = await newDiamond();
			let jobs = await jobsOf(recipeId);
			await complete([await place(jobs.A.id)]);
			jobs = await jobsOf(recipeId);
			const [exeB, exeC] = [await place(jobs.B.id), await place(jobs.C.id)];
			const [b, c] = await Promise.all([complete([exeB]), complete([exeC])]);
			jobs = await jobsOf(recipeId);
			expect([...b.recipeQueued, ...c.recipeQueued]).toEqual([jobs.D.id]);
			expect(jobs.D).toMatchObject({ status: "QUEUED", exes: 1, queued: 1, successors: 0 });
			const [recipe] = await query(`SELECT completed FROM recipe WHERE id = $1`, [recipeId]);
			expect(recipe.completed).toBeNull();
			await complete([await place(jobs.D.id)]);
			const [after] = await query(`SELECT completed FROM recipe WHERE id = $1`, [recipeId]);
			expect(after.completed).not.toBeNull();
		}
	});

	it("places a freed job by its recipe's age: ahead of work that arrived after the recipe", async () => {
		const older = await newDiamond();
		await new Promise(r => setTimeout(r, 20));
		const newer = await newDiamond();
		const [type] = await query<{ id: number }>(`SELECT id FROM job_type WHERE name = 'a'`);
		const single = await post("/queue/new-job/", {
			job_type_id: type.id,
			job_data: { input_data: [], output_data: [] }
		});
		let jobs = await jobsOf(older);
		await complete([await place(jobs.A.id)]);
		jobs = await jobsOf(older);
		const newerA = (await jobsOf(newer)).A.id;
		const order = (
			await query<{ job_id: number }>(
				`SELECT job_id FROM queue WHERE job_id = ANY($1::int[]) ORDER BY priority, queued, id`,
				[[jobs.B.id, jobs.C.id, newerA, single.id]]
			)
		).map(r => r.job_id);
		// B and C, queued last, come first: their recipe arrived before the others
		expect(order.slice(0, 2).sort()).toEqual([jobs.B.id, jobs.C.id].sort());
		expect(order.slice(2)).toEqual([newerA, single.id]);
		// the jobs themselves say when they were queued
		const [b] = await query<{ queued: Date }>(`SELECT queued FROM job WHERE id = $1`, [
			jobs.B.id
		]);
		const [a] = await query<{ queued: Date }>(`SELECT queued FROM job WHERE id = $1`, [newerA]);
		expect(b.queued.getTime()).toBeGreaterThan(a.queued.getTime());
	});

	it("ranks recipes written in one statement in their order: the first's B ahead of the second's A", async () => {
		const [older, newer] = (await createRecipes(plannedPoolSql(tdb.db), [
			{ recipeTypeId: diamondType, data: {} },
			{ recipeTypeId: diamondType, data: {} }
		])) as { recipeId: number }[];
		const [rc1, rc2] = await query<{ created: string }>(
			`SELECT created::text FROM recipe WHERE id = ANY($1::int[]) ORDER BY id`,
			[[older.recipeId, newer.recipeId]]
		);
		expect(rc1.created < rc2.created).toBe(true);
		let jobs = await jobsOf(older.recipeId);
		await complete([await place(jobs.A.id)]);
		jobs = await jobsOf(older.recipeId);
		const newerA = (await jobsOf(newer.recipeId)).A.id;
		const order = (
			await query<{ job_id: number }>(
				`SELECT job_id FROM queue WHERE job_id = ANY($1::int[]) ORDER BY priority, queued, id`,
				[[jobs.B.id, jobs.C.id, newerA]]
			)
		).map(r => r.job_id);
		// without distinct creation times the two recipes tied, and the newer A's older queue row won
		expect(order.slice(0, 2).sort()).toEqual([jobs.B.id, jobs.C.id].sort());
		expect(order[2]).toBe(newerA);
	});
});

describe("a recipe job placed by the scheduler", () => {
	/** Places a QUEUED job as a pass does (the real statement); answers what it answered. */
	async function placeAsPass(jobId: number): Promise<PlacedExe[]> {
		const sql = plannedPoolSql(tdb.db);
		const rows = (await claimBatch(sql, null, [], 1000)).filter(r => r.jobId === jobId);
		const node = { id: nodeId, agentId: AGENT, free: { cpus: 100, mem: 1e6, disk: 1e6 } };
		return applyPlacements(
			sql,
			rows.map(row => ({ row, node }))
		);
	}

	/** Completes an execution in a transaction whose statements are counted. */
	async function completeCounted(exeId: number, placed?: PlacedExecutions) {
		let statements = 0;
		const result = await transaction(tdb.db, PIPELINED, sql =>
			finishExecutions(
				{
					query: (text, values) => (statements++, sql.query(text, values)),
					commitWith: (text, values) => (statements++, sql.commitWith!(text, values))
				},
				{ finished: [completed(exeId)] },
				{ placed }
			)
		);
		return { result, statements };
	}

	it("has its completion recorded from what its placement answered: a statement fewer, the same outcome", async () => {
		const known = new PlacedExecutions();
		const outcomes = [];
		for (const cache of [known, undefined]) {
			const recipeId = await newDiamond();
			const jobs = await jobsOf(recipeId);
			const placed = await placeAsPass(jobs.A.id);
			expect(placed).toHaveLength(1);
			expect(placed[0]).toMatchObject({
				job_id: jobs.A.id,
				agent_id: AGENT,
				in_recipe: true
			});
			cache?.remember(placed);
			const { result, statements } = await completeCounted(placed[0].id, cache);
			const after = await jobsOf(recipeId);
			expect(result.completedJobs).toEqual([jobs.A.id]);
			expect(result.recipeQueued.sort()).toEqual([after.B.id, after.C.id].sort());
			expect(after.A.status).toBe("COMPLETED");
			for (const name of ["B", "C"]) expect(after[name]).toMatchObject({ status: "QUEUED" });
			outcomes.push(statements);
		}
		// known: the completing statement, the recipes' read, the queueing; else a read first
		expect(outcomes).toEqual([3, 4]);
		expect(known.size).toBe(0);
	});
});

describe("a recipe created", () => {
	it("without jobs is completed at once", async () => {
		const type = await post("/recipe-types/", {
			name: "empty",
			version: "1.0",
			definition: { input_data: [], jobs: [] }
		});
		const recipe = await post("/queue/new-recipe/", {
			recipe_type_id: type.id,
			recipe_data: {}
		});
		expect(recipe.jobs).toEqual([]);
		expect(recipe.completed).toBe(recipe.created);
		const [row] = await query<{ completed: Date | null }>(
			`SELECT completed FROM recipe WHERE id = $1`,
			[recipe.id]
		);
		expect(row.completed).not.toBeNull();
	});

	it("through REST waits for the scheduler's control work in flight, then is written", async () => {
		const queue = app.broker.getLocalService("queue") as unknown as {
			settings: { recipeIntakeWaitMs: number };
		};
		const gate = intakeGateOf(app.broker);
		const count = async () =>
			(await query<{ n: number }>(`SELECT count(*)::int AS n FROM recipe`))[0].n;
		const before = await count();
		queue.settings.recipeIntakeWaitMs = 60000;
		gate.enterControl();
		try {
			let answered = false;
			const posting = post("/queue/new-recipe/", {
				recipe_type_id: diamondType,
				recipe_data: {}
			}).finally(() => (answered = true));
			await new Promise(r => setTimeout(r, 300));
			expect(answered).toBe(false);
			expect(await count()).toBe(before);
			gate.leaveControl();
			const recipe = await posting;
			expect(recipe.jobs.map((j: { job_name: string }) => j.job_name)).toEqual([
				"A",
				"B",
				"C",
				"D"
			]);
			expect(await count()).toBe(before + 1);
		} finally {
			queue.settings.recipeIntakeWaitMs = 60;
		}
	});
});

describe("recipes created together", () => {
	/** The recipe's rows: its event, and its jobs with their events, executions and queue rows. */
	async function written(recipeId: number) {
		const [recipe] = await query<{ event_id: number; type: string; completed: Date | null }>(
			`SELECT r.event_id, e.type, r.completed FROM recipe r
			 JOIN trigger_event e ON e.id = r.event_id WHERE r.id = $1`,
			[recipeId]
		);
		const jobs = await query<{ job_name: string; event_id: number }>(
			`SELECT rj.job_name, j.event_id FROM recipe_job rj JOIN job j ON j.id = rj.job_id
			 WHERE rj.recipe_id = $1 ORDER BY rj.job_name`,
			[recipeId]
		);
		return { recipe, jobs, byName: await jobsOf(recipeId) };
	}

	it("are checked each on its own and written in one statement, each with its event and jobs", async () => {
		const empty = await post("/recipe-types/", {
			name: "empty-together",
			version: "1.0",
			definition: { input_data: [], jobs: [] }
		});
		const [event] = await query<{ id: number }>(
			`INSERT INTO trigger_event (type, description, occurred) VALUES ('INGEST', '{}', now())
			 RETURNING id`
		);
		const [before] = await query<{ n: number }>(`SELECT count(*)::int AS n FROM recipe`);
		const answers = await createRecipes(plannedPoolSql(tdb.db), [
			{ recipeTypeId: diamondType, data: {} },
			{ recipeTypeId: 999999, data: {} },
			{ recipeTypeId: empty.id, data: {} },
			{ recipeTypeId: diamondType, data: {}, eventId: event.id },
			{ recipeTypeId: diamondType, data: { input_data: [{ name: "nope", value: "1" }] } }
		]);
		expect(answers[1]).toBeInstanceOf(FieldError);
		expect((answers[1] as FieldError).message).toMatch(/no recipe type with id 999999/);
		expect(answers[4]).toBeInstanceOf(FieldError);
		const [after] = await query<{ n: number }>(`SELECT count(*)::int AS n FROM recipe`);
		expect(after.n - before.n).toBe(3);

		const [first, , none, triggered] = answers as {
			recipeId: number;
			jobIds: number[];
			queued: number[];
		}[];
		expect(new Set([first.recipeId, none.recipeId, triggered.recipeId]).size).toBe(3);
		for (const made of [first, triggered]) {
			const { recipe, jobs, byName } = await written(made.recipeId);
			expect(recipe.completed).toBeNull();
			expect(jobs.map(j => j.job_name)).toEqual(["A", "B", "C", "D"]);
			// every job of the recipe carries the recipe's event
			expect(new Set(jobs.map(j => j.event_id))).toEqual(new Set([recipe.event_id]));
			expect(made.jobIds.sort()).toEqual(
				Object.values(byName)
					.map(j => j.id)
					.sort()
			);
			expect(made.queued).toEqual([byName.A.id]);
			expect(byName.A).toMatchObject({ status: "QUEUED", exes: 1, queued: 1 });
			for (const name of ["B", "C", "D"])
				expect(byName[name]).toMatchObject({ status: "PENDING", exes: 0, queued: 0 });
		}
		const mine = await written(first.recipeId);
		expect(mine.recipe.type).toBe("USER");
		const theirs = await written(triggered.recipeId);
		expect(theirs.recipe).toMatchObject({ event_id: event.id, type: "INGEST" });
		expect(mine.recipe.event_id).not.toBe(event.id);
		const nothing = await written(none.recipeId);
		expect(nothing.recipe.completed).not.toBeNull();
		expect(nothing.jobs).toEqual([]);
		expect(none).toMatchObject({ jobIds: [], queued: [] });
	});

	it("through REST at once: each answered with its own recipe, a bad one refused alone", async () => {
		const replies = await Promise.all([
			...Array.from({ length: 6 }, () =>
				request("POST", `${app.api}/queue/new-recipe/`, {
					recipe_type_id: diamondType,
					recipe_data: {}
				})
			),
			request("POST", `${app.api}/queue/new-recipe/`, {
				recipe_type_id: 999999,
				recipe_data: {}
			})
		]);
		const good = replies.slice(0, 6);
		for (const reply of good) {
			expect(reply.status).toBe(201);
			expect(reply.headers.get("location")).toMatch(
				new RegExp(`/recipes/${reply.body.id}/$`)
			);
			expect(reply.body.jobs.map((j: any) => j.job_name).sort()).toEqual([
				"A",
				"B",
				"C",
				"D"
			]);
		}
		expect(new Set(good.map(r => r.body.id)).size).toBe(6);
		const jobIds = good.flatMap(r => r.body.jobs.map((j: any) => j.job.id));
		expect(new Set(jobIds).size).toBe(24);
		expect(replies[6].status).toBe(400);
		expect(replies[6].text).toMatch(/recipe_type_id/);
	});
});

/**
 * Runs `action` while another transaction, as a report does, holds the recipe's row and then
 * wants `jobId`'s row, which `action` takes before it asks for the recipe's: a deadlock, which
 * PostgreSQL ends by failing `action`'s transaction (it waited first). Answers what `action`
 * answered in the end.
 */
async function deadlockedWithAReport<T>(
	recipeId: number,
	jobId: number,
	action: () => Promise<T>
): Promise<T> {
	const report = new Client({ connectionString: tdb.url });
	await report.connect();
	try {
		await report.query("BEGIN");
		await report.query("SELECT id FROM recipe WHERE id = $1 FOR UPDATE", [recipeId]);
		const done = action();
		// until the action waits for the recipe's row
		for (let i = 0; i < 100; i++) {
			const [{ n }] = await query<{ n: number }>(
				`SELECT count(*)::int AS n FROM pg_stat_activity
				 WHERE wait_event_type = 'Lock' AND datname = current_database()`
			);
			if (n > 0) break;
			await new Promise(resolve => setTimeout(resolve, 20));
		}
		await report.query("UPDATE job SET last_modified = now() WHERE id = $1", [jobId]);
		await report.query("COMMIT");
		return await done;
	} finally {
		await report.end();
	}
}

describe("a recipe's job canceled or requeued while a report ends another of its jobs", () => {
	it("is canceled all the same when PostgreSQL ends the cancel for the deadlock", async () => {
		const recipeId = await newDiamond();
		const jobs = await jobsOf(recipeId);
		// the cancel takes B's row, then the recipe's (blockRecipeJobs)
		const { result } = await deadlockedWithAReport(recipeId, jobs.B.id, () =>
			cancelJobTransaction(tdb.db, jobs.B.id, async () => null)
		);
		expect(result.jobId).toBe(jobs.B.id);
		const after = await jobsOf(recipeId);
		expect(after.B.status).toBe("CANCELED");
		expect(after.D.status).toBe("BLOCKED");
		expect(after.A.status).toBe("QUEUED");
	}, 20000);

	it("is requeued all the same when PostgreSQL ends the requeue for the deadlock", async () => {
		const recipeId = await newDiamond();
		const jobs = await jobsOf(recipeId);
		await query(`DELETE FROM queue WHERE job_id = $1`, [jobs.A.id]);
		await query(`UPDATE job_exe SET status = 'FAILED', ended = now() WHERE job_id = $1`, [
			jobs.A.id
		]);
		await query(`UPDATE job SET status = 'FAILED', ended = now() WHERE id = $1`, [jobs.A.id]);
		await query(`UPDATE job SET status = 'BLOCKED' WHERE id = ANY($1::int[])`, [
			[jobs.B.id, jobs.C.id, jobs.D.id]
		]);
		// the requeue takes A's row, then the recipe's (to unblock B, C and D)
		const reply = await deadlockedWithAReport(recipeId, jobs.A.id, () =>
			request("POST", `${app.api}/queue/requeue-jobs/`, { job_ids: [jobs.A.id] })
		);
		expect(reply.status).toBe(200);
		const after = await jobsOf(recipeId);
		expect(after.A).toMatchObject({ status: "QUEUED", queued: 1 });
		for (const name of ["B", "C", "D"]) expect(after[name].status).toBe("PENDING");
	}, 20000);
});
