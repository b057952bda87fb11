import {
	excludedTypes,
	hasCapacity,
	matchBatch,
	whyUnrunnable,
	type DockerNeed,
	type NodeSlot,
	type QueuedRow,
	type Resources,
	type TypeLimits,
	ImageSets,
	TypeKinds
} from "./matching";
import type { PlacedExe } from "../executions/types";
import { normalizeImage } from "../documents/images";
import type { Sql } from "../db/run";
import { applyPlacements } from "./place";

/**
 * The scheduler's claim: queued executions are read from the narrow `queue` table in batches, in
 * (priority, queued, id) order, matched in memory against the free resources of the nodes that
 * may take work, and the placed ones are taken off the queue and marked RUNNING (execution and
 * job) by one set-based statement per batch.
 *
 * Why the read takes no row locks and the batch no transaction: passes run one at a time in the
 * whole cluster (on the leader's lock connection, one piece of work at a time), so no other pass
 * can take the rows read; a cancel meanwhile takes the queue row away (in its own transaction,
 * with the execution), and the placing statement places only the executions whose queue rows it
 * deletes itself, waiting for a cancel in flight (see applyPlacements). Locking the rows read
 * (FOR UPDATE SKIP LOCKED in a BEGIN ... COMMIT) wrote every row read and cost two more round
 * trips per batch, each a wait for a cpu under load between a recipe job's completion and its
 * dependents' placement (docs/decisions.md, "Recipes").
 */

export interface PassOptions {
	/** Moleculer nodeIDs of the agents registered in the cluster right now */
	agents: string[];
	/** a node whose last heartbeat is older than this is not offered work */
	leaseMs: number;
	/** queue rows read per batch */
	batchSize: number;
	/** queue rows read per pass at most, past rows that could not be placed */
	maxScanRows: number;
	/**
	 * The job types the pass will likely exclude (those the previous pass excluded): its first
	 * batch is read with its context, before the context tells (read again when they differ).
	 */
	likelyExcluded?: readonly number[];
	/**
	 * The nodes' image lists read by earlier passes (kept by the leader): a node's images are
	 * read again only when their hash is not among them. A pass without it reads them all.
	 */
	images?: ImageSets;
	/**
	 * Which job types run containers, read by earlier passes (kept by the leader): read again
	 * only when a job type changed. A pass without it reads them.
	 */
	kinds?: TypeKinds;
	/**
	 * How many more executions an agent takes now (its launch window, launch-window.ts;
	 * Infinity: no window). Absent: no windows.
	 */
	room?: (agentId: string) => number;
	/**
	 * Resources held for successors on each node (room-holds.ts), left free by this pass; and
	 * whether its placements hold room for their own successors.
	 */
	holds?: { byNode: () => Map<number, Resources> };
}

/** A container job type that waits because no node taking work can run it. */
export interface Unrunnable {
	jobTypeId: number;
	/** its docker_image as written */
	image: string | null;
	privileged: boolean;
	reason: string;
}

export interface PassContext {
	paused: boolean;
	/** whether anything is queued at all (when not, nodes and limits are left empty) */
	queued: boolean;
	nodes: NodeSlot[];
	limits: TypeLimits;
	/** the queued container job types no node offered here can run (in limits.unrunnable too) */
	unrunnable: Unrunnable[];
}

/** Whether a job type's work needs a node that can run containers, and it has work queued. */
const QUEUED_CONTAINERS = `t.uses_docker AND NOT t.is_paused
	AND (SELECT true FROM queue WHERE job_type_id = t.id LIMIT 1)`;

// The nodes' free resources cost a sum over every RUNNING execution (20 ms with 1,000 nodes and
// 20,000 executions): not computed when nothing is queued, as on most of the passes that reports
// and heartbeats wake (CASE evaluates the sub-select only when taken).
//
// Container job types ride on the read of the limits (the same scan of job_type; a type that
// uses_docker is probed for queued work, by the queue's job type index), and a node's engine on
// its row's read: `docker` is null for a node without an engine, else [pull, privileged, hash of
// its images, its images unless their hash is among $3 (those the caller has read before)]. Tried
// first: a flag for "a container type has queued work" and the nodes read with or without their
// engine by it. Its statement carried the nodes' sub-select twice, and PostgreSQL sets up every
// sub-plan at each execution, run or not: ~110 µs of the server's time per pass against ~65
// before; this one ~65–70 (docs/decisions.md, "Container jobs go where their image is"). Which
// job types run containers rides on it too, read only when the job_type generation moved (TypeKinds).
const PASS_CONTEXT_SQL = `SELECT
			(SELECT is_paused FROM scheduler WHERE id = 1) AS paused,
			q.queued,
			CASE WHEN q.queued THEN coalesce((SELECT json_agg(json_build_object(
					'id', n.id, 'agent_id', n.agent_id,
					'cpus', coalesce(n.cpus_total, 0) - coalesce(s.cpus, 0),
					'mem', coalesce(n.mem_total, 0) - coalesce(s.mem, 0),
					'disk', coalesce(n.disk_total, 0) - coalesce(s.disk, 0),
					'docker', CASE WHEN n.docker_engine THEN json_build_array(n.docker_pull,
						n.docker_privileged, n.docker_images_hash,
						CASE WHEN n.docker_images_hash = ANY($3::text[]) THEN NULL
							ELSE n.docker_images END) END) ORDER BY n.id)
				FROM node n
				LEFT JOIN LATERAL (
					SELECT sum(cpus_scheduled) AS cpus, sum(mem_scheduled) AS mem,
						sum(disk_total_scheduled) AS disk
					FROM job_exe WHERE status = 'RUNNING' AND node_id = n.id) s ON true
				WHERE n.is_active AND NOT n.is_paused AND n.draining_since IS NULL
					AND n.agent_id = ANY($1::text[])
					AND n.last_heartbeat > now() - $2::int * interval '1 millisecond'), '[]')
				ELSE '[]' END AS nodes,
			coalesce((SELECT json_agg(json_build_object(
					'id', t.id, 'paused', t.is_paused, 'max', t.max_scheduled,
					'running', CASE WHEN t.max_scheduled IS NULL THEN 0 ELSE
						(SELECT count(*) FROM job j WHERE j.job_type_id = t.id AND j.status = 'RUNNING') END,
					'docker', CASE WHEN ${QUEUED_CONTAINERS}
						THEN json_build_array(t.docker_image, t.docker_privileged) END))
				FROM job_type t WHERE t.is_paused OR t.max_scheduled IS NOT NULL
					OR (${QUEUED_CONTAINERS})), '[]') AS types,
			g.generation::text AS type_generation,
			CASE WHEN g.generation IS DISTINCT FROM $4::bigint THEN (SELECT json_build_array(
					coalesce(array_agg(t.id) FILTER (WHERE t.uses_docker), '{}'),
					coalesce(array_agg(t.id) FILTER (WHERE NOT t.uses_docker), '{}'))
				FROM job_type t) END AS type_kinds
		 FROM (SELECT EXISTS (SELECT 1 FROM queue) AS queued) q,
			(SELECT (SELECT generation FROM list_generation WHERE name = 'job_type') AS generation) g`;

/**
 * Everything one pass needs to know before reading the queue, in one round trip: the scheduler's
 * pause, the nodes that may take work (active, not paused, not draining, their agent registered
 * and heard from within the lease) with their free resources and their Docker engines, the paused and
 * max_scheduled job types, and the container job types with work queued, with what they need of
 * a node. A container job type no node here can run is in `unrunnable`, and excluded from the
 * pass.
 */
export async function loadPassContext(
	sql: Sql,
	opts: Pick<PassOptions, "agents" | "leaseMs" | "images" | "kinds" | "room" | "holds">
): Promise<PassContext> {
	const images = opts.images ?? new ImageSets();
	const kinds = opts.kinds ?? new TypeKinds();
	const [row] = await sql.query<{
		paused: boolean | null;
		queued: boolean;
		nodes: any[];
		types: any[];
		type_generation: string;
		type_kinds: [number[], number[]] | null;
	}>(PASS_CONTEXT_SQL, [opts.agents, Math.round(opts.leaseMs), images.known(), kinds.known()]);
	kinds.update(row.type_generation, row.type_kinds);
	const paused = new Set<number>();
	const remaining = new Map<number, number>();
	let docker: Map<number, DockerNeed> | null = null;
	for (const t of row.types) {
		if (t.paused) paused.add(t.id);
		else if (t.max !== null) remaining.set(t.id, t.max - Number(t.running));
		if (t.docker !== null) {
			const [image, privileged] = t.docker as [string | null, boolean];
			(docker ??= new Map()).set(t.id, {
				image: image === null || image.trim() === "" ? null : normalizeImage(image),
				privileged
			});
		}
	}
	const hashes: string[] = [];
	const held = opts.holds?.byNode();
	const nodes: NodeSlot[] = row.nodes.map(n => {
		const hold = held?.get(n.id);
		const slot: NodeSlot = {
			id: n.id,
			agentId: n.agent_id,
			free: {
				cpus: Number(n.cpus) - (hold?.cpus ?? 0),
				mem: Number(n.mem) - (hold?.mem ?? 0),
				disk: Number(n.disk) - (hold?.disk ?? 0)
			}
		};
		const room = opts.room?.(n.agent_id) ?? Infinity;
		if (room !== Infinity) slot.room = room;
		if (n.docker !== null) {
			const [pull, privileged, hash, list] = n.docker;
			hashes.push(hash);
			slot.docker = { engine: true, pull, privileged, images: images.resolve(hash, list) };
		}
		return slot;
	});
	if (row.queued) images.retain(hashes);
	const limits: TypeLimits = { paused, remaining, kinds };
	const unrunnable: Unrunnable[] = [];
	if (docker !== null) {
		limits.docker = docker;
		const blocked = new Set<number>();
		for (const t of row.types) {
			const need = docker.get(t.id);
			if (need === undefined || nodes.length === 0) continue;
			const reason = whyUnrunnable(need, t.docker[0], nodes);
			if (reason === null) continue;
			blocked.add(t.id);
			unrunnable.push({
				jobTypeId: t.id,
				image: t.docker[0],
				privileged: need.privileged,
				reason
			});
		}
		if (blocked.size > 0) limits.unrunnable = blocked;
	}
	return { paused: !!row.paused, queued: row.queued, nodes, limits, unrunnable };
}

const CLAIM_COLUMNS = `id, job_exe_id, job_id, job_type_id, priority, cpus_required, mem_required,
	disk_in_required, disk_out_required, disk_total_required, queued::text AS queued_key, successors,
	(extract(epoch FROM queued) * 1000000)::float8 AS queued_us`;

/**
 * With job types excluded (paused, or at max_scheduled), the head of each other job type's queue
 * (index (job_type_id, priority, queued, id), migration 0008), merged: read through the claim
 * index, a paused type's backlog at the head of the queue was stepped over row by row on every
 * pass (20,000 queued jobs of a paused type cost each pass ~20,000 index entries and heap
 * fetches, and P1 fell from ~1.2 to ~0.65 of bare spawn beside them). Each type's head is read
 * before the merge keeps `limit` rows: a few more rows read, against a scan that no longer grows
 * with what waits.
 */
async function claimAroundExcluded(
	sql: Sql,
	after: QueuedRow | null,
	excluded: number[],
	limit: number
): Promise<any[]> {
	return sql.query(
		`SELECT q.* FROM job_type t CROSS JOIN LATERAL (
			SELECT ${CLAIM_COLUMNS}, queued FROM queue
			WHERE job_type_id = t.id
			  AND ($3::int IS NULL OR (priority, queued, id) > ($3::int, $4::timestamptz, $5::int))
			ORDER BY priority, queued, id LIMIT $2
		 ) q
		 WHERE t.id <> ALL($1::int[])
		 ORDER BY q.priority, q.queued, q.id LIMIT $2`,
		[excluded, limit, after?.priority ?? null, after?.queuedKey ?? null, after?.id ?? null]
	);
}

/**
 * Reads the next batch of queue rows after `after` (keyset on the claim index), skipping the rows
 * of the excluded job types.
 */
export async function claimBatch(
	sql: Sql,
	after: QueuedRow | null,
	excluded: number[],
	limit: number
): Promise<QueuedRow[]> {
	const rows =
		excluded.length > 0
			? await claimAroundExcluded(sql, after, excluded, limit)
			: after
				? await sql.query(
						`SELECT ${CLAIM_COLUMNS} FROM queue
				 WHERE (priority, queued, id) > ($1::int, $2::timestamptz, $3::int)
				   AND job_type_id <> ALL($4::int[])
				 ORDER BY priority, queued, id LIMIT $5`,
						[after.priority, after.queuedKey, after.id, excluded, limit]
					)
				: await sql.query(
						`SELECT ${CLAIM_COLUMNS} FROM queue
				 WHERE job_type_id <> ALL($1::int[])
				 ORDER BY priority, queued, id LIMIT $2`,
						[excluded, limit]
					);
	return rows.map(r => ({
		id: r.id,
		jobExeId: r.job_exe_id,
		jobId: r.job_id,
		jobTypeId: r.job_type_id,
		priority: r.priority,
		cpus: Number(r.cpus_required),
		mem: Number(r.mem_required),
		diskIn: Number(r.disk_in_required),
		diskOut: Number(r.disk_out_required),
		diskTotal: Number(r.disk_total_required),
		queuedKey: r.queued_key,
		successors: r.successors,
		queuedUs: r.queued_us
	}));
}

export interface PassResult {
	/** executions marked RUNNING this pass, to hand to their agents */
	placed: PlacedExe[];
	/** the job types its first batch excluded (for the next pass's likelyExcluded) */
	excluded: number[];
	/** queue rows read */
	scanned: number;
	/** why the pass stopped */
	stop: "paused" | "no-nodes" | "queue-end" | "full" | "scan-limit";
	/** the queued container job types no node taking work can run (their rows were not read) */
	unrunnable: Unrunnable[];
	/**
	 * what the pass read, its nodes' free resources as its placements left them (waiting.ts);
	 * absent when every launch window was closed and the pass read nothing
	 */
	context?: PassContext;
}

/**
 * One scheduling pass: reads the context, then reads batches from the head of the queue, each
 * batch's placements written by one statement and given to `onPlaced` at once. Rows that cannot
 * be placed stay queued and the next batch continues after them by keyset, up to `maxScanRows`
 * rows, so a head of unplaceable work never starves placeable work behind it.
 */
export async function schedulePass(
	sql: Sql,
	opts: PassOptions,
	onPlaced: (placed: PlacedExe[]) => void = () => undefined
): Promise<PassResult> {
	// With every agent's launch window closed, nothing can be placed: no read at all (the
	// scheduler wakes when one opens). Otherwise no more rows are read than the windows take.
	const likely = [...(opts.likelyExcluded ?? [])];
	const room = opts.room;
	const roomBefore = room ? opts.agents.reduce((sum, id) => sum + room(id), 0) : Infinity;
	if (roomBefore <= 0)
		return { placed: [], excluded: likely, scanned: 0, stop: "full", unrunnable: [] };
	// The context and the first batch are sent together: on a pipelined connection (the leader's,
	// lib/db/leader.ts) one round trip for both, each a wait for a cpu under load.
	const firstLimit = Math.max(1, Math.min(opts.batchSize, opts.maxScanRows, roomBefore));
	const contextRead = loadPassContext(sql, opts);
	const firstRead = claimBatch(sql, null, likely, firstLimit);
	firstRead.catch(() => undefined); // not waited for when the pass stops at its context
	const ctx = await contextRead;
	const placed: PlacedExe[] = [];
	const excludedFirst = excludedTypes(ctx.limits);
	const stop = (stop: PassResult["stop"], scanned = 0): PassResult => ({
		placed,
		excluded: excludedFirst,
		scanned,
		stop,
		unrunnable: ctx.paused ? [] : ctx.unrunnable,
		context: ctx
	});
	if (ctx.paused) return stop("paused");
	if (!ctx.queued) return stop("queue-end");
	if (ctx.nodes.length === 0) return stop("no-nodes");
	if (!hasCapacity(ctx.nodes)) return stop("full");
	let after: QueuedRow | null = null;
	let scanned = 0;
	for (;;) {
		const excluded = excludedTypes(ctx.limits);
		const limit = Math.max(
			1,
			Math.min(opts.batchSize, opts.maxScanRows - scanned, roomOf(ctx.nodes))
		);
		const rows: QueuedRow[] =
			after === null && limit === firstLimit && sameIds(excluded, likely)
				? await firstRead
				: await claimBatch(sql, after, excluded, limit);
		const batch = {
			rows: rows.length,
			last: rows.length > 0 ? rows[rows.length - 1] : null,
			placed:
				rows.length > 0
					? await applyPlacements(
							sql,
							matchBatch(rows, ctx.nodes, ctx.limits, opts.holds !== undefined).placed
						)
					: []
		};
		placed.push(...batch.placed);
		// handed to their agents now, while the pass goes on: the first runs do not wait for
		// the whole pass
		if (batch.placed.length > 0) onPlaced(batch.placed);
		scanned += batch.rows;
		if (batch.rows < limit) return stop("queue-end", scanned);
		if (!hasCapacity(ctx.nodes)) return stop("full", scanned);
		if (scanned >= opts.maxScanRows) return stop("scan-limit", scanned);
		after = batch.last;
	}
}

/** How many more executions the nodes' launch windows take (Infinity: one has none). */
function roomOf(nodes: readonly NodeSlot[]): number {
	return nodes.reduce((sum, n) => sum + (n.room ?? Infinity), 0);
}

/** Whether two sorted id lists are the same. */
function sameIds(a: readonly number[], b: readonly number[]): boolean {
	return a.length === b.length && a.every((id, i) => id === b[i]);
}
