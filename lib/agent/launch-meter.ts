import type { LaunchState } from "../documents/agent-protocol";

/**
 * The agent's launch pipeline as the scheduler's launch window needs it (lib/scheduling/
 * launch-window.ts): its backlog (executions accepted and not launched yet: staging their
 * inputs, or waiting for a launcher) and how fast its launcher goes.
 *
 * The rate is the launcher's: launches counted while one at least is in its hands, over that
 * time. Launches per second of the whole pipeline would say what it was given, and a window
 * sized on them would shrink with it: a small window keeps few in flight, fewer launches a
 * second, a smaller window (docs/decisions.md, "A launch window per agent").
 */
export class LaunchMeter {
	/** accepted, not launched */
	private readonly waiting = new Set<number>();
	/** in the launcher's hands */
	private readonly launching = new Set<number>();
	/**
	 * Launches, and ms the launcher was busy, over the recent past (both halved once the time
	 * passes `horizonMs`): their ratio is the rate. A busy stretch counts by its length, so a
	 * slow first launch (the launcher starting) is outweighed by the next few fast ones.
	 */
	private launches = 0;
	private busyMs = 0;
	/** when the launcher's current busy stretch began (ms), and its launches since */
	private busySince = 0;
	private busyLaunches = 0;

	constructor(
		private readonly now: () => number = () => performance.now(),
		private readonly horizonMs = 500
	) {}

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
		this.launches += this.busyLaunches;
		this.busyMs += at - this.busySince;
		this.busySince = at;
		this.busyLaunches = 0;
		if (this.busyMs > this.horizonMs) {
			this.launches /= 2;
			this.busyMs /= 2;
		}
	}

	/** It ended without being launched (canceled, failed in pre or at its launch). */
	dropped(jobExeId: number): void {
		this.waiting.delete(jobExeId);
		this.launching.delete(jobExeId);
	}

	/** What the scheduler is told (the answer to node-agent.run). */
	state(): LaunchState {
		// below a millisecond of busy time, no rate is told yet
		const rate = this.busyMs >= 1 ? (this.launches * 1000) / this.busyMs : 0;
		return { rate: Math.round(rate * 10) / 10, backlog: this.waiting.size };
	}
}
