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
	/** launches/s while the launcher is busy, smoothed; 0 until measured */
	private smoothed = 0;
	/** when the launcher's current busy stretch began (ms), and its launches since */
	private busySince = 0;
	private busyLaunches = 0;

	constructor(
		private readonly now: () => number = () => performance.now(),
		/** a busy stretch is folded into the rate once it is this long (or ends) */
		private readonly sampleMs = 100
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
		const elapsed = at - this.busySince;
		if (this.launching.size === 0 || elapsed >= this.sampleMs) {
			// less than a tenth of a millisecond says nothing about a rate
			if (elapsed >= 0.1) this.fold((this.busyLaunches * 1000) / elapsed, elapsed);
			this.busySince = at;
			this.busyLaunches = 0;
		}
	}

	/** It ended without being launched (canceled, failed in pre or at its launch). */
	dropped(jobExeId: number): void {
		this.waiting.delete(jobExeId);
		this.launching.delete(jobExeId);
	}

	private fold(rate: number, elapsedMs: number): void {
		// a sample weighs by its length: a full one half the estimate, a short one less
		const weight = Math.min(1, elapsedMs / this.sampleMs) / 2;
		this.smoothed =
			this.smoothed === 0 ? rate : this.smoothed + (rate - this.smoothed) * weight;
	}

	/** What the scheduler is told (the answer to node-agent.run). */
	state(): LaunchState {
		return { rate: Math.round(this.smoothed * 10) / 10, backlog: this.waiting.size };
	}
}
