import type { Sql } from "../db/run";
import type { PlacedExe } from "../executions/types";
import { schedulePass, type Unrunnable } from "./claim";
import type { LaunchWindows } from "./launch-window";
import { ImageSets, TypeKinds, WaitingReasons } from "./matching";
import type { RoomHolds } from "./room-holds";
import type { LastPass } from "./waiting";

/** What the leader's passes use of the scheduler around them. */
export interface PassLink {
	isLeader(): boolean;
	/** runs work on the leader's connection, one piece at a time */
	exclusive<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
	/** the agents work is placed on now */
	agentIds(): string[];
	/** how recent a node's heartbeat must be for work to be placed on it */
	placementLeaseMs(): number;
	/** hands what a pass placed to the agents */
	dispatch(placed: PlacedExe[]): void;
	/** control work goes before the intake of new recipes (lib/recipes/intake-gate.ts) */
	gate: { enterControl(): void; leaveControl(): void };
	/** a pass's duration, seconds, for the metrics */
	passed?(seconds: number): void;
	warn(fields: Record<string, unknown>, message: string): void;
}

export interface PassOptions {
	/** queue rows claimed per transaction */
	batchSize: number;
	/** queue rows read per pass at most */
	maxScanRows: number;
}

/**
 * The leader's scheduling loop (lib/scheduling/claim.ts schedulePass): a wake-up starts passes
 * unless they run, and one that runs goes round once more; passes go on while a pass stopped at
 * its scan limit having placed work. The launch windows (null: none) cap what each agent is
 * given, and a pass leaves alone the room held for the jobs a placed job's end frees.
 */
export class PassLoop {
	/** the last pass's context, for why jobs wait (lib/scheduling/waiting.ts) */
	lastPass: LastPass | null = null;
	private passing = false;
	private dirty = false;
	private lastExcluded: number[] = [];
	private readonly images = new ImageSets();
	private readonly kinds = new TypeKinds();
	private readonly waitingReasons = new WaitingReasons();
	private windowTimer: NodeJS.Timeout | null = null;

	constructor(
		private readonly link: PassLink,
		private readonly options: PassOptions,
		private readonly windows: LaunchWindows | null,
		/** the room held for the hand-off (lib/scheduling/handoff.ts); null: no hand-off */
		private readonly roomHolds: RoomHolds | null
	) {}

	/** Starts passes unless they run; passes that run go round once more. */
	wake(): void {
		if (!this.link.isLeader()) return;
		if (this.passing) {
			this.dirty = true;
			return;
		}
		this.passing = true;
		void this.run();
	}

	/** Forgets what the last lead learned (its lock lost). */
	forget(): void {
		this.lastPass = null;
	}

	stop(): void {
		if (this.windowTimer) clearTimeout(this.windowTimer);
		this.windowTimer = null;
	}

	private async run(): Promise<void> {
		this.link.gate.enterControl();
		try {
			let again = true;
			while (again && this.link.isLeader()) {
				this.dirty = false;
				const passStarted = performance.now();
				const passAt = new Date();
				const result = await this.link.exclusive(sql => {
					// holds over before its context is read are in what it reads
					const sentAt = performance.now();
					this.roomHolds?.forgetBefore(sentAt);
					const { windows, roomHolds } = this;
					return schedulePass(
						sql,
						{
							agents: this.link.agentIds(),
							leaseMs: this.link.placementLeaseMs(),
							batchSize: this.options.batchSize,
							maxScanRows: this.options.maxScanRows,
							likelyExcluded: this.lastExcluded,
							images: this.images,
							kinds: this.kinds,
							room: windows ? (id: string) => windows.room(id) : undefined,
							holds: roomHolds
								? { byNode: () => roomHolds.heldByNode(sentAt) }
								: undefined
						},
						(placed: PlacedExe[]) => this.link.dispatch(placed)
					);
				});
				this.link.passed?.((performance.now() - passStarted) / 1000);
				this.lastExcluded = result.excluded;
				// a pass that read nothing (every launch window closed) leaves the last one's reasons
				if (result.context) this.lastPass = { at: passAt, ctx: result.context };
				if (result.unrunnable.length > 0) this.sayWhyWaiting(result.unrunnable);
				if (this.windows) this.wakeAtWindow(this.windows);
				again = this.dirty || (result.placed.length > 0 && result.stop === "scan-limit");
			}
		} catch (error) {
			if (this.link.isLeader()) {
				this.link.warn({ err: error }, "scheduling pass failed; trying again shortly");
				setTimeout(() => this.wake(), 200).unref?.();
			}
		} finally {
			this.passing = false;
			this.link.gate.leaveControl();
		}
	}

	/**
	 * Logs the container job types that wait because no node taking work can run them: once
	 * per type and minute, and when the reason changes (a pass runs many times a second).
	 */
	private sayWhyWaiting(unrunnable: Unrunnable[]): void {
		for (const u of this.waitingReasons.due(unrunnable))
			this.link.warn(
				{
					jobTypeId: u.jobTypeId,
					image: u.image,
					privileged: u.privileged,
					reason: u.reason
				},
				`container jobs of job type ${u.jobTypeId} stay QUEUED: ${u.reason}`
			);
	}

	/**
	 * Wakes the leader when the first closed launch window opens again: work waits queued
	 * while every agent has enough to launch, and no report may come to wake it (a burst of
	 * long-running jobs). Each pass sets it anew: while reports wake passes, it never fires.
	 */
	private wakeAtWindow(windows: LaunchWindows): void {
		this.stop();
		const inMs = windows.reopensIn(this.link.agentIds());
		if (inMs === null) return;
		this.windowTimer = setTimeout(() => {
			this.windowTimer = null;
			this.wake();
		}, inMs);
		this.windowTimer.unref?.();
	}
}
