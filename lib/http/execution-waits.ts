import { Readable } from "stream";
import { setTimeout as sleep } from "timers/promises";
import { encodeFrame } from "../documents/log-frames";
import type { OpenedLog } from "./log-followers";

/** An execution's state as a follower of its logs needs it. */
export interface ExecutionState {
	id: number;
	status: string;
	agent_id: string | null;
}

const ENDED = ["COMPLETED", "FAILED", "CANCELED"];

/** Whether a follower can stop waiting: the execution runs on an agent, or has ended. */
export function settled(state: ExecutionState): boolean {
	return ENDED.includes(state.status) || (state.status === "RUNNING" && !!state.agent_id);
}

interface Waiter {
	resolve(state: ExecutionState): void;
	reject(error: unknown): void;
}

/**
 * Followers of executions that do not run yet (QUEUED) wait here until they run or end. The
 * waited executions are read together, in one statement: at once when some of them changed
 * (`changed`: the `job-exes.changed` event, of executions placed by the scheduler or canceled
 * by a user before they ran), else every `pollMs` while any is waited for (an event may be
 * lost, or come from a replica that has not committed yet). No waiter, no read.
 */
export class ExecutionWaits {
	private readonly waiters = new Map<number, Set<Waiter>>();
	private timer: NodeJS.Timeout | null = null;
	private reading: Promise<void> | null = null;
	private again = false;

	constructor(
		/** the executions' rows; one missing has gone (read as ended) */
		private readonly read: (ids: number[]) => Promise<ExecutionState[]>,
		private readonly pollMs = 1000
	) {}

	/** The number of executions waited for. */
	get waiting(): number {
		return this.waiters.size;
	}

	/** Resolves with the execution's state once it runs on an agent or has ended. */
	until(jobExeId: number, signal?: AbortSignal): Promise<ExecutionState> {
		return new Promise((resolve, reject) => {
			if (signal?.aborted) return reject(signal.reason);
			const waiter: Waiter = {
				resolve: state => {
					signal?.removeEventListener("abort", abort);
					resolve(state);
				},
				reject
			};
			const abort = () => {
				this.remove(jobExeId, waiter);
				reject(signal!.reason);
			};
			signal?.addEventListener("abort", abort, { once: true });
			let set = this.waiters.get(jobExeId);
			if (!set) this.waiters.set(jobExeId, (set = new Set()));
			set.add(waiter);
			this.schedule();
			// a new waiter is answered by a read of its own (it may run already)
			this.readNow();
		});
	}

	/** These executions were placed or canceled: those waited for are read now. */
	changed(ids: readonly number[]): void {
		if (ids.some(id => this.waiters.has(id))) this.readNow();
	}

	private remove(jobExeId: number, waiter: Waiter): void {
		const set = this.waiters.get(jobExeId);
		if (!set) return;
		set.delete(waiter);
		if (set.size === 0) this.waiters.delete(jobExeId);
		if (this.waiters.size === 0 && this.timer) {
			clearInterval(this.timer);
			this.timer = null;
		}
	}

	private schedule(): void {
		if (this.timer) return;
		this.timer = setInterval(() => this.readNow(), this.pollMs);
		this.timer.unref?.();
	}

	/** One read at a time; a read asked for meanwhile runs once after it. */
	private readNow(): void {
		if (this.reading) {
			this.again = true;
			return;
		}
		const ids = [...this.waiters.keys()];
		if (ids.length === 0) return;
		this.reading = this.read(ids)
			.then(rows => {
				const found = new Map(rows.map(r => [r.id, r]));
				for (const id of ids) {
					const state = found.get(id) ?? { id, status: "CANCELED", agent_id: null };
					if (!settled(state)) continue;
					for (const waiter of this.waiters.get(id) ?? []) {
						this.remove(id, waiter);
						waiter.resolve(state);
					}
				}
			})
			// a failed read is tried again at the next poll
			.catch(() => undefined)
			.finally(() => {
				this.reading = null;
				if (this.again) {
					this.again = false;
					this.readNow();
				}
			});
	}
}

/** Where a followed execution's log comes from (the services' calls). */
export interface LogSources {
	waits: ExecutionWaits;
	/** the agent's stream of the execution's frames (node-agent.followLogs) */
	follow(jobExeId: number, agentId: string): Promise<Readable>;
	/** tells the agent this process follows the execution no more (node-agent.unfollowLogs) */
	unfollow(jobExeId: number, agentId: string): void;
	/** an ended execution's stored logs */
	stored(jobExeId: number): Promise<{ stdout: string; stderr: string } | null>;
	/** an attempt at the agent failed (its run not there yet, or no answer): tried again */
	retrying?(jobExeId: number, error: unknown): void;
	/** the longest pause between attempts at the agent (from 50 ms, doubled each time) */
	retryMs?: number;
}

/**
 * An execution's log for LogFollowers: once it runs, its agent's stream; once it has ended
 * (also before it ever ran), its stored logs, as frames. The agent may not hold a run placed a
 * moment ago yet: it is asked again, ever less often, while the execution runs there.
 */
export async function openExecutionLog(
	sources: LogSources,
	jobExeId: number,
	signal: AbortSignal
): Promise<OpenedLog> {
	for (let pause = 50; ; pause = Math.min(2 * pause, sources.retryMs ?? 1000)) {
		const state = await sources.waits.until(jobExeId, signal);
		if (state.status !== "RUNNING" || !state.agent_id) {
			const logs = await sources.stored(jobExeId);
			return { source: Readable.from(storedFrames(logs)) };
		}
		const agentId = state.agent_id;
		try {
			const source = await sources.follow(jobExeId, agentId);
			return { source, release: () => sources.unfollow(jobExeId, agentId) };
		} catch (error) {
			if (signal.aborted) throw signal.reason;
			sources.retrying?.(jobExeId, error);
			await sleep(pause, undefined, { signal });
		}
	}
}

/** Stored logs as a source's frames: all of it written before, then live, then the end. */
function storedFrames(logs: { stdout: string; stderr: string } | null): Buffer[] {
	const frames: Buffer[] = [];
	if (logs?.stdout) frames.push(encodeFrame("stdout", Buffer.from(logs.stdout)));
	if (logs?.stderr) frames.push(encodeFrame("stderr", Buffer.from(logs.stderr)));
	frames.push(encodeFrame("live"));
	return frames;
}
