import type { Resources } from "./matching";

/**
 * Resources held for the jobs an execution's end frees: a pass that places an execution whose end
 * queues `successors` jobs of its recipe sets aside on its node, as far as it fits, that many
 * times the execution's own needs (matchBatch), and every later pass leaves it free until the
 * execution's report is recorded or `holdMs` has passed. The hand-off (handoff.ts) then places
 * the jobs its end queued in the room the execution frees plus the room held for them, in the
 * transaction that records the end: what no pass could have given to anything else.
 *
 * Why passes must leave a hold free a little past its release: a pass reads the nodes' free
 * resources in a statement sent before it knows of holds released meanwhile, so a hand-off that
 * committed after that statement's snapshot is not in what it read. A pass therefore leaves free
 * every hold still in force when its context statement was sent (`heldByNode(sentAt)`): one
 * released before that is in its snapshot, as the jobs placed in it RUNNING.
 */

interface RoomHold {
	nodeId: number;
	room: Resources;
	/** when it lapses unless pinned (ms, the clock given) */
	until: number;
	/** a hand-off in flight counts on it: it does not lapse */
	pinned: boolean;
	/** when it stopped counting (ms): settled, or lapsed; null while in force */
	ended: number | null;
}

/**
 * How long a hold lasts without its execution's report: under load a recipe job's way from
 * placement through its agent's backlog, its run and its report often takes more than 100 ms
 * (which lapsed most holds, and each recipe's C then waited for a pass: docs/decisions.md, "The
 * hand-off"); a longer job's successors come when it ends, spread by its run time.
 */
export const ROOM_HOLD_MS = 1000;

const NONE: Resources = { cpus: 0, mem: 0, disk: 0 };

export class RoomHolds {
	private readonly holds = new Map<number, RoomHold>();

	constructor(
		private readonly holdMs: number,
		private readonly now: () => number = () => performance.now()
	) {}

	get size(): number {
		return this.holds.size;
	}

	/** The execution `exeId` placed on `nodeId` holds `room` for the jobs its end frees. */
	hold(exeId: number, nodeId: number, room: Resources): void {
		if (room.cpus <= 0 && room.mem <= 0 && room.disk <= 0) return;
		this.holds.set(exeId, {
			nodeId,
			room,
			until: this.now() + this.holdMs,
			pinned: false,
			ended: null
		});
	}

	/**
	 * The room these executions hold that is still in force, by node, each hold pinned (kept in
	 * force) until `settle`: a hand-off places in it.
	 */
	pin(exeIds: Iterable<number>): Map<number, Resources> {
		const now = this.now();
		const byNode = new Map<number, Resources>();
		for (const id of exeIds) {
			const hold = this.holds.get(id);
			if (!hold || hold.ended !== null || (!hold.pinned && hold.until <= now)) continue;
			hold.pinned = true;
			addTo(byNode, hold);
		}
		return byNode;
	}

	/** These executions' reports are recorded (with any hand-off of their room): it is free. */
	settle(exeIds: Iterable<number>): void {
		const now = this.now();
		for (const id of exeIds) {
			const hold = this.holds.get(id);
			if (!hold || hold.ended !== null) continue;
			hold.ended = hold.pinned ? now : Math.min(now, hold.until);
			hold.pinned = false;
		}
	}

	/**
	 * What a pass whose context statement was sent at `sentAt` leaves free, by node: every hold
	 * in force at that moment or since.
	 */
	heldByNode(sentAt: number): Map<number, Resources> {
		const byNode = new Map<number, Resources>();
		for (const hold of this.holds.values()) {
			if (this.endOf(hold) <= sentAt) continue;
			addTo(byNode, hold);
		}
		return byNode;
	}

	/** Forgets the holds over before `at` (no pass sent its context before it any more). */
	forgetBefore(at: number): void {
		for (const [id, hold] of this.holds) if (this.endOf(hold) <= at) this.holds.delete(id);
	}

	private endOf(hold: RoomHold): number {
		return hold.ended ?? (hold.pinned ? Infinity : hold.until);
	}
}

/** Adds a hold's room to its node's sum. */
function addTo(byNode: Map<number, Resources>, hold: RoomHold): void {
	const sum = byNode.get(hold.nodeId) ?? { ...NONE };
	sum.cpus += hold.room.cpus;
	sum.mem += hold.room.mem;
	sum.disk += hold.room.disk;
	byNode.set(hold.nodeId, sum);
}
