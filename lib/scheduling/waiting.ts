import { fits, type Resources } from "./matching";
import type { PassContext } from "./claim";
import type { Sql } from "../db/run";

/**
 * Why a QUEUED job is not running yet, told from the leader's last pass: the context that pass
 * read (the scheduler's pause, the job types paused or at max_scheduled, the container types no
 * node can run, the nodes that took work with what they had left once it had placed its rows)
 * and the job's own queue row. Nothing is planned again per question: the answer is what the
 * last pass saw, and says when that was.
 */

/** Stable codes of the reasons, most decisive first. */
export const WAIT_CODES = [
	"SCHEDULER_PAUSED",
	"NOT_YET_CONSIDERED",
	"JOB_TYPE_PAUSED",
	"NO_NODE_ONLINE",
	"ALL_NODES_PAUSED",
	"MAX_SCHEDULED",
	"IMAGE_UNAVAILABLE",
	"RESOURCES",
	"BEHIND_HIGHER_PRIORITY",
	"NEXT_PASS"
] as const;

export type WaitCode = (typeof WAIT_CODES)[number];

export interface WhyWaiting {
	code: WaitCode;
	/** the same in words */
	reason: string;
	/** when the pass this is told from ran (ISO 8601) */
	pass_at: string | null;
}

/** The leader's last pass: its context, after its placements, and when it ran. */
export interface LastPass {
	at: Date;
	ctx: PassContext;
}

/** A queued job's row, with what the reasons name. */
export interface WaitingJob {
	job_id: number;
	job_type_id: number;
	job_type: string;
	max_scheduled: number | null;
	priority: number;
	cpus: number;
	mem: number;
	disk: number;
	queued: Date;
	/** queued jobs of a higher priority (a lower number) */
	ahead: number;
}

/** An active node as its row says, for the reasons that name nodes. */
export interface NodeFacts {
	id: number;
	hostname: string;
	/** registered and heard from within the lease */
	online: boolean;
	paused: boolean;
	pause_reason: string | null;
	draining: boolean;
	offered: Resources;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const round = (n: number) => Math.round(n * 100) / 100;
const resources = (r: Resources) =>
	`${round(r.cpus)} cpus, ${round(r.mem)} MiB memory, ${round(r.disk)} MiB disk`;

/** The answer for one queued job. */
export function whyWaiting(
	last: LastPass | null,
	job: WaitingJob,
	nodes: readonly NodeFacts[]
): WhyWaiting {
	const say = (code: WaitCode, reason: string): WhyWaiting => ({
		code,
		reason,
		pass_at: last ? last.at.toISOString() : null
	});
	if (last === null)
		return say("NOT_YET_CONSIDERED", "no scheduling pass has run since the scheduler started");
	const { ctx } = last;
	if (ctx.paused) return say("SCHEDULER_PAUSED", "the scheduler is paused");
	if (!ctx.queued || job.queued.getTime() > last.at.getTime())
		return say(
			"NOT_YET_CONSIDERED",
			"queued after the scheduler's last pass: the next pass considers it"
		);
	if (ctx.limits.paused.has(job.job_type_id))
		return say("JOB_TYPE_PAUSED", `its job type ${job.job_type} is paused`);
	if (ctx.nodes.length === 0) {
		const online = nodes.filter(n => n.online);
		if (online.length === 0)
			return say(
				"NO_NODE_ONLINE",
				`no node is online (${plural(nodes.length, "active node")}, none heard from within its lease)`
			);
		const why = online
			.map(n =>
				n.paused
					? `node ${n.id} (${n.hostname}) paused${n.pause_reason ? `: ${n.pause_reason}` : ""}`
					: `node ${n.id} (${n.hostname}) draining`
			)
			.join("; ");
		return say("ALL_NODES_PAUSED", `every online node is paused or draining (${why})`);
	}
	if ((ctx.limits.remaining.get(job.job_type_id) ?? 1) <= 0)
		return say(
			"MAX_SCHEDULED",
			`its job type ${job.job_type} has max_scheduled ${job.max_scheduled ?? "?"} jobs running`
		);
	const unrunnable = ctx.unrunnable.find(u => u.jobTypeId === job.job_type_id);
	if (unrunnable)
		return say("IMAGE_UNAVAILABLE", `no node can run its image: ${unrunnable.reason}`);
	const need = { cpus: job.cpus, mem: job.mem, diskTotal: job.disk };
	if (!ctx.nodes.some(n => fits(n.free, need))) {
		const byId = new Map(nodes.map(n => [n.id, n]));
		const name = (id: number) => `node ${id} (${byId.get(id)?.hostname ?? "?"})`;
		const wanted = resources({ cpus: job.cpus, mem: job.mem, disk: job.disk });
		const offering = ctx.nodes.filter(n => {
			const offered = byId.get(n.id)?.offered;
			return offered !== undefined && fits(offered, need);
		});
		const largest = [...ctx.nodes].sort(
			(a, b) => b.free.cpus - a.free.cpus || b.free.mem - a.free.mem || a.id - b.id
		)[0];
		if (offering.length === 0) {
			const biggest = [...ctx.nodes]
				.map(n => ({ id: n.id, offered: byId.get(n.id)?.offered }))
				.filter((n): n is { id: number; offered: Resources } => n.offered !== undefined)
				.sort(
					(a, b) => b.offered.cpus - a.offered.cpus || b.offered.mem - a.offered.mem
				)[0];
			return say(
				"RESOURCES",
				`it needs ${wanted}: more than any online node offers` +
					(biggest
						? ` (the largest, ${name(biggest.id)}, offers ${resources(biggest.offered)})`
						: "")
			);
		}
		return say(
			"RESOURCES",
			`it needs ${wanted}: no online node has that free (the most free, ${name(largest.id)}, has ${resources(largest.free)} free)`
		);
	}
	if (job.ahead > 0)
		return say(
			"BEHIND_HIGHER_PRIORITY",
			`behind ${plural(job.ahead, "job")} of higher priority`
		);
	return say("NEXT_PASS", "it can be placed: the next pass places it");
}

/**
 * The queue rows of these jobs (or the head row of each of these job types, or of every job
 * type with queued work when `jobTypeIds` is empty too), with the jobs of higher priority queued
 * before each, and the active nodes: one round trip.
 */
export async function readWaiting(
	sql: Sql,
	which: { jobIds?: number[]; jobTypeIds?: number[] },
	leaseMs: number
): Promise<{ jobs: WaitingJob[]; nodes: NodeFacts[] }> {
	const rows = await sql.query<{ jobs: any[] | null; nodes: any[] | null }>(
		`WITH q AS (
			SELECT * FROM queue WHERE job_id = ANY($1::int[])
			UNION ALL
			-- each job type's head through the queue's (job_type_id, priority, queued, id) index:
			-- one row read per type, whatever waits behind it
			SELECT h.* FROM job_type t CROSS JOIN LATERAL (
				SELECT * FROM queue WHERE job_type_id = t.id ORDER BY priority, queued, id LIMIT 1
			) h
			WHERE cardinality($1::int[]) = 0
				AND (cardinality($2::int[]) = 0 OR t.id = ANY($2::int[]))
		)
		SELECT
			(SELECT json_agg(json_build_object('job_id', q.job_id, 'job_type_id', q.job_type_id,
				'job_type', t.name || ':' || t.version, 'max_scheduled', t.max_scheduled,
				'priority', q.priority, 'cpus', q.cpus_required, 'mem', q.mem_required,
				'disk', q.disk_total_required, 'queued', q.queued,
				'ahead', (SELECT count(*) FROM queue a WHERE a.priority < q.priority)))
			 FROM q JOIN job_type t ON t.id = q.job_type_id) AS jobs,
			(SELECT json_agg(json_build_object('id', n.id, 'hostname', n.hostname,
				'online', n.agent_id IS NOT NULL
					AND n.last_heartbeat > now() - $3::int * interval '1 millisecond',
				'paused', n.is_paused, 'pause_reason', n.pause_reason,
				'draining', n.draining_since IS NOT NULL, 'cpus', coalesce(n.cpus_total, 0),
				'mem', coalesce(n.mem_total, 0), 'disk', coalesce(n.disk_total, 0)) ORDER BY n.id)
			 FROM node n WHERE n.is_active) AS nodes`,
		[which.jobIds ?? [], which.jobTypeIds ?? [], Math.round(leaseMs)]
	);
	const [row] = rows;
	return {
		jobs: (row.jobs ?? []).map(j => ({
			...j,
			cpus: Number(j.cpus),
			mem: Number(j.mem),
			disk: Number(j.disk),
			ahead: Number(j.ahead),
			queued: new Date(j.queued)
		})),
		nodes: (row.nodes ?? []).map(n => ({
			id: n.id,
			hostname: n.hostname,
			online: n.online,
			paused: n.paused,
			pause_reason: n.pause_reason,
			draining: n.draining,
			offered: { cpus: Number(n.cpus), mem: Number(n.mem), disk: Number(n.disk) }
		}))
	};
}
