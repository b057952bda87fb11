import type { LaunchState } from "../documents/agent-protocol";

/**
 * The launch window: the scheduler places on an agent no more executions than the agent will
 * launch within `windowMs`, a second cap after its free resources. What the agent cannot launch
 * soon stays queued, where work queued later but ranked earlier (a recipe's next job, a higher
 * priority) goes ahead of it, instead of waiting behind every launch placed before it on the
 * agent (docs/decisions.md, "A launch window per agent").
 *
 * The window follows each agent's pipeline as a queue that drains at its launch rate: placing n
 * executions adds n / rate to the time its backlog takes to drain (`drainAt`), and an agent takes
 * more only while that time is less than the window away. Each answer to `node-agent.run` tells
 * the agent's rate and backlog (lib/agent/launch-meter.ts), and resets the estimate to them, plus
 * what was placed on it after that call's executions (in flight). An agent that has not told a
 * rate (just started, or older than the window) has no window.
 *
 * An execution whose end queues more jobs of its recipe (queue.successors) holds that many
 * launches of its agent's window from its placement until its report is recorded (`hold`,
 * `release`): the jobs it frees then find room, rather than a window refilled meanwhile with
 * later recipes' first jobs, whose ends would in turn free twice as many (at saturation, B
 * waited behind the B and C of every A admitted before it). A hold lapses after `holdMs`, two
 * windows (its launch, then a short run and its report): what a longer job frees comes when it
 * ends, spread by its run time, and room held for it would only keep later work waiting.
 */

interface AgentWindow {
	/** launches a second while busy, as the agent last told (0: not told, no window) */
	rate: number;
	/** when its backlog is expected to have drained (ms, the clock given) */
	drainAt: number;
	/** executions placed on it so far, counted in order (for the answers' in-flight part) */
	placed: number;
	/** launches held for the jobs running executions will free, by execution id */
	held: Map<number, Hold>;
	heldTotal: number;
}

interface Hold {
	count: number;
	/** when it lapses (ms, the clock given): a long run, or a report lost with its agent */
	until: number;
}

export interface LaunchWindowOptions {
	/** how much of an agent's launches it is given at most, in ms of its launch rate */
	windowMs: number;
	/** executions an agent with an empty pipeline may take, however slow it launches */
	minimum: number;
	/** how long a hold lasts without its execution's report (ms from its placement) */
	holdMs: number;
}

export const DEFAULT_LAUNCH_WINDOW: LaunchWindowOptions = {
	windowMs: 50,
	minimum: 2,
	holdMs: 100
};

export class LaunchWindows {
	private readonly agents = new Map<string, AgentWindow>();

	constructor(
		private readonly options: LaunchWindowOptions = DEFAULT_LAUNCH_WINDOW,
		private readonly now: () => number = () => performance.now()
	) {}

	/**
	 * How many more executions the agent takes now (Infinity: no window). At least `minimum`
	 * less its backlog, so a slow launcher (a container engine) still has a few at once.
	 */
	room(agentId: string): number {
		const w = this.agents.get(agentId);
		if (!w || w.rate === 0) return Infinity;
		const backlog = this.backlogOf(w) + this.heldOf(w);
		const byRate = Math.floor(this.options.windowMs * (w.rate / 1000) - backlog + 1e-9);
		return Math.max(0, byRate, Math.floor(this.options.minimum - backlog + 1e-9));
	}

	/** The execution `exeId` placed on the agent holds `count` launches until its release. */
	hold(agentId: string, exeId: number, count: number): void {
		const w = this.agents.get(agentId);
		if (!w || count <= 0 || w.held.has(exeId)) return;
		w.held.set(exeId, { count, until: this.now() + this.options.holdMs });
		w.heldTotal += count;
	}

	/** These executions' reports are recorded: what they held is free. */
	release(exeIds: Iterable<number>): void {
		for (const w of this.agents.values()) {
			if (w.held.size === 0) continue;
			for (const id of exeIds) {
				const hold = w.held.get(id);
				if (hold === undefined) continue;
				w.held.delete(id);
				w.heldTotal -= hold.count;
			}
		}
	}

	/** The launches the agent's running executions hold, lapsed holds dropped. */
	private heldOf(w: AgentWindow): number {
		if (w.held.size === 0) return 0;
		const now = this.now();
		for (const [id, hold] of w.held)
			if (hold.until <= now) {
				w.held.delete(id);
				w.heldTotal -= hold.count;
			}
		return w.heldTotal;
	}

	/**
	 * `count` executions were placed on the agent: its backlog grows. Answers the token of its
	 * run call (what `told` needs to count what was placed after them).
	 */
	placed(agentId: string, count: number): number {
		let w = this.agents.get(agentId);
		if (!w)
			this.agents.set(
				agentId,
				(w = { rate: 0, drainAt: 0, placed: 0, held: new Map(), heldTotal: 0 })
			);
		if (w.rate > 0) w.drainAt = Math.max(w.drainAt, this.now()) + (count * 1000) / w.rate;
		w.placed += count;
		return w.placed;
	}

	/** `placed` for each agent of a batch of placements: its run calls' tokens, by agent. */
	placedOn(agentIds: readonly string[]): Map<string, number> {
		const counts = new Map<string, number>();
		for (const id of agentIds) counts.set(id, (counts.get(id) ?? 0) + 1);
		const tokens = new Map<string, number>();
		for (const [id, count] of counts) tokens.set(id, this.placed(id, count));
		return tokens;
	}

	/**
	 * An agent answered a run call (`token` from `placed` for its executions): its rate and
	 * backlog then, to which what was placed on it since is added. An answer without a measured
	 * rate changes nothing.
	 */
	told(agentId: string, launch: LaunchState | undefined, token: number): void {
		const w = this.agents.get(agentId);
		if (!w || !launch || !(launch.rate > 0) || !(launch.backlog >= 0)) return;
		w.rate = launch.rate;
		const after = Math.max(0, w.placed - token);
		w.drainAt = this.now() + ((launch.backlog + after) * 1000) / w.rate;
	}

	/** The backlog the agent is expected to have now. */
	private backlogOf(w: AgentWindow): number {
		return Math.max(0, w.drainAt - this.now()) * (w.rate / 1000);
	}

	/**
	 * In how many ms the first of `agentIds` whose window is closed has room again for a
	 * `share` of its window (at least one execution); null when none is closed. A pass for
	 * every launch would cost a placement statement each; reports wake passes in between.
	 */
	reopensIn(agentIds: Iterable<string>, share = 1 / 2): number | null {
		let soonest: number | null = null;
		const now = this.now();
		for (const id of agentIds) {
			const w = this.agents.get(id);
			if (!w || this.room(id) > 0) continue;
			// room for `want`: a backlog of at most window - want - held, or minimum - want -
			// held, executions; where the holds alone close it, when the first of them lapses
			// (their reports, which free them sooner, wake passes of their own)
			const step = 1000 / w.rate;
			const want = Math.max(1, Math.floor(this.options.windowMs * share * (w.rate / 1000)));
			const held = this.heldOf(w);
			const free = Math.max(
				this.options.windowMs - (want + held) * step,
				(this.options.minimum - want - held) * step
			);
			let at: number;
			if (free > 0 || held === 0) at = w.drainAt - free - now;
			else {
				at = Infinity;
				for (const hold of w.held.values()) at = Math.min(at, hold.until - now);
			}
			soonest = soonest === null ? at : Math.min(soonest, at);
		}
		return soonest === null ? null : Math.max(1, Math.ceil(soonest));
	}

	/** An agent that left: its window is forgotten (a new process measures anew). */
	forget(agentId: string): void {
		this.agents.delete(agentId);
	}
}
