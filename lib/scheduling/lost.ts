import type { Sql } from "../db/run";

/**
 * Executions whose agent is gone: RUNNING on a node not heard from for a lease, counted from its
 * last heartbeat or from the execution's placement, whichever is later (a leader placing in its
 * first lease, heartbeats unrecorded yet, must not fail a run a moment later as its lease ends:
 * the soak saw such a run complete after it was failed and retried), or whose node now has
 * another agent (or none: cleared when its agent said goodbye). Oldest first, at most `limit`.
 *
 * Whether this process's registry lists the agent is not asked: the database's heartbeats are
 * the record. An agent restarted under its node ID is listed late or set aside for placement a
 * moment (a run sent to its previous process timed out), while it already runs what was placed
 * on it; a leader's registry may also miss an agent that heartbeats through another replica.
 * Failing its executions then made the soak run finished work twice.
 */
export async function findLostExecutions(
	sql: Sql,
	opts: { leaseMs: number; limit?: number }
): Promise<{ id: number; agent_id: string | null }[]> {
	return sql.query(
		`SELECT e.id, e.agent_id FROM job_exe e JOIN node n ON n.id = e.node_id
		 WHERE e.status = 'RUNNING'
		   AND (GREATEST(n.last_heartbeat, e.started) IS NULL
			OR GREATEST(n.last_heartbeat, e.started) < now() - $1::int * interval '1 millisecond'
			OR n.agent_id IS DISTINCT FROM e.agent_id)
		 ORDER BY e.id LIMIT $2`,
		[Math.round(opts.leaseMs), opts.limit ?? 1000]
	);
}

/**
 * Executions an agent should be running but does not report, started more than `graceMs` ago
 * (younger ones may still be on their way to it, or their end on its way here).
 */
export async function findForgottenExecutions(
	sql: Sql,
	opts: { nodeId: number; agentId: string; running: number[]; graceMs: number }
): Promise<number[]> {
	const rows = await sql.query<{ id: number }>(
		`SELECT id FROM job_exe
		 WHERE status = 'RUNNING' AND node_id = $1 AND agent_id = $2
		   AND id <> ALL($3::int[]) AND started < now() - $4::int * interval '1 millisecond'
		 ORDER BY id`,
		[opts.nodeId, opts.agentId, opts.running, Math.round(opts.graceMs)]
	);
	return rows.map(r => r.id);
}

/** The executions still RUNNING on one agent (one that just left the cluster). */
export async function findExecutionsOfAgent(sql: Sql, agentId: string): Promise<number[]> {
	const rows = await sql.query<{ id: number }>(
		`SELECT id FROM job_exe WHERE status = 'RUNNING' AND agent_id = $1 ORDER BY id`,
		[agentId]
	);
	return rows.map(r => r.id);
}
