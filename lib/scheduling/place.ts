import type { Placement } from "./matching";
import type { PlacedExe } from "../executions/types";
import type { Rank } from "../documents/agent-protocol";
import type { Sql } from "../db/run";

/**
 * The placing statement of a pass's batch (claim.ts matches, this writes): its placements leave
 * the queue and run, guarded against a cancel or a drain in the same moment.
 */

/**
 * The placing half of a statement whose CTE `u` names placements (queue_id, exe_id, node_id,
 * agent_id, cpus, mem, disk_in, disk_out, disk_total) and whose CTE `d` deleted their queue rows
 * (RETURNING job_exe_id): CTE `e` marks the executions whose rows `d` took RUNNING where `u`
 * placed them (answering what their agent's ExecutionSpec needs), `jr` their jobs. `exeIds` and
 * `jobIds` name the executions and jobs by key (see applyPlacements). Shared by the pass's placements and
 * the hand-offs of lib/scheduling/handoff.ts.
 */
export function placeTakenSql(exeIds: string, jobIds: string): string {
	return `e AS (
			UPDATE job_exe e SET status = 'RUNNING', node_id = u.node_id, agent_id = u.agent_id,
				started = now(), cpus_scheduled = u.cpus, mem_scheduled = u.mem,
				disk_in_scheduled = u.disk_in, disk_out_scheduled = u.disk_out,
				disk_total_scheduled = u.disk_total,
				command_arguments = coalesce(e.command_arguments, r.interface->>'command_arguments'),
				environment = coalesce(e.environment, '{}'::jsonb), last_modified = now()
			FROM u, job j, job_type_rev r, job_type t
			WHERE e.id = ANY(${exeIds}) AND e.id = u.exe_id AND e.status = 'QUEUED'
				AND e.id = ANY(ARRAY(SELECT job_exe_id FROM d))
				AND j.id = e.job_id AND r.id = j.job_type_rev_id AND t.id = j.job_type_id
			RETURNING e.id, e.job_id, e.timeout, u.node_id, u.agent_id, u.cpus, u.mem,
				u.disk_total, j.data, r.interface, j.job_type_id, t.name, t.version,
				t.uses_docker, t.docker_image, t.docker_privileged, t.is_long_running, t.is_system,
				j.num_exes, j.max_tries, t.is_operational, t.error_mapping,
				EXISTS (SELECT 1 FROM recipe_job rj WHERE rj.job_id = e.job_id) AS in_recipe,
				extract(epoch FROM now() - e.queued)::float8 AS queue_wait_s
		),
		jr AS (
			UPDATE job SET status = 'RUNNING', started = now(), last_status_change = now(),
				last_modified = now()
			WHERE job.id = ANY(${jobIds}) AND job.id = ANY(ARRAY(SELECT job_id FROM e))
				AND job.status = 'QUEUED'
		)`;
}

/**
 * (Every set-based statement here and in finish.ts names its rows with `id = ANY($n)` beside the
 * join on the unnest: that makes PostgreSQL look them up by index, where a join alone may be
 * planned as a hash over a scan of the whole table. And no statement joins one CTE's output to
 * another's: their row counts are unknown to the planner, which may then nest loops over them,
 * quadratic in the batch size; `= ANY(ARRAY(SELECT ... FROM cte))` is computed once instead.)
 *
 * Takes the placed rows off the queue and marks their executions RUNNING (node, agent, started,
 * scheduled resources, command arguments from the interface when the queue left them unset) and
 * their jobs RUNNING, in one statement. Each transition is guarded: a queue row a cancel took
 * meanwhile is not found, its execution is not placed and nothing is sent for it.
 */
export async function applyPlacements(sql: Sql, placements: Placement[]): Promise<PlacedExe[]> {
	if (placements.length === 0) return [];
	const col = <T>(f: (p: Placement) => T) => placements.map(f);
	return sql
		.query<PlacedExe>(
			`WITH u AS (
			SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::float8[],
				$6::float8[], $7::float8[], $8::float8[], $9::float8[])
				AS u(queue_id, exe_id, node_id, agent_id, cpus, mem, disk_in, disk_out, disk_total)
		),
		-- the nodes still able to take work, share-locked: a report that pauses a node (too many
		-- failures), a drain or a node update committing meanwhile is waited for and seen, so
		-- nothing is placed on a node paused or draining after this pass read its offers (and a
		-- drain's update waits for a placement that locked first: once it commits, nothing more
		-- is placed there)
		n AS (
			SELECT id FROM node WHERE id = ANY(ARRAY(SELECT DISTINCT node_id FROM u))
				AND is_active AND NOT is_paused AND draining_since IS NULL
			ORDER BY id FOR SHARE
		),
		-- the rows placed on those nodes leave the queue first, in the order a cancel takes its
		-- locks (queue row, then execution, then job: lib/queue/cancel.ts), so that the two wait
		-- for each other instead of deadlocking; a row a cancel deleted meanwhile is not found,
		-- and nothing is placed for it (a queue row leaves with its execution's QUEUED, by a
		-- cancel or a placement, in one transaction); the others stay for a later pass
		d AS (
			DELETE FROM queue q WHERE q.id = ANY($1::int[])
				AND q.id = ANY(ARRAY(SELECT queue_id FROM u WHERE node_id IN (SELECT id FROM n)))
			RETURNING q.job_exe_id
		),
		${placeTakenSql("$2::int[]", "$10::int[]")}
		SELECT * FROM e ORDER BY id`,
			[
				col(p => p.row.id),
				col(p => p.row.jobExeId),
				col(p => p.node.id),
				col(p => p.node.agentId),
				col(p => p.row.cpus),
				col(p => p.row.mem),
				col(p => p.row.diskIn),
				col(p => p.row.diskOut),
				col(p => p.row.diskTotal),
				col(p => p.row.jobId)
			]
		)
		.then(rows => {
			const byExe = new Map(placements.map(p => [p.row.jobExeId, p]));
			return rows.map(r => {
				const placement = byExe.get(r.id);
				const row = placement?.row;
				return {
					...r,
					cpus: Number(r.cpus),
					mem: Number(r.mem),
					disk_total: Number(r.disk_total),
					successors: row?.successors ?? 0,
					held: placement?.held ?? 0,
					...(row ? { rank: [row.priority, row.queuedUs, row.id] as Rank } : {})
				};
			});
		});
}
