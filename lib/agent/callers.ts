import { ForbiddenError } from "../errors";

/**
 * Who may call whom among the cluster's nodes: reports name the agent that sends them, and an
 * agent runs only what the scheduler leading now (by PostgreSQL's advisory lock) sends. `sender`
 * (`ctx.nodeID`) is the calling node's ID as NATS enforced it: the transporter drops a packet
 * whose sender is not the one of the subject its identity may publish on
 * (lib/transport/bound-nats.ts).
 */

/** The calling node of an action's context, and the node that runs it. */
export interface CallContext {
	nodeID?: string | null;
	broker: { nodeID: string };
}

/** A call from this very process (its services trust one another). */
export function isLocalCall(ctx: CallContext): boolean {
	return ctx.nodeID === ctx.broker.nodeID;
}

/** Refuses a report from another node whose agentId is not the node that sent it. */
export function requireSender(ctx: CallContext, agentId: string, what: string): void {
	if (!isLocalCall(ctx) && ctx.nodeID !== agentId)
		throw new ForbiddenError(
			`${what} names agent "${agentId}" but comes from node "${ctx.nodeID}": an agent reports only for itself`
		);
}

/**
 * The agent's view of the scheduler's leader: a nodeID, asked of the control plane (which reads
 * it from the advisory lock's holder) when a sender is not the leader known here. The question
 * goes to the sender's own `nodes` service where it has one (it is alive: it has just called,
 * while the registry may still list a replica that died a moment ago). One question per sender
 * at a time; a sender refused within `refusalMemoryMs` is refused again without asking, so a
 * flood of calls from elsewhere costs the database nothing.
 */
export class LeaderView {
	private leader: string | null = null;
	private readonly asking = new Map<string, Promise<string | null>>();
	private readonly refused = new Map<string, number>();

	constructor(
		private readonly askLeader: (sender: string) => Promise<string | null>,
		private readonly refusalMemoryMs = 1000,
		private readonly now: () => number = Date.now
	) {}

	/** True when `sender` leads the scheduler now. */
	async isLeader(sender: string): Promise<boolean> {
		if (sender === this.leader) return true;
		const until = this.refused.get(sender);
		if (until !== undefined && until > this.now()) return false;
		let question = this.asking.get(sender);
		if (!question) {
			question = this.askLeader(sender).finally(() => this.asking.delete(sender));
			this.asking.set(sender, question);
		}
		let leader: string | null;
		try {
			leader = await question;
		} catch {
			return false;
		}
		this.leader = leader;
		if (sender === leader) return true;
		if (this.refused.size > 1000) this.refused.clear();
		this.refused.set(sender, this.now() + this.refusalMemoryMs);
		return false;
	}

	/** Forgets the leader (its node left): the next call asks again. */
	forget(nodeId: string): void {
		if (this.leader === nodeId) this.leader = null;
	}
}
