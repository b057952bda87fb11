import type { LaunchState } from "../documents/agent-protocol";

/**
 * The agent's launch pipeline as the scheduler's launch window needs it (lib/scheduling/
 * launch-window.ts): its backlog (executions accepted and not launched yet: staging their
 * inputs, or waiting for a launcher) and the rate it launches at.
 *
 * The rate is the pipeline's while it has a backlog (launches over the time it was not empty, a
 * stretch at a time: staging included, which is where a busy machine is slow), the best stretch of
 * late (halved every 10 s unbeaten). The mean of the stretches would follow what the agent was
 * given: a small window keeps few in flight, whose launches take their latency rather than the
 * launcher's rate, so fewer a second, so a smaller window (docs/decisions.md, "A launch window
 * per agent").
 */
export class LaunchMeter {
	/** accepted, not launched */
	private readonly waiting = new Set<number>();
	/** the best rate of the recent stretches (launches/s), and when it was last raised */
	private best = 0;
	private bestAt = 0;
	/** when the current stretch with a backlog began (ms), and its launches since */
	private busySince = 0;
	private busyLaunches = 0;

	constructor(private readonly now: () => number = () => performance.now()) {}

	/** An execution was accepted: it is in the backlog until launched or dropped. */
	accepted(jobExeId: number): void {
		if (this.waiting.size === 0) {
			this.busySince = this.now();
			this.busyLaunches = 0;
		}
		this.waiting.add(jobExeId);
	}

	/** Its process was launched: it leaves the pipeline. */
	launched(jobExeId: number): void {
		if (!this.waiting.delete(jobExeId)) return;
		this.busyLaunches++;
		const at = this.now();
		const elapsed = at - this.busySince;
		// a stretch is counted when the backlog is empty again, or every 50 ms of a long one
		if (this.waiting.size > 0 && elapsed < 50) return;
		// one of less than 2 ms says little of a rate
		if (elapsed >= 2) {
			const rate = (this.busyLaunches * 1000) / elapsed;
			if (rate >= this.decayed(at)) {
				this.best = rate;
				this.bestAt = at;
			}
		}
		this.busySince = at;
		this.busyLaunches = 0;
	}

	/** It ended without being launched (canceled, failed in pre or at its launch). */
	dropped(jobExeId: number): void {
		this.waiting.delete(jobExeId);
	}

	/** The best rate, halved for each 10 s since it was seen. */
	private decayed(at: number): number {
		return this.best * Math.pow(2, -(at - this.bestAt) / 10_000);
	}

	/** What the scheduler is told (the answer to node-agent.run). */
	state(): LaunchState {
		return {
			rate: Math.round(this.decayed(this.now()) * 10) / 10,
			backlog: this.waiting.size
		};
	}
}
