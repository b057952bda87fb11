import type { Execution } from "./execution";

/**
 * A node's drains (lib/agent/agent.ts NodeAgent.drain): at most one at a time, from the
 * process's shutdown or a user's; what a drain holds, stops and waits for, and what it came to.
 */

/** How long the reports of executions stopped at once (hurry()) may take to be acknowledged. */
export const HURRIED_REPORT_MS = 2000;

/** How a drain began and how it goes (see NodeAgent.drain). */
export interface DrainOptions {
	/** why the node drains, for the failures' details: "the agent received SIGTERM" */
	why: string;
	/** how long running executions get to end by themselves (AGENT_DRAIN_S) */
	waitMs: number;
	/** how long the reports of the executions stopped then may take, past the kill grace */
	reportMs: number;
}

/** What a drain came to, for the agent's log. */
export interface DrainOutcome {
	/** executions that ended by themselves while the node drained */
	ended: number;
	/** executions stopped as `node-shutdown` (long-running ones at once, the rest after waitMs) */
	stopped: number;
	/** runs that arrived during the drain, handed back as `node-shutdown` without starting */
	handedBack: number;
	/** reports not acknowledged yet when the drain stopped waiting for them */
	undelivered: number;
	/** the drain was called off (undrain()) before it came to an end */
	undone: boolean;
}

interface DrainState {
	why: string;
	/** hurry()'s reason, once it was called */
	hurried: string | null;
	hurriedAt: number;
	undone: boolean;
	handedBack: number;
	/** the executions held when it began */
	held: Set<number>;
	/** executions stopped as node-shutdown */
	stopped: Set<number>;
	/** settles at the next wake(): hurry() or undrain() */
	woken: Promise<void>;
	wake(): void;
	done: Promise<DrainOutcome>;
}

/** What a drain reads of its agent. */
export interface DrainHost {
	/** the executions held here, by id */
	executions: ReadonlyMap<number, Execution>;
	/** each held execution's work until its report is acknowledged */
	work: ReadonlySet<Promise<void>>;
	killGraceMs(): number;
}

export class Drains {
	private state: DrainState | null = null;

	constructor(private readonly host: DrainHost) {}

	/**
	 * While the node drains, a run that arrives is handed back (counted): answers why the node
	 * drains; null when it does not.
	 */
	handBack(): string | null {
		if (!this.state) return null;
		this.state.handedBack++;
		return this.state.why;
	}

	/** Whether the node drains (start() called, not undone). */
	get active(): boolean {
		return this.state !== null;
	}

	/**
	 * Drains the node: from now on a run is handed back (see run()); long-running executions
	 * (which never end by themselves) are stopped at once; the others get `waitMs` to end and
	 * report, after which those still running (or not started) are stopped, their processes
	 * killed (SIGTERM, then SIGKILL after the kill grace) and reported FAILED as `node-shutdown`
	 * with `why` in their detail and the last line of their stderr. An execution whose process
	 * has ended and whose outputs are being stored is let finish. Resolves once every report
	 * here is acknowledged, or `reportMs` after the kill grace that followed the stop (2 s after
	 * hurry()). The agent stays drained, handing runs back, until undrain(); a drain asked for
	 * while one is under way answers that one.
	 */
	start(options: DrainOptions): Promise<DrainOutcome> {
		if (this.state) return this.state.done;
		let wake!: () => void;
		const state: DrainState = {
			why: options.why,
			hurried: null,
			hurriedAt: 0,
			undone: false,
			handedBack: 0,
			held: new Set(this.host.executions.keys()),
			stopped: new Set(),
			woken: new Promise<void>(resolve => (wake = resolve)),
			wake: () => {
				const woke = wake;
				state.woken = new Promise<void>(resolve => (wake = resolve));
				woke();
			},
			done: Promise.resolve(null as unknown as DrainOutcome)
		};
		this.state = state;
		state.done = this.runDrain(state, options);
		return state.done;
	}

	private async runDrain(state: DrainState, options: DrainOptions): Promise<DrainOutcome> {
		const at = (ms: number) => Date.now() + ms;
		const stop = (execution: Execution, detail: string, now = false) => {
			if (execution.shutdown(detail, now)) state.stopped.add(execution.spec.jobExeId);
		};
		for (const execution of this.host.executions.values())
			if (execution.spec.jobType.isLongRunning)
				stop(
					execution,
					`the node was shut down (${state.why}); a long-running execution is stopped at once`
				);
		const waitUntil = at(options.waitMs);
		await this.settle(state, () => (state.hurried || state.undone ? 0 : waitUntil));
		const outcome = () => this.outcomeOf(state);
		if (state.undone) return outcome();
		const seconds = Math.round(options.waitMs / 100) / 10;
		for (const execution of this.host.executions.values())
			stop(
				execution,
				state.hurried
					? `the node was shut down at once (${state.hurried})`
					: `the node was shut down (${state.why}) and the execution had not ended within the drain time of ${seconds} s`,
				state.hurried !== null
			);
		const reportUntil = at(this.host.killGraceMs() + options.reportMs);
		await this.settle(state, () =>
			state.hurried ? Math.min(reportUntil, state.hurriedAt + HURRIED_REPORT_MS) : reportUntil
		);
		return outcome();
	}

	private outcomeOf(state: DrainState): DrainOutcome {
		return {
			ended: [...state.held].filter(
				id => !this.host.executions.has(id) && !state.stopped.has(id)
			).length,
			stopped: state.stopped.size,
			handedBack: state.handedBack,
			undelivered: this.host.work.size,
			undone: state.undone
		};
	}

	/** What the drain under way (or over, the node still drained) has come to so far. */
	outcome(): DrainOutcome | null {
		return this.state && this.outcomeOf(this.state);
	}

	/**
	 * Resolves true once nothing is held here (no execution, no report unacknowledged), false
	 * after `ms` (or 2 s after hurry()): a drain that is over waits so for the runs handed back
	 * since (placed before the control plane knew of the drain) to be reported.
	 */
	async idle(ms: number): Promise<boolean> {
		const state = this.state;
		if (!state) return this.host.work.size === 0;
		const until = Date.now() + ms;
		return this.settle(state, () =>
			state.hurried ? Math.min(until, state.hurriedAt + HURRIED_REPORT_MS) : until
		);
	}

	/**
	 * Waits until nothing is held here (no execution, no report unacknowledged) or `deadline()`
	 * passes, asking it again whenever the drain is woken; answers whether nothing is held.
	 */
	private async settle(state: DrainState, deadline: () => number): Promise<boolean> {
		while (this.host.work.size > 0) {
			const left = deadline() - Date.now();
			if (left <= 0) return false;
			let timer: NodeJS.Timeout | undefined;
			await Promise.race([
				Promise.all([...this.host.work]),
				new Promise(resolve => (timer = setTimeout(resolve, left))),
				state.woken
			]);
			clearTimeout(timer);
		}
		return true;
	}

	/**
	 * Cuts a drain short (a second SIGTERM or SIGINT): the executions still running are killed
	 * at once (SIGKILL) and reported as `node-shutdown` with `why`; their reports get 2 s.
	 */
	hurry(why: string): void {
		const state = this.state;
		if (!state || state.hurried) return;
		state.hurried = why;
		state.hurriedAt = Date.now();
		for (const execution of this.host.executions.values())
			if (execution.shutdown(`the node was shut down at once (${why})`, true))
				state.stopped.add(execution.spec.jobExeId);
		state.wake();
	}

	/**
	 * Calls a drain off (a user's drain ended): runs are taken again. Executions stopped already
	 * stay stopped; the others go on.
	 */
	undo(): void {
		const state = this.state;
		if (!state) return;
		this.state = null;
		state.undone = true;
		state.wake();
	}
}
