import type { Sequelize } from "sequelize";
import { CONFLICT_RETRY, isTransientDbError, PIPELINED, retrying, transaction } from "../db/run";
import { writeReportBatch, type ReportItem } from "../executions/complete";
import { finishExecutions } from "../executions/finish";
import type { FinishInput, FinishResult, PlacedExe } from "../executions/types";
import { undoMoves, type FileMove } from "../records/product";
import type { PlacedExecutions } from "./dispatch";
import { handOff } from "./handoff";
import type { RoomHolds } from "./room-holds";

/** What the report writer uses of the scheduler around it. */
export interface ReportWriterLink {
	/** whether the leader places the recipe jobs that completions queue (the setting) */
	handOff: boolean;
	isLeader(): boolean;
	/** the agents work is placed on now */
	agentIds(): string[];
	/** control work goes before the intake of new recipes (lib/recipes/intake-gate.ts) */
	gate: { enterControl(): void; leaveControl(): void };
	/** executions the hand-off placed, to their agents */
	dispatch(placed: PlacedExe[]): void;
	/** what a write changed, logged and announced (lib/executions/complete.ts announceReports) */
	announce(result: FinishResult): void;
	warn(fields: Record<string, unknown>, message: string): void;
	error(fields: Record<string, unknown>, message: string): void;
}

/**
 * The scheduler's side of agents' reports and control-plane failures, gathered by its
 * micro-batcher: each batch is written in one transaction (lib/executions/finish.ts), and on the
 * leader the recipe jobs its completions free are placed in it (lib/scheduling/handoff.ts), in
 * the room those completions free and the room held for them (room-holds.ts).
 */
export class ReportWriter {
	/** the hand-off, replaceable (tests) */
	handOff = handOff;

	constructor(
		private readonly db: Sequelize,
		private readonly link: ReportWriterLink,
		private readonly roomHolds: RoomHolds,
		private readonly placed: PlacedExecutions
	) {}

	/** Writes a batch of reports; answers each its acknowledgement, or throws its failure. */
	async flush(items: ReportItem[]): Promise<boolean[]> {
		this.link.gate.enterControl();
		let written: Awaited<ReturnType<typeof writeReportBatch>>;
		try {
			written = await writeReportBatch(
				items,
				batch => this.write(batch),
				(jobExeId: number, error: unknown) =>
					this.link.error(
						{ err: error, jobExeId },
						"cannot record the end of an execution; failing it"
					)
			);
			// placed in the transaction: to their agents at once
			if (written.result.handedOff.length > 0) this.link.dispatch(written.result.handedOff);
			// the pass it wakes takes over before the flush lets go
			this.link.announce(written.result);
		} finally {
			this.link.gate.leaveControl();
		}
		const { result, failed } = written;
		this.logLate(items, result, failed);
		return items.map((item, i) => {
			if (failed.has(i)) throw failed.get(i);
			return answer(item, result);
		});
	}

	/**
	 * Reports of executions that had ended already (failed as node-lost while nobody listened,
	 * say, and retried): recorded in the log, as nothing else changes.
	 */
	private logLate(items: ReportItem[], result: FinishResult, failed: Map<number, unknown>) {
		items.forEach((item, i) => {
			if (item.kind !== "finished" || failed.has(i)) return;
			const { jobExeId, agentId, status, exitCode } = item.finished;
			if (!result.ended.has(jobExeId))
				this.link.warn(
					{ jobExeId, agentId, status, exitCode },
					"a report of an execution that had ended already: nothing changed"
				);
		});
	}

	/** One batch's transaction; without the hand-off when the hand-off failed. */
	async write(items: ReportItem[]): Promise<FinishResult> {
		const input = {
			steps: items.flatMap(i => (i.kind === "step" ? [i.step] : [])),
			finished: items.flatMap(i => (i.kind === "finished" ? [i.finished] : [])),
			failures: items.flatMap(i => (i.kind === "failure" ? [i.failure] : []))
		};
		// the leader places the recipe jobs completions queue in the room they free
		const handing = this.link.handOff && this.link.isLeader();
		try {
			return await this.writeFinished(input, handing);
		} catch (error) {
			if (!handing || isTransientDbError(error)) throw error;
			// a hand-off must never keep ends from being recorded: they wait for a pass instead
			this.link.error(
				{ err: error },
				"recording ends with the hand-off of their room failed; recording them without it"
			);
			return this.writeFinished(input, false);
		}
	}

	/** One transaction recording reports' ends and steps, retried on conflicts. */
	private async writeFinished(input: FinishInput, handing: boolean): Promise<FinishResult> {
		// each failed run's moves undone before the next (lib/db/run.ts retrying)
		return retrying(async () => {
			const moves: FileMove[] = [];
			try {
				const agents = handing ? this.link.agentIds() : [];
				return await transaction(this.db, PIPELINED, sql =>
					finishExecutions(sql, input, {
						placed: this.placed,
						moves,
						warn: (message: string) => this.link.warn({}, message),
						handOff:
							agents.length > 0
								? (tx, endedExeIds, queuedJobIds, last) => {
										// room held for them stays held until committed
										const held = this.roomHolds.pin(endedExeIds);
										return this.handOff(
											tx,
											{ endedExeIds, queuedJobIds, agents, held },
											last
										).finally(() => this.roomHolds.settle(endedExeIds));
									}
								: undefined
					})
				);
			} catch (error) {
				await undoMoves(moves);
				throw error;
			}
		}, CONFLICT_RETRY);
	}
}

/** A report's acknowledgement: whether what it reported was recorded. */
function answer(item: ReportItem, result: FinishResult): boolean {
	if (item.kind === "step") return result.stepped.has(item.step.jobExeId);
	if (item.kind === "failure") return result.ended.has(item.failure.jobExeId);
	return true;
}
