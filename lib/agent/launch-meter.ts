import type { LaunchState } from "../documents/agent-protocol";

/**
 * The agent's launch pipeline as the scheduler's launch window needs it (lib/scheduling/
 * launch-window.ts): its backlog (executions accepted and not launched yet: staging their
 * inputs, or waiting for a launcher) and how fast its launcher goes.
 *
 * The rate is the launcher's: launches over the time it held at least one, per busy stretch,
 * the best of the recent stretches (it halves every 10 s without a better one). Launches per
 * second of the whole pipeline would say what it was given, and a window sized on them would
 * shrink with it: a small window keeps few in flight, fewer launches a second, a smaller window.
 * And a stretch of one launch says its latency more than the launcher's rate (on a busy machine
 * a few ms of waiting for the event loop, where 20 at once take barely longer): the best stretch
 * of late is what the launcher can do (docs/decisions.md, "A launch window per agent").
 */
export class LaunchMeter {
	/** accepted, not launched */
	private readonly waiting = new Set<number>();
	/** in the launcher's hands */
	private readonly launching = new Set<number>();
	/** the best rate of the recent busy stretches (launches/s), and when it was last raised */
	private best = 0;
	private bestAt = 0;
	/** when the launcher's current busy stretch began (ms), and its launches since */
	private busySince = 0;
	private busyLaunches = 0;

	constructor(private readonly now: () => number = () => performance.now()) {}

	/** An execution was accepted: it is in the backlog until launched or dropped. */
	accepted(jobExeId: number): void {
		this.waiting.add(jobExeId);
	}

	/** Its launch was asked of the launcher. */
	launchAsked(jobExeId: number): void {
		if (!this.waiting.has(jobExeId)) return;
		if (this.launching.size === 0) {
			this.busySince = this.now();
			this.busyLaunches = 0;
		}
		this.launching.add(jobExeId);
	}

	/** Its process was launched: it leaves the pipeline. */
	launched(jobExeId: number): void {
		this.waiting.delete(jobExeId);
		if (!this.launching.delete(jobExeId)) return;
		this.busyLaunches++;
		const at = this.now();
		// a stretch is counted when the launcher is idle again, or every 50 ms of a long one
		if (this.launching.size > 0 && at - this.busySince < 50) return;
		const elapsed = at - this.busySince;
		// a stretch shorter than a millisecond says little of a rate
		if (elapsed >= 1) {
			const rate = (this.busyLaunches * 1000) / elapsed;
			if (rate >= this.decayed(at)) {
				this.best = rate;
				this.bestAt = at;
			}
		}
		this.busySince = at;
		this.busyLaunches = 0;
	}

	/** The best rate, halved for each 10 s since it was seen. */
	private decayed(at: number): number {
		return this.best * Math.pow(2, -(at - this.bestAt) / 10_000);
	}

	/** It ended without being launched (canceled, failed in pre or at its launch). */
	dropped(jobExeId: number): void {
		this.waiting.delete(jobExeId);
		this.launching.delete(jobExeId);
	}

	/** What the scheduler is told (the answer to node-agent.run). */
	state(): LaunchState {
		const rate = this.decayed(this.now());
		return { rate: Math.round(rate * 10) / 10, backlog: this.waiting.size };
	}
}
