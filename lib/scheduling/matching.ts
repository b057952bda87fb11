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
	/**
	 * How many more executions its agent takes this pass: its launch window (launch-window.ts), a
	 * second cap after `free`; absent: no window
	 */
	room?: number;
	/**
	 * What its Docker engine offers, as its agent last said (absent: no engine, or not read
	 * because no container job is queued)
	 */
	docker?: NodeDocker;
}

/** A node's Docker engine, as its agent reports it (NodeHeartbeat.docker). */
export interface NodeDocker {
	/** an engine answers on the node */
	engine: boolean;
	/** the agent pulls the images it lacks */
	pull: boolean;
	/** the agent runs docker_privileged job types */
	privileged: boolean;
	/** the engine's images, normalised (lib/documents/images.ts) */
	images: ReadonlySet<string>;
}

/** What a container job type (uses_docker) needs of a node. */
export interface DockerNeed {
	/**
	 * its docker_image, normalised; null when it has none (a node with an engine takes it, and
	 * its agent fails it with docker-task-launch, rather than it waiting forever)
	 */
	image: string | null;
	privileged: boolean;
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
	/** jobs of its recipe that its end queues (queue.successors): launch window room it holds */
	successors: number;
	/** the queued time in µs since 1970, for its rank (PlacedExe.rank) */
	queuedUs: number;
}

/**
 * Job type limits for one pass: types whose jobs may not be scheduled now (paused), and for types
 * with max_scheduled, how many more may start. `remaining` is decremented as rows are placed.
 */
export interface TypeLimits {
	paused: ReadonlySet<number>;
	remaining: Map<number, number>;
	/**
	 * The container job types queued, with what they need of a node: their rows go only to nodes
	 * that can run them (canRun). Absent or empty when none is queued: nothing is checked per row.
	 */
	docker?: ReadonlyMap<number, DockerNeed>;
	/** Job types no node taking work can run (see whyUnrunnable): excluded like paused ones. */
	unrunnable?: ReadonlySet<number>;
	/**
	 * Which job types run containers, as of the pass's context: a row of a type it does not know
	 * (created since) or of a container type whose needs it did not read (queued since) is left
	 * to the next pass, not placed on a node that may not run it. Absent: not checked.
	 */
	kinds?: { usesDocker(jobTypeId: number): boolean | undefined };
}

export interface Placement {
	row: QueuedRow;
	node: NodeSlot;
	/** of the row's successors, how many times its needs are held for them on the node */
	held?: number;
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

/**
 * Whether a node has anything left at all (a row may need nothing, but that is rare) and room
 * in its launch window.
 */
export function hasCapacity(nodes: readonly NodeSlot[]): boolean {
	return nodes.some(
		n =>
			(n.room === undefined || n.room > 0) &&
			(n.free.cpus > EPSILON || n.free.mem > EPSILON || n.free.disk > EPSILON)
	);
}

/**
 * Whether a node can run a container job type: an engine, privileged containers allowed when the
 * type wants them, and its image there or pulled.
 */
export function canRun(node: NodeSlot, need: DockerNeed): boolean {
	const d = node.docker;
	return (
		d !== undefined &&
		d.engine &&
		(!need.privileged || d.privileged) &&
		(need.image === null || d.pull || d.images.has(need.image))
	);
}

/**
 * Why no node among `nodes` can run a container job type, as a sentence for the log; null when
 * one can. `image` is the type's docker_image as written (for the sentence).
 */
export function whyUnrunnable(
	need: DockerNeed,
	image: string | null,
	nodes: readonly NodeSlot[]
): string | null {
	if (nodes.some(n => canRun(n, need))) return null;
	const engines = nodes.filter(n => n.docker?.engine);
	const of = `of ${nodes.length} node${nodes.length === 1 ? "" : "s"} taking work`;
	if (engines.length === 0) return `no node has a Docker engine (${of})`;
	const allowed = need.privileged ? engines.filter(n => n.docker!.privileged) : engines;
	if (allowed.length === 0)
		return `no node with a Docker engine allows privileged containers (${of})`;
	const which = need.privileged ? "node allowing privileged containers" : "node";
	return `no ${which} has the image ${image ?? need.image} and none pulls (${of})`;
}

/**
 * Places the rows of one batch, in the order given (priority, then queue time): each row goes to
 * the fitting node (resources, then room in its launch window) with the most free CPUs (then memory, then the lowest id), so work spreads
 * over the cluster; a container job's row only to a node that can run it (canRun). A row that
 * fits nowhere, or whose job type is paused or at its max_scheduled, is skipped and later rows
 * are still considered: an unplaceable high-priority job never blocks smaller ones behind it.
 * Nodes' free resources and `limits.remaining` are updated in place.
 */
export function matchBatch(
	rows: readonly QueuedRow[],
	nodes: NodeSlot[],
	limits: TypeLimits,
	/** a row's successors each hold its needs on its node as far as they fit (room-holds.ts) */
	holdRoom = false
): { placed: Placement[]; skipped: QueuedRow[] } {
	const placed: Placement[] = [];
	const skipped: QueuedRow[] = [];
	// container job types' nodes, found once per type and batch (the same slots, so what a
	// placement takes is seen through either list); nothing of it when none is queued
	const docker = limits.docker !== undefined && limits.docker.size > 0 ? limits.docker : null;
	const runners = docker === null ? null : new Map<number, NodeSlot[]>();
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
		if (limits.kinds !== undefined) {
			const usesDocker = limits.kinds.usesDocker(row.jobTypeId);
			if (
				usesDocker === undefined ||
				(usesDocker && limits.docker?.has(row.jobTypeId) !== true)
			) {
				skipped.push(row);
				continue;
			}
		}
		let candidates: readonly NodeSlot[] = nodes;
		if (docker !== null) {
			const need = docker.get(row.jobTypeId);
			if (need !== undefined) {
				let list = runners!.get(row.jobTypeId);
				if (list === undefined)
					runners!.set(row.jobTypeId, (list = nodes.filter(n => canRun(n, need))));
				candidates = list;
			}
		}
		const node = bestNode(candidates, row);
		if (!node) {
			skipped.push(row);
			continue;
		}
		take(node.free, row);
		let held = 0;
		if (holdRoom)
			while (held < row.successors && fits(node.free, row)) {
				take(node.free, row);
				held++;
			}
		if (node.room !== undefined) node.room -= 1 + row.successors;
		if (left !== undefined) limits.remaining.set(row.jobTypeId, left - 1);
		placed.push({ row, node, held });
	}
	return { placed, skipped };
}

function take(free: Resources, row: Pick<QueuedRow, "cpus" | "mem" | "diskTotal">): void {
	free.cpus -= row.cpus;
	free.mem -= row.mem;
	free.disk -= row.diskTotal;
}

function bestNode(nodes: readonly NodeSlot[], row: QueuedRow): NodeSlot | null {
	let best: NodeSlot | null = null;
	for (const node of nodes) {
		if (!fits(node.free, row) || (node.room !== undefined && node.room <= 0)) continue;
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

/**
 * Job types no row of which can be placed this pass: paused, at their max_scheduled, or that no
 * node taking work can run (containers).
 */
export function excludedTypes(limits: TypeLimits): number[] {
	const out = new Set<number>(limits.paused);
	for (const [type, left] of limits.remaining) if (left <= 0) out.add(type);
	if (limits.unrunnable) for (const type of limits.unrunnable) out.add(type);
	return [...out].sort((a, b) => a - b);
}

/**
 * Says why a job type waits at most once per `everyMs` for the same reason (a pass runs many
 * times a second under load; the reason is news once, then now and then).
 */
export class WaitingReasons {
	private said = new Map<number, { at: number; reason: string }>();

	constructor(
		private readonly everyMs = 60_000,
		private readonly now: () => number = Date.now
	) {}

	/** Those of `waiting` to log now (new, changed, or last said `everyMs` ago). */
	due<T extends { jobTypeId: number; reason: string }>(waiting: readonly T[]): T[] {
		if (waiting.length === 0) return [];
		const now = this.now();
		const out: T[] = [];
		for (const w of waiting) {
			const last = this.said.get(w.jobTypeId);
			if (last && last.reason === w.reason && now - last.at < this.everyMs) continue;
			this.said.set(w.jobTypeId, { at: now, reason: w.reason });
			out.push(w);
		}
		return out;
	}
}

const NO_IMAGES: ReadonlySet<string> = new Set();

/**
 * The image lists the scheduler has read, by their hash: a pass asks the database for a node's
 * images only when it does not know their hash, so a cluster whose images do not change sends
 * them once, not at every pass. Only the lists of the nodes seen last are kept.
 */
export class ImageSets {
	private sets = new Map<string, ReadonlySet<string>>([["", NO_IMAGES]]);

	/** The hashes whose lists are known (for the pass's statement). */
	known(): string[] {
		return [...this.sets.keys()];
	}

	/** The list of a hash: read now (`images`), else kept; empty when neither. */
	resolve(hash: string, images: readonly string[] | null | undefined): ReadonlySet<string> {
		if (images) {
			const set = new Set(images);
			this.sets.set(hash, set);
			return set;
		}
		return this.sets.get(hash) ?? NO_IMAGES;
	}

	/** Forgets the lists of hashes no node has now. */
	retain(hashes: Iterable<string>): void {
		const keep = new Set(hashes);
		keep.add("");
		for (const hash of this.sets.keys()) if (!keep.has(hash)) this.sets.delete(hash);
	}
}

/**
 * Which job types run containers, kept by the scheduler with the job_type generation
 * (list_generation, migration 0011) they were read at: a pass reads them again only when a job
 * type changed since, not for every row it claims (a key probe per row claimed cost P1's queued
 * jobs ~0.25 ms of PostgreSQL each).
 */
export class TypeKinds {
	private generation: string | null = null;
	private kinds = new Map<number, boolean>();

	/** The generation the kinds were read at, for the pass's statement (null: none read yet). */
	known(): string | null {
		return this.generation;
	}

	/** Takes what a pass read: the generation, and the kinds when they were read again. */
	update(generation: string, read: readonly [number[], number[]] | null): void {
		if (read === null && generation === this.generation) return;
		this.kinds = new Map();
		if (read !== null) {
			for (const id of read[0]) this.kinds.set(id, true);
			for (const id of read[1]) this.kinds.set(id, false);
		}
		this.generation = read === null ? null : generation;
	}

	/** Whether a job type runs containers; undefined for a type created since the kinds were read. */
	usesDocker(jobTypeId: number): boolean | undefined {
		return this.kinds.get(jobTypeId);
	}
}
