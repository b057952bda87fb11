/** What the scheduler's view of its agents' reachability needs of the scheduler service. */
export interface ReachabilityLink {
	/** the agents the registry lists now */
	agents(): string[];
	/** pings `ids` (Moleculer's PING); resolves with those that answered within `timeoutMs` */
	ping(ids: string[], timeoutMs: number): Promise<string[]>;
	/** agents became reachable: a pass may place work on them */
	wake(): void;
}

export interface ReachabilityOptions {
	/** how long a ping may take, and how often the agents that have not answered are pinged */
	probeMs: number;
	/** how long after a reconnect an agent that has not answered is passed over */
	windowMs: number;
	now?: () => number;
}

/**
 * Which agents a run can reach now, as far as this process's own NATS connection goes.
 *
 * While this process is cut off from NATS, none: a run sent then is lost (nats.js keeps it until
 * the reconnect, when its agent may not be back yet), and its call times out 10 s later and
 * fails the execution as node-lost. After the reconnect, an agent is reached only once it has
 * answered a ping: every process reconnects on its own (250–500 ms apart, lib/transport/nats.ts),
 * and a run published before its agent's subscriptions are back goes nowhere. The agents that
 * have not answered are pinged every `probeMs` until all have, or `windowMs` passes; after
 * that every agent the registry lists is taken again (one gone for good is found by its lease).
 */
export class AgentReachability {
	private cutOff = false;
	/** after a reconnect: until then, only agents that answered are reached */
	private confirmUntil = 0;
	private readonly confirmed = new Set<string>();
	private probing = false;
	private stopped = false;
	private readonly now: () => number;

	constructor(
		private readonly link: ReachabilityLink,
		private readonly opts: ReachabilityOptions
	) {
		this.now = opts.now ?? Date.now;
	}

	/** This process lost its NATS connection. */
	down(): void {
		this.cutOff = true;
	}

	/** This process is back on NATS: its agents are confirmed one by one. */
	up(): void {
		this.cutOff = false;
		this.confirmed.clear();
		this.confirmUntil = this.now() + this.opts.windowMs;
		void this.probe();
	}

	/** Whether agents are being confirmed after a reconnect (or none is reached at all). */
	get confirming(): boolean {
		return this.cutOff || this.now() < this.confirmUntil;
	}

	/** Those of `ids` a run can reach now. */
	usable(ids: string[]): string[] {
		if (this.cutOff) return [];
		if (this.now() >= this.confirmUntil) return ids;
		return ids.filter(id => this.confirmed.has(id));
	}

	stop(): void {
		this.stopped = true;
	}

	private async probe(): Promise<void> {
		if (this.probing) return;
		this.probing = true;
		try {
			while (!this.stopped && !this.cutOff && this.now() < this.confirmUntil) {
				const waiting = this.link.agents().filter(id => !this.confirmed.has(id));
				if (waiting.length === 0) {
					// every agent listed has answered; one listed later announced itself after
					// the reconnect (its INFO), so it is reached as any other
					this.confirmUntil = 0;
					break;
				}
				const started = this.now();
				const answered = await this.link.ping(waiting, this.opts.probeMs).catch(() => []);
				if (this.cutOff) break;
				for (const id of answered) this.confirmed.add(id);
				if (answered.length > 0) this.link.wake();
				const rest = this.opts.probeMs - (this.now() - started);
				if (rest > 0) await new Promise(resolve => setTimeout(resolve, rest));
			}
		} finally {
			this.probing = false;
		}
		if (!this.stopped && !this.cutOff) this.link.wake();
	}
}
