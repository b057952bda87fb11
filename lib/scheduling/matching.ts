/**
 * Matching queued executions to nodes, in memory: no database, no Moleculer. The claim code
 * (claim.ts) reads a batch of queue rows in (priority, queued, id) order and the free resources
 * of the nodes that may take work, and asks this module which rows go where.
 */

/** cpus, mem (MiB) and disk (MiB). */
export interface Resources {
	cpus: number;
	mem: number;
	disk: number;
}

/** A node that may take work now, with what it has free (offered minus scheduled). */
export interface NodeSlot {
	id: number;
	/** the agent's Moleculer nodeID, where its executions are sent */
	agentId: string;
	free: Resources;
}

/** One queue row: an execution waiting, with the resources its job needs. */
export interface QueuedRow {
	/** the queue row's id */
	id: number;
	jobExeId: number;
	jobId: number;
	jobTypeId: number;
	priority: number;
	cpus: number;
	mem: number;
	diskIn: number;
	diskOut: number;
	diskTotal: number;
	/** the queued time as PostgreSQL wrote it (full precision), for keyset paging */
	queuedKey: string;
}

/**
 * Job type limits for one pass: types whose jobs may not be scheduled now (paused), and for types
 * with max_scheduled, how many more may start. `remaining` is decremented as rows are placed.
 */
export interface TypeLimits {
	paused: ReadonlySet<number>;
	remaining: Map<number, number>;
}

export interface Placement {
	row: QueuedRow;
	node: NodeSlot;
}

/** Slack for float sums (0.1 + 0.2 cpus must fit in 0.3). */
const EPSILON = 1e-9;

/** Whether a row's needs fit in `free`. Disk is the total (input + output) the execution needs. */
export function fits(free: Resources, row: Pick<QueuedRow, "cpus" | "mem" | "diskTotal">): boolean {
	return (
		row.cpus <= free.cpus + EPSILON &&
		row.mem <= free.mem + EPSILON &&
		row.diskTotal <= free.disk + EPSILON
	);
}

/** Whether a node has anything left at all (a row may need nothing, but that is rare). */
export function hasCapacity(nodes: readonly NodeSlot[]): boolean {
	return nodes.some(n => n.free.cpus > EPSILON || n.free.mem > EPSILON || n.free.disk > EPSILON);
}

/**
 * Places the rows of one batch, in the order given (priority, then queue time): each row goes to
 * the fitting node with the most free CPUs (then memory, then the lowest id), so work spreads
 * over the cluster. A row that fits nowhere, or whose job type is paused or at its max_scheduled,
 * is skipped and later rows are still considered: an unplaceable high-priority job never blocks
 * smaller ones behind it. Nodes' free resources and `limits.remaining` are updated in place.
 */
export function matchBatch(
	rows: readonly QueuedRow[],
	nodes: NodeSlot[],
	limits: TypeLimits
): { placed: Placement[]; skipped: QueuedRow[] } {
	const placed: Placement[] = [];
	const skipped: QueuedRow[] = [];
	for (const row of rows) {
		if (limits.paused.has(row.jobTypeId)) {
			skipped.push(row);
			continue;
		}
		const left = limits.remaining.get(row.jobTypeId);
		if (left !== undefined && left <= 0) {
			skipped.push(row);
			continue;
		}
		const node = bestNode(nodes, row);
		if (!node) {
			skipped.push(row);
			continue;
		}
		node.free.cpus -= row.cpus;
		node.free.mem -= row.mem;
		node.free.disk -= row.diskTotal;
		if (left !== undefined) limits.remaining.set(row.jobTypeId, left - 1);
		placed.push({ row, node });
	}
	return { placed, skipped };
}

function bestNode(nodes: readonly NodeSlot[], row: QueuedRow): NodeSlot | null {
	let best: NodeSlot | null = null;
	for (const node of nodes) {
		if (!fits(node.free, row)) continue;
		if (
			!best ||
			node.free.cpus > best.free.cpus + EPSILON ||
			(Math.abs(node.free.cpus - best.free.cpus) <= EPSILON &&
				(node.free.mem > best.free.mem + EPSILON ||
					(Math.abs(node.free.mem - best.free.mem) <= EPSILON && node.id < best.id)))
		)
			best = node;
	}
	return best;
}

/** Job types no row of which can be placed this pass: paused, or at their max_scheduled. */
export function excludedTypes(limits: TypeLimits): number[] {
	const out = new Set<number>(limits.paused);
	for (const [type, left] of limits.remaining) if (left <= 0) out.add(type);
	return [...out].sort((a, b) => a - b);
}
