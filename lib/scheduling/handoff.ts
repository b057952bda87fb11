import { placeTakenSql } from "./place";
import type { PlacedExe } from "../executions/types";
import type { Rank } from "../documents/agent-protocol";
import type { Resources } from "./matching";
import type { Sql } from "../db/run";

/**
 * The hand-off: the recipe jobs that completions queue take the room those completions free, on
 * their node, in the transaction that records the completions (lib/executions/finish.ts), instead
 * of waiting for the next scheduling pass. Under load a pass is one or two round trips behind
 * the others on a busy machine (10–40 ms each); a recipe's next job waited for one and a half of
 * them on average, and its p99 followed the slowest (docs/decisions.md, "The hand-off").
 *
 * Room moves from the ended executions to the queued ones within one transaction, so no pass
 * ever sees it free: a pass that read the node's free resources before sees the completions
 * still RUNNING, one that reads after sees the successors RUNNING, and what it places fits
 * either way. The same goes for the room the pass that placed their predecessor held for them
 * (room-holds.ts), which every pass leaves free until the hand-off has committed. So the
 * hand-off needs no lock beyond the pass's own: what the completions on a node freed (their
 * scheduled cpus, memory and disk) plus the room held for their successors (`held`) is the most
 * it places there, the jobs of each node's recipes in queue order (by the recipe's creation, as
 * a pass would take them) while they fit. It places only what a pass would have placed there
 * first:
 * - no job waits with a better priority than it (the head of the queue; a pass would give that
 *   job the room);
 * - the scheduler is not paused; the node is active, not paused and not draining (share-locked,
 *   as a pass's placement locks it); its agent is one the leader places on now (`agents`);
 * - its job type is not paused, has no max_scheduled (counted by passes only) and runs no
 *   container (its image is matched to nodes by passes).
 * Anything else stays queued for the pass, as before. A placed row is taken off the queue by
 * the same guarded statement as a pass's (placeTakenSql), so the two cannot both place it.
 */

/** Executions a transaction ended and the recipe jobs it queued, to hand the room over. */
export interface HandOffInput {
	/** executions ended here (those COMPLETED free their room) */
	endedExeIds: readonly number[];
	/** jobs queued here by their recipes */
	queuedJobIds: readonly number[];
	/** the agents the leader places work on now */
	agents: readonly string[];
	/** the room held for those jobs on each node, pinned (room-holds.ts) */
	held?: ReadonlyMap<number, Resources>;
}

const HAND_OFF_SQL = `WITH a AS (
			SELECT id, job_id, node_id, agent_id, cpus_scheduled, mem_scheduled, disk_total_scheduled
			FROM job_exe WHERE id = ANY($1::int[]) AND status = 'COMPLETED'
				AND agent_id = ANY($3::text[])
		),
		-- what the completions free, and the room held for the jobs they free, by node
		f AS (
			SELECT node_id, coalesce(sum(cpus), 0) AS cpus, coalesce(sum(mem), 0) AS mem,
				coalesce(sum(disk), 0) AS disk
			FROM (
				SELECT node_id, cpus_scheduled AS cpus, mem_scheduled AS mem,
					disk_total_scheduled AS disk FROM a
				UNION ALL
				SELECT * FROM unnest($4::int[], $5::float8[], $6::float8[], $7::float8[])
			) r GROUP BY node_id
		),
		n AS (
			SELECT id, agent_id FROM node
			WHERE id = ANY(ARRAY(SELECT node_id FROM f)) AND is_active AND NOT is_paused
				AND draining_since IS NULL AND agent_id = ANY($3::text[])
				AND NOT coalesce((SELECT is_paused FROM scheduler WHERE id = 1), false)
			ORDER BY id FOR SHARE
		),
		-- each queued job with the node of a job of its recipe that completed here
		c AS (
			SELECT DISTINCT ON (q.id) q.id AS queue_id, q.job_exe_id AS exe_id, q.job_id,
				a.node_id, n.agent_id, q.priority, q.queued, q.successors,
				q.cpus_required AS cpus, q.mem_required AS mem, q.disk_in_required AS disk_in,
				q.disk_out_required AS disk_out, q.disk_total_required AS disk_total
			FROM queue q
				JOIN recipe_job rs ON rs.job_id = q.job_id
				JOIN recipe_job ra ON ra.recipe_id = rs.recipe_id
				JOIN a ON a.job_id = ra.job_id
				JOIN n ON n.id = a.node_id
				JOIN job_type t ON t.id = q.job_type_id
			WHERE q.job_id = ANY($2::int[]) AND NOT t.is_paused AND t.max_scheduled IS NULL
				AND NOT t.uses_docker AND q.priority <= (SELECT min(priority) FROM queue)
			ORDER BY q.id, a.id
		),
		w AS (
			SELECT c.*, sum(c.cpus) OVER o AS cpus_sum, sum(c.mem) OVER o AS mem_sum,
				sum(c.disk_total) OVER o AS disk_sum
			FROM c WINDOW o AS (PARTITION BY c.node_id ORDER BY c.priority, c.queued, c.queue_id)
		),
		u AS (
			SELECT w.*, (extract(epoch FROM w.queued) * 1000000)::float8 AS queued_us
			FROM w JOIN f ON f.node_id = w.node_id
			WHERE w.cpus_sum <= f.cpus + 1e-9 AND w.mem_sum <= f.mem + 1e-9
				AND w.disk_sum <= f.disk + 1e-9
		),
		d AS (
			DELETE FROM queue q WHERE q.id = ANY(ARRAY(SELECT queue_id FROM u))
			RETURNING q.job_exe_id
		),
		${placeTakenSql("ARRAY(SELECT exe_id FROM u)", "$2::int[]")}
		SELECT e.*, u.priority, u.queued_us, u.queue_id, u.successors
		FROM e JOIN u ON u.exe_id = e.id ORDER BY e.id`;

/**
 * Places the jobs `input.queuedJobIds` that fit in the room `input.endedExeIds` freed (see
 * above), in the caller's transaction; answers them placed, to hand to their agents once it
 * commits. `last`: the statement is the transaction's last, sent with its COMMIT.
 */
export async function handOff(sql: Sql, input: HandOffInput, last = false): Promise<PlacedExe[]> {
	if (
		input.endedExeIds.length === 0 ||
		input.queuedJobIds.length === 0 ||
		input.agents.length === 0
	)
		return [];
	const held = input.held ?? new Map<number, Resources>();
	const run = last && sql.commitWith ? sql.commitWith.bind(sql) : sql.query.bind(sql);
	const rows = await run<PlacedExe & { priority: number; queued_us: number; queue_id: number }>(
		HAND_OFF_SQL,
		[
			input.endedExeIds,
			input.queuedJobIds,
			input.agents,
			[...held.keys()],
			[...held.values()].map(h => h.cpus),
			[...held.values()].map(h => h.mem),
			[...held.values()].map(h => h.disk)
		]
	);
	return rows.map(({ priority, queued_us, queue_id, ...r }) => ({
		...r,
		cpus: Number(r.cpus),
		mem: Number(r.mem),
		disk_total: Number(r.disk_total),
		rank: [priority, queued_us, queue_id] as Rank
	}));
}
