/**
 * P6, recipes ("[6 of 8]"), on the process layout of `npm start` against a throwaway embedded
 * PostgreSQL: recipes of three trivial jobs (/bin/true): A, then B and C, both depending on A.
 *   load  1,000 recipes posted from 16 clients: recipe jobs/s and recipes/s end to end (first
 *         post to the last recipe completed), beside P1's single-job rate in the same run (the
 *         same number of /bin/true jobs through POST /queue/new-job/);
 *   idle  100 recipes one after another: the time from A's completion (its job's `ended`) to
 *         the start of B's and C's processes (their executions' `job_started`), p50/p99; the
 *         same is printed for the load run, where it includes waiting behind other recipes.
 *
 * Each at the machine's own speed and slowed (a launcher taking 5 ms a launch: a machine whose
 * bare spawn runs ~170/s), with the agent's largest backlog and launch rate beside the latencies
 * (BENCH_SPEED=own|slow|both, BENCH_SLOW_LAUNCH_MS; bench/lib/launches.ts).
 *
 *   npm run bench:recipes          P6_RECIPES=300 P6_IDLE=50 BENCH_SPEED=slow npm run bench:recipes
 */
import { treeCpuSeconds } from "./lib/cpu";
import { benchSpeeds, describeLaunches, launchFigures } from "./lib/launches";
import { bestBareSpawnRate } from "./lib/spawn-rate";
import {
	benchDatabase,
	percentile,
	postJson,
	postJsonExpecting,
	startService,
	trueJobType,
	waitForCount
} from "./lib/cluster";

const RECIPES = Number(process.env.P6_RECIPES) || 1000;
const IDLE = Number(process.env.P6_IDLE) || 100;

const DEFINITION = {
	version: "1.0",
	input_data: [],
	jobs: [
		{ name: "A", job_type: { name: "true-a", version: "1.0" } },
		{
			name: "B",
			job_type: { name: "true-b", version: "1.0" },
			dependencies: [{ name: "A", connections: [] }]
		},
		{
			name: "C",
			job_type: { name: "true-c", version: "1.0" },
			dependencies: [{ name: "A", connections: [] }]
		}
	]
};

function summary(values: number[]): string {
	const sorted = [...values].sort((a, b) => a - b);
	return `p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms`;
}

async function main() {
	for (const speed of benchSpeeds()) await runAt(speed.label, speed.env);
}

async function runAt(label: string, env: Record<string, string>) {
	const log = (line: string): void => console.log(`[${label}] ${line}`);
	const { url, db, pgPid, stop } = await benchDatabase();
	const service = await startService(url, env).catch(async (e: unknown) => {
		await stop();
		throw e;
	});
	const q = async <T>(sql: string, bind: unknown[] = []) =>
		(await db.query(sql, { bind }))[0] as T[];
	/**
	 * A's `ended` to B's and C's start, for recipes with ids above `after`: their executions'
	 * `started` (placed on a node: the job record's `started`), or `job_started` (the process).
	 */
	const handOffs = async (after: number, column: "started" | "job_started" = "job_started") =>
		(
			await q<{ ms: number }>(
				`SELECT extract(epoch FROM e.${column} - a.ended) * 1000 AS ms
				 FROM recipe r
				 JOIN recipe_job ra ON ra.recipe_id = r.id AND ra.job_name = 'A'
				 JOIN job a ON a.id = ra.job_id
				 JOIN recipe_job rb ON rb.recipe_id = r.id AND rb.job_name <> 'A'
				 JOIN job_exe e ON e.job_id = rb.job_id
				 WHERE r.id > $1 AND e.${column} IS NOT NULL`,
				[after]
			)
		).map(r => Number(r.ms));
	/**
	 * From A's process exit (its execution's `job_completed`, the agent's clock) to the start of
	 * B's and C's processes, for recipes with ids above `after`: the whole hand-off, the report's
	 * trip to the scheduler and its wait in the batcher included.
	 */
	const exitToStart = async (after: number) =>
		(
			await q<{ ms: number }>(
				`SELECT extract(epoch FROM e.job_started - ae.job_completed) * 1000 AS ms
				 FROM recipe r
				 JOIN recipe_job ra ON ra.recipe_id = r.id AND ra.job_name = 'A'
				 JOIN job_exe ae ON ae.job_id = ra.job_id AND ae.status = 'COMPLETED'
				 JOIN recipe_job rb ON rb.recipe_id = r.id AND rb.job_name <> 'A'
				 JOIN job_exe e ON e.job_id = rb.job_id
				 WHERE r.id > $1 AND e.job_started IS NOT NULL AND ae.job_completed IS NOT NULL`,
				[after]
			)
		).map(r => Number(r.ms));
	/**
	 * Where B's and C's time goes, for recipes with ids above `after`: A's process exit (agent's
	 * clock) → A's report applied (A's job `ended`, the finishing transaction's time) → B queued
	 * (its execution's `queued`) → placed (`started`) → its process started (`job_started`).
	 */
	const stages = async (after: number) => {
		const rows = await q<Record<string, number>>(
			`SELECT extract(epoch FROM a.ended - ae.job_completed) * 1000 AS report,
				extract(epoch FROM e.queued - a.ended) * 1000 AS queued,
				extract(epoch FROM e.started - e.queued) * 1000 AS placed,
				extract(epoch FROM e.job_started - e.started) * 1000 AS launched
			 FROM recipe r
			 JOIN recipe_job ra ON ra.recipe_id = r.id AND ra.job_name = 'A'
			 JOIN job a ON a.id = ra.job_id
			 JOIN job_exe ae ON ae.job_id = a.id AND ae.status = 'COMPLETED'
			 JOIN recipe_job rb ON rb.recipe_id = r.id AND rb.job_name <> 'A'
			 JOIN job_exe e ON e.job_id = rb.job_id
			 WHERE r.id > $1 AND e.job_started IS NOT NULL AND ae.job_completed IS NOT NULL`,
			[after]
		);
		const of = (key: string) => {
			const sorted = rows.map(r => Number(r[key])).sort((a, b) => a - b);
			return `${percentile(sorted, 50).toFixed(1)}/${percentile(sorted, 99).toFixed(1)}`;
		};
		return `A's exit → report applied ${of("report")}, → B queued ${of("queued")}, → placed ${of("placed")}, → process started ${of("launched")} ms (p50/p99)`;
	};
	try {
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		for (const name of ["true-a", "true-b", "true-c"])
			await postJson(`${service.api}/job-types/`, trueJobType(name));
		const single = await postJson(`${service.api}/job-types/`, trueJobType("true"));
		const type = await postJson(`${service.api}/recipe-types/`, {
			name: "abc",
			version: "1.0",
			definition: DEFINITION
		});
		const body = { recipe_type_id: type.id, recipe_data: { version: "1.0", input_data: [] } };
		const completedJobs = async () =>
			(
				await q<{ n: number }>(
					`SELECT count(*)::int AS n FROM job WHERE status = 'COMPLETED'`
				)
			)[0].n;

		/** CPU seconds of the service (with its agent's launches) and of PostgreSQL so far. */
		const cpu = () => ({
			service: treeCpuSeconds(service.proc.pid!),
			pg: treeCpuSeconds(pgPid)
		});
		/** Posts `count` requests from 16 clients and waits for `jobs` more COMPLETED jobs: s. */
		const round = async (url: string, payload: unknown, count: number, jobs: number) => {
			const before = await completedJobs();
			const started = Date.now();
			let next = 0;
			const submit = async () => {
				while (next < count) {
					next++;
					await postJsonExpecting(url, payload, 201);
				}
			};
			await Promise.all(Array.from({ length: 16 }, submit));
			await waitForCount(
				db,
				"SELECT count(*) AS n FROM job WHERE status = 'COMPLETED'",
				before + jobs,
				600000
			);
			return (Date.now() - started) / 1000;
		};
		const newRecipe = `${service.api}/queue/new-recipe/`;
		const newJob = `${service.api}/queue/new-job/`;
		const jobBody = { job_type_id: single.id, job_data: { input_data: [], output_data: [] } };

		// warm-ups, as P1's: V8 compiles the hot paths, PostgreSQL caches its plans
		await round(newRecipe, body, 300, 900);
		await round(newJob, jobBody, 900, 900);

		const [{ id: lastBefore }] = await q<{ id: number }>(
			`SELECT coalesce(max(id), 0)::int AS id FROM recipe`
		);
		const lastExe = async () =>
			(await q<{ id: number }>(`SELECT coalesce(max(id), 0)::int AS id FROM job_exe`))[0].id;
		const exeBefore = await lastExe();
		const cpuBefore = cpu();
		const recipeSeconds = await round(newRecipe, body, RECIPES, 3 * RECIPES);
		const cpuRecipes = cpu();
		const [{ n: done }] = await q<{ n: number }>(
			`SELECT count(*)::int AS n FROM recipe WHERE id > $1 AND completed IS NOT NULL`,
			[lastBefore]
		);
		const loadHandOffs = await handOffs(lastBefore);
		const loadPlacements = await handOffs(lastBefore, "started");
		const loadExits = await exitToStart(lastBefore);
		const loadLaunches = await launchFigures(db, exeBefore);
		const loadStages = await stages(lastBefore);
		const exeP1Before = await lastExe();
		const cpuP1Before = cpu();
		const p1Seconds = await round(newJob, jobBody, 3 * RECIPES, 3 * RECIPES);
		const cpuP1 = cpu();
		const p1Launches = await launchFigures(db, exeP1Before);
		/** CPU milliseconds per job between two readings */
		const perJob = (a: ReturnType<typeof cpu>, b: ReturnType<typeof cpu>) =>
			`service ${(((b.service - a.service) / (3 * RECIPES)) * 1000).toFixed(2)} ms, PostgreSQL ${(((b.pg - a.pg) / (3 * RECIPES)) * 1000).toFixed(2)} ms`;

		const [{ id: lastLoad }] = await q<{ id: number }>(
			`SELECT coalesce(max(id), 0)::int AS id FROM recipe`
		);
		const exeIdleBefore = await lastExe();
		for (let i = 0; i < IDLE; i++) await round(newRecipe, body, 1, 3);
		const idleLaunches = await launchFigures(db, exeIdleBefore);
		const idleHandOffs = await handOffs(lastLoad);
		const idlePlacements = await handOffs(lastLoad, "started");
		const idleExits = await exitToStart(lastLoad);
		const idleStages = await stages(lastLoad);
		await service.stop();
		const bare = await bestBareSpawnRate(3, 3000, 4);

		const recipeJobRate = (3 * RECIPES) / recipeSeconds;
		const p1Rate = (3 * RECIPES) / p1Seconds;
		log(
			`P6 ${RECIPES} recipes of three /bin/true jobs (A, then B and C), 16 clients: ${recipeJobRate.toFixed(0)} recipe jobs/s, ${(RECIPES / recipeSeconds).toFixed(0)} recipes/s (${done} of ${RECIPES} completed)`
		);
		log(
			`P1 in the same run: ${p1Rate.toFixed(0)} jobs/s (${3 * RECIPES} /bin/true jobs, 16 clients; ${describeLaunches(p1Launches)}); bare spawn ${bare.toFixed(0)} /s`
		);
		log(
			`P6 ratio recipe jobs / P1 jobs: ${(recipeJobRate / p1Rate).toFixed(2)} (target >= 0.8)`
		);
		log(
			`CPU per job: recipes ${perJob(cpuBefore, cpuRecipes)}; P1 ${perJob(cpuP1Before, cpuP1)} (the service's with its agent's launches)`
		);
		log(
			`P6 A completed → B/C started (RUNNING, placed on the node: the job's \`started\`): under the load of ${RECIPES} recipes ${summary(loadPlacements)} (${describeLaunches(loadLaunches)}); one recipe at a time ${summary(idlePlacements)} (${describeLaunches(idleLaunches)}) (target p99 <= 50 ms)`
		);
		log(
			`P6 A completed → B/C process started (the execution's job_started): one recipe at a time (${idleHandOffs.length}) ${summary(idleHandOffs)}; under the load of ${RECIPES} recipes, behind the launches already on the agent, ${summary(loadHandOffs)}`
		);
		log(
			`P6 A's process exited → B/C process started (the executions' job_completed → job_started, the report's way to the scheduler included): one recipe at a time ${summary(idleExits)}; under the load of ${RECIPES} recipes ${summary(loadExits)}`
		);
		log(`P6 where B/C's time goes under load: ${loadStages}`);
		log(`P6 where B/C's time goes one recipe at a time: ${idleStages}`);
	} finally {
		if (service.proc.exitCode === null) await service.stop();
		await stop();
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
