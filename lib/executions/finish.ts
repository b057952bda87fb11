import type { ExecutionFinished, ProducedFile } from "../documents/agent-protocol";
import { checkProducts } from "../records/product";
import { advanceRecipes, blockRecipeJobs, readRecipes, type RecipesRead } from "../recipes/run";
import { complete, collectSteps, emptyResult, stepUnnest, type StepColumns } from "./complete";
import {
	countsAgainstNode,
	ERRORS,
	errorNameFor,
	isFreeRetry,
	NODE_LEAVING_ERRORS,
	shouldRequeue
} from "./failure";
import type { EndingExe, PlacedExe } from "./types";
import type { Sql } from "../db/run";
import type { FinishInput, FinishOptions, FinishResult } from "./types";

/**
 * The end of executions, many at once, inside the caller's transaction: step times, completions
 * (products, ancestry, results, parse results), failures (error, retry or end) and cancellations.
 * Every transition is guarded on RUNNING (re-checked under the row lock), so a repeated or late message changes
 * nothing. Statements are set-based: a flush of hundreds of executions costs a handful of them.
 *
 * One kind of late report still counts: the agent's report of an execution a user canceled while
 * it ran. The cancel ended it in the REST transaction (lib/queue/cancel.ts) before the agent
 * killed the process, so the report is the only carrier of its logs and step times; they are
 * filled in, its status and its job's are left alone.
 */

/** A report of a completion that made no products. */
function isBareCompletion(f: ExecutionFinished): boolean {
	return f.status === "COMPLETED" && !(Array.isArray(f.products) && f.products.length > 0);
}

/** Text PostgreSQL can store (no NUL). */
function storable(text: unknown): string {
	return typeof text === "string" ? text.split("\u0000").join("") : "";
}

/** Product files deduplicated by where they are: the same file reported twice is one product. */
function distinctProducts(products: readonly ProducedFile[]): ProducedFile[] {
	const seen = new Set<string>();
	return products.filter(p => {
		const key = `${p.workspaceId}\u0000${p.filePath}\u0000${p.fileName}`;
		if (seen.has(key)) return false;
		seen.add(key);
		return true;
	});
}

export async function finishExecutions(
	sql: Sql,
	input: FinishInput,
	opts: FinishOptions = {}
): Promise<FinishResult> {
	const steps = input.steps ?? [];
	const finished = input.finished ?? [];
	const failures = input.failures ?? [];
	const result = emptyResult();
	const endingSet = new Set([...finished.map(f => f.jobExeId), ...failures.map(f => f.jobExeId)]);
	const ending = [...endingSet];
	const stepCols = collectSteps(steps, finished);

	// Step reports of executions that go on running: their columns only.
	let stepping: Promise<void> | undefined;
	const stepOnly = [...stepCols.keys()].filter(id => !endingSet.has(id));
	if (stepOnly.length > 0) {
		const reporter = new Map(steps.map(s => [s.jobExeId, s.agentId]));
		const u = stepUnnest(stepOnly, stepCols, [
			{ name: "agent_id", type: "text", values: stepOnly.map(id => reporter.get(id) ?? null) }
		]);
		// not waited for: the statements below go with it (their answers come after its own)
		stepping = sql
			.query<{ id: number }>(
				`UPDATE job_exe e SET ${u.set}, last_modified = now() FROM ${u.from}
				 WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
					AND e.agent_id = u.agent_id RETURNING e.id`,
				u.binds
			)
			.then(rows => {
				for (const row of rows) result.stepped.add(row.id);
			});
		stepping.catch(() => undefined); // its error is thrown where it is waited for
	}
	if (ending.length === 0) {
		await stepping;
		return result;
	}

	// What the endings need to know. No lock: every transition below is guarded on RUNNING
	// (PostgreSQL re-checks the guard under the row lock), and later work follows only the
	// executions whose transition this transaction made. Completions without products take it
	// from their placement when all are known (opts.placed): what they use of it (the agent,
	// the job, its data and its revision's interface) does not change while they run, where a
	// failure's error mapping and a product's operational flag follow their job type's edits.
	// One that is not running any more is then not refused here but by the completing
	// statement's guard, with the same outcome.
	const known =
		opts.placed && failures.length === 0 && finished.every(isBareCompletion)
			? opts.placed.takeAll(ending)
			: null;
	const rows =
		known ??
		(await sql.query<EndingExe>(
			`SELECT e.id, e.agent_id, e.job_id, e.node_id, j.num_exes, j.max_tries, j.job_type_id, t.name,
			t.version, t.is_operational, t.is_long_running, j.data, r.interface, t.error_mapping,
			EXISTS (SELECT 1 FROM recipe_job rj WHERE rj.job_id = j.id) AS in_recipe
		 FROM job_exe e JOIN job j ON j.id = e.job_id JOIN job_type t ON t.id = j.job_type_id
			JOIN job_type_rev r ON r.id = j.job_type_rev_id
		 WHERE e.id = ANY($1::int[]) AND e.status = 'RUNNING'`,
			[ending]
		));
	const running = new Map(rows.map(l => [l.id, l]));

	// Sort the endings: completions, failures (with their error name) and cancellations.
	const completions: { exe: EndingExe; f: ExecutionFinished; products: ProducedFile[] }[] = [];
	const failing: { exe: EndingExe; errorName: string }[] = [];
	const canceling: EndingExe[] = [];
	const taken = new Set<number>();
	// why a completion was refused, added to its stderr where the user reads its logs
	const refusals = new Map<number, string>();
	const take = (id: number): EndingExe | null => {
		const exe = running.get(id);
		if (!exe || taken.has(id)) return null;
		taken.add(id);
		return exe;
	};
	for (const f of finished) {
		if (running.get(f.jobExeId)?.agent_id !== f.agentId) continue;
		const exe = take(f.jobExeId);
		if (!exe) continue;
		if (f.status === "COMPLETED") {
			const products = distinctProducts(Array.isArray(f.products) ? f.products : []);
			const problem = exe.interface ? checkProducts(exe.interface, exe.data, products) : null;
			if (problem) {
				result.notes.push(`job_exe ${exe.id}: outputs refused: ${problem}`);
				refusals.set(exe.id, `scale: outputs refused: ${problem}\n`);
				failing.push({ exe, errorName: ERRORS.algorithmUnknown });
			} else completions.push({ exe, f, products });
		} else if (f.status === "CANCELED") {
			canceling.push(exe);
		} else {
			failing.push({ exe, errorName: errorNameFor(f, exe.error_mapping) });
		}
	}
	for (const failure of failures) {
		const exe = take(failure.jobExeId);
		if (exe) failing.push({ exe, errorName: failure.errorName || ERRORS.unknown });
	}

	for (const exe of [...completions.map(c => c.exe), ...failing.map(f => f.exe), ...canceling])
		result.jobTypes.set(exe.job_id, `${exe.name}:${exe.version}`);

	// The recipes of the jobs completed here are read right behind the statement that completes
	// them and locks their recipes, in its round trip (advanceRecipes), when that statement
	// completes them all: none made products (their jobs complete in a later statement).
	let recipesRead: Promise<RecipesRead> | undefined;
	const readAhead =
		completions.some(c => c.exe.in_recipe) && completions.every(c => c.products.length === 0);
	// the recipe locks this transaction holds (see advanceRecipes)
	const locked =
		completions.length > 0
			? await complete(sql, completions, stepCols, result, opts, () => {
					if (!readAhead) return;
					recipesRead = readRecipes(sql, [...jobIdsOf(completions)]);
					// when the completing statement fails, this one does too and is not waited for
					recipesRead.catch(() => undefined);
				})
			: undefined;
	if (failing.length > 0) await fail(sql, failing, stepCols, result);
	if (canceling.length > 0) await cancel(sql, canceling, stepCols, result);
	// Recipes, in the same transaction: the never-queued dependents of jobs ended for good are
	// blocked, and the jobs these completions free are queued, last (lib/recipes/run.ts).
	const stopped = [...result.failedJobs, ...result.canceledJobs];
	if (stopped.length > 0) await blockRecipeJobs(sql, stopped);
	for (const s of steps) if (result.ended.has(s.jobExeId)) result.stepped.add(s.jobExeId);

	// Logs of every execution that ended here (from its first report, as above).
	const logged = new Set<number>();
	const logs = finished.filter(f => {
		if (!result.ended.has(f.jobExeId) || logged.has(f.jobExeId)) return false;
		logged.add(f.jobExeId);
		return !!(storable(f.stdout) || storable(f.stderr) || refusals.has(f.jobExeId));
	});
	if (logs.length > 0) {
		await sql.query(
			`INSERT INTO job_exe_log (job_exe_id, stdout, stderr)
			 SELECT * FROM unnest($1::int[], $2::text[], $3::text[])
			 ON CONFLICT (job_exe_id) DO UPDATE SET stdout = EXCLUDED.stdout,
				stderr = EXCLUDED.stderr, last_modified = now()`,
			[
				logs.map(f => f.jobExeId),
				logs.map(f => storable(f.stdout)),
				logs.map(f => storable(f.stderr) + (refusals.get(f.jobExeId) ?? ""))
			]
		);
	}

	// Reports of executions that did not end here: those canceled while they ran still bring
	// their logs and step times (the others were ended by something else, or are repeats).
	const seen = new Set<number>();
	const late = finished.filter(f => {
		if (result.ended.has(f.jobExeId) || seen.has(f.jobExeId)) return false;
		seen.add(f.jobExeId);
		return true;
	});
	if (late.length > 0) await fillInCanceled(sql, late, stepCols);
	await stepping;
	// last, so that the statement queueing the freed jobs goes with the COMMIT (Sql.commitWith)
	// ... and, right behind it, the hand-off of the room the completions freed to those jobs
	// (lib/scheduling/handoff.ts), which then goes with the COMMIT instead
	if (result.completedJobs.length > 0) {
		const handOff = opts.handOff;
		let handing: Promise<PlacedExe[]> | undefined;
		result.recipeQueued = (
			await advanceRecipes(sql, result.completedJobs, locked, {
				read: recipesRead,
				last: true,
				behind: handOff
					? (jobIds, last) => (handing = handOff(sql, [...result.ended], jobIds, last))
					: undefined
			})
		).queued;
		if (handing) result.handedOff = await handing;
	}
	return result;
}

function jobIdsOf(completions: readonly { exe: EndingExe }[]): Set<number> {
	return new Set(completions.map(c => c.exe.job_id));
}

/**
 * Fills in what an agent's report says of executions that are CANCELED already and ran on that
 * agent (checked in each statement, so another agent's report, or one of an execution that ended
 * otherwise, changes nothing): the step columns not yet recorded, and its logs unless some are
 * kept already. Neither its status nor its job's change, and a repeat finds nothing to fill.
 * CANCELED is final (nothing moves an execution out of it), so the check needs no lock first.
 */
async function fillInCanceled(
	sql: Sql,
	reports: ExecutionFinished[],
	stepCols: Map<number, StepColumns>
): Promise<void> {
	const ids = reports.map(f => f.jobExeId);
	const agents = reports.map(f => (typeof f.agentId === "string" ? f.agentId : null));
	const u = stepUnnest(
		ids,
		stepCols,
		[{ name: "agent_id", type: "text", values: agents }],
		"fill"
	);
	await sql.query(
		`UPDATE job_exe e SET ${u.set}, last_modified = now() FROM ${u.from}
		 WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'CANCELED'
			AND e.agent_id = u.agent_id AND (${u.changes})`,
		u.binds
	);
	const logs = reports.filter(f => storable(f.stdout) || storable(f.stderr));
	if (logs.length === 0) return;
	await sql.query(
		`INSERT INTO job_exe_log (job_exe_id, stdout, stderr)
		 SELECT u.id, u.stdout, u.stderr
		 FROM unnest($1::int[], $2::text[], $3::text[], $4::text[]) AS u(id, agent_id, stdout, stderr)
			JOIN job_exe e ON e.id = u.id
		 WHERE e.id = ANY($1::int[]) AND e.status = 'CANCELED' AND e.agent_id = u.agent_id
		 ON CONFLICT (job_exe_id) DO NOTHING`,
		[
			logs.map(f => f.jobExeId),
			logs.map(f => (typeof f.agentId === "string" ? f.agentId : null)),
			logs.map(f => storable(f.stdout)),
			logs.map(f => storable(f.stderr))
		]
	);
}

/**
 * An execution lost (`node-lost`) from a node that is draining went with the node's leaving: its
 * agent stopped at once on a second signal, or was killed before its drain ended. It is recorded
 * as `node-shutdown`, which does not count against the job's tries.
 */
async function lostToShutdown(
	sql: Sql,
	failing: { exe: EndingExe; errorName: string }[]
): Promise<{ exe: EndingExe; errorName: string }[]> {
	const lostOn = [
		...new Set(
			failing
				.filter(f => f.errorName === ERRORS.nodeLost && f.exe.node_id !== null)
				.map(f => f.exe.node_id as number)
		)
	];
	if (lostOn.length === 0) return failing;
	const draining = new Set(
		(
			await sql.query<{ id: number }>(
				"SELECT id FROM node WHERE id = ANY($1::int[]) AND draining_since IS NOT NULL",
				[lostOn]
			)
		).map(r => r.id)
	);
	if (draining.size === 0) return failing;
	return failing.map(f =>
		f.errorName === ERRORS.nodeLost && draining.has(f.exe.node_id as number)
			? { ...f, errorName: ERRORS.nodeShutdown }
			: f
	);
}

async function fail(
	sql: Sql,
	lostOrFailing: { exe: EndingExe; errorName: string }[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult
): Promise<void> {
	const failing = await lostToShutdown(sql, lostOrFailing);
	const names = [...new Set([...failing.map(f => f.errorName), ERRORS.unknown])];
	const errors = new Map(
		(
			await sql.query<{ id: number; name: string; category: string }>(
				"SELECT id, name, category FROM error WHERE name = ANY($1::text[])",
				[names]
			)
		).map(e => [e.name, e])
	);
	const decided = failing.map(({ exe, errorName }) => {
		const error = errors.get(errorName) ?? errors.get(ERRORS.unknown)!;
		return {
			exe,
			error,
			requeue: shouldRequeue(
				error.category,
				exe.num_exes,
				exe.max_tries,
				exe.is_long_running,
				error.name
			)
		};
	});

	const u = stepUnnest(
		decided.map(d => d.exe.id),
		stepCols,
		[{ name: "error_id", type: "int", values: decided.map(d => d.error.id) }]
	);
	const ended = await sql.query<{ id: number }>(
		`UPDATE job_exe e SET status = 'FAILED', ended = now(), error_id = u.error_id, ${u.set},
			last_modified = now()
		 FROM ${u.from} WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
		 RETURNING e.id`,
		u.binds
	);
	const endedIds = new Set(ended.map(r => r.id));
	for (const id of endedIds) result.ended.add(id);
	const live = decided.filter(d => endedIds.has(d.exe.id));

	const final = live.filter(d => !d.requeue);
	if (final.length > 0) {
		const rows = await sql.query<{ id: number }>(
			`UPDATE job j SET status = 'FAILED', error_id = u.error_id, ended = now(),
				last_status_change = now(), last_modified = now()
			 FROM unnest($1::int[], $2::int[]) AS u(id, error_id)
			 WHERE j.id = ANY($1::int[]) AND j.id = u.id AND j.status = 'RUNNING' RETURNING j.id`,
			[final.map(d => d.exe.job_id), final.map(d => d.error.id)]
		);
		result.failedJobs.push(...rows.map(r => r.id));
		for (const d of final) result.failureCategories.set(d.exe.job_id, d.error.category);
	}

	const again = live.filter(d => d.requeue);
	if (again.length > 0) {
		// The old execution ended above (the one-live-execution index is checked per statement).
		// Guarded on RUNNING: a job canceled meanwhile is not requeued. The job row stays locked
		// from here to the commit, with the new execution and queue row made under that lock,
		// which is what lets a concurrent cancel find them (lib/queue/cancel.ts). A free retry
		// (the node was shut down under it) raises max_tries with num_exes: the try is not counted.
		const free = again
			.filter(d => isFreeRetry(d.error.name) && !d.exe.is_long_running)
			.map(d => d.exe.job_id);
		const jobs = await sql.query<{
			id: number;
			timeout: number;
			priority: number;
			job_type_id: number;
			cpus: number;
			mem: number;
			disk_in: number;
			disk_out: number;
		}>(
			`UPDATE job j SET status = 'QUEUED', error_id = NULL, num_exes = j.num_exes + 1,
				max_tries = j.max_tries + CASE WHEN j.id = ANY($2::int[]) THEN 1 ELSE 0 END,
				queued = now(), started = NULL, ended = NULL, last_status_change = now(),
				last_modified = now()
			 FROM job_type t
			 WHERE j.id = ANY($1::int[]) AND j.status = 'RUNNING' AND t.id = j.job_type_id
			 RETURNING j.id, j.timeout, j.priority, j.job_type_id,
				coalesce(j.cpus_required, t.cpus_required) AS cpus,
				coalesce(j.mem_required, t.mem_required) AS mem,
				coalesce(j.disk_in_required, 0) AS disk_in,
				coalesce(j.disk_out_required, t.disk_out_const_required) AS disk_out`,
			[again.map(d => d.exe.job_id), free]
		);
		if (jobs.length > 0) {
			jobs.sort((a, b) => a.id - b.id);
			// Ids first, so the queue rows need no join back to the new executions.
			const ids = (
				await sql.query<{ id: number }>(
					"SELECT nextval('job_exe_id_seq')::int AS id FROM generate_series(1, $1::int)",
					[jobs.length]
				)
			).map(r => r.id);
			await sql.query(
				`INSERT INTO job_exe (id, job_id, job_type_id, status, timeout, queued)
				 SELECT id, job_id, job_type_id, 'QUEUED', timeout, now()
				 FROM unnest($1::int[], $2::int[], $3::int[], $4::int[])
					AS u(id, job_id, job_type_id, timeout)`,
				[ids, jobs.map(j => j.id), jobs.map(j => j.job_type_id), jobs.map(j => j.timeout)]
			);
			const n = (k: keyof (typeof jobs)[number]) => jobs.map(j => Number(j[k]));
			await sql.query(
				`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
					mem_required, disk_in_required, disk_out_required, disk_total_required, queued)
				 SELECT exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out,
					disk_in + disk_out, now()
				 FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::float8[],
					$6::float8[], $7::float8[], $8::float8[])
					AS u(exe_id, job_id, job_type_id, priority, cpus, mem, disk_in, disk_out)`,
				[
					ids,
					n("id"),
					n("job_type_id"),
					n("priority"),
					n("cpus"),
					n("mem"),
					n("disk_in"),
					n("disk_out")
				]
			);
			result.requeuedJobs.push(...jobs.map(j => j.id));
		}
	}

	// A node with too many SYSTEM failures in the configured window is paused.
	const suspects = [
		...new Set(
			live
				.filter(
					d => d.exe.node_id !== null && countsAgainstNode(d.error.category, d.error.name)
				)
				.map(d => d.exe.node_id as number)
		)
	].sort((a, b) => a - b);
	if (suspects.length > 0) {
		const paused = await sql.query<{ id: number }>(
			`UPDATE node n SET is_paused = true, is_paused_errors = true,
				pause_reason = 'System Failure Rate Too High', last_modified = now()
			 FROM scheduler s
			 WHERE s.id = 1 AND n.id = ANY($1::int[]) AND NOT n.is_paused
			   AND (SELECT count(*) FROM job_exe e JOIN error er ON er.id = e.error_id
					WHERE e.node_id = n.id AND e.status = 'FAILED' AND er.category = 'SYSTEM'
					  AND er.name <> ALL($2::text[])
					  AND e.last_modified >= now() - make_interval(mins => s.node_error_period)
					  AND e.ended >= now() - make_interval(mins => s.node_error_period)
				   ) >= s.max_node_errors
			 RETURNING n.id`,
			[suspects, NODE_LEAVING_ERRORS]
		);
		result.pausedNodes.push(...paused.map(r => r.id));
	}
}

async function cancel(
	sql: Sql,
	canceling: EndingExe[],
	stepCols: Map<number, StepColumns>,
	result: FinishResult
): Promise<void> {
	const u = stepUnnest(
		canceling.map(c => c.id),
		stepCols
	);
	const rows = await sql.query<{ id: number | null; job_id: number }>(
		`WITH e AS (
			UPDATE job_exe e SET status = 'CANCELED', ended = now(), ${u.set}, last_modified = now()
			FROM ${u.from} WHERE e.id = ANY($1::int[]) AND e.id = u.id AND e.status = 'RUNNING'
			RETURNING e.id, e.job_id
		),
		j AS (
			UPDATE job SET status = 'CANCELED', ended = now(), last_status_change = now(),
				last_modified = now()
			WHERE job.id = ANY($${u.binds.length + 1}::int[])
				AND job.id = ANY(ARRAY(SELECT job_id FROM e)) AND job.status = 'RUNNING'
			RETURNING job.id
		)
		SELECT id, job_id FROM e UNION ALL SELECT NULL, id FROM j`,
		[...u.binds, canceling.map(c => c.job_id)]
	);
	for (const row of rows) {
		if (row.id !== null) result.ended.add(row.id);
		else result.canceledJobs.push(row.job_id);
	}
}
