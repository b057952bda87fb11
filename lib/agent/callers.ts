import type { ActionSchema, Context, Middleware, Service } from "moleculer";
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
 * Who may call an action (besides this process's own services), as metadata on the action:
 * - `{ agentNamed: what }`: a report of the agent its params name (`agentId`; each item's, for
 *   `each: "steps"` or `"reports"` when the params hold several), refused with requireSender's
 *   error naming `what`;
 * - `"scheduler-leader"`: the node leading the scheduler now, read through the service's
 *   `leaders` (a LeaderView), for runs (`{ executions }` or one spec);
 * - `"stop-confirmed"`: any node, when a control plane (`nodes.mustStop`) confirms the
 *   execution (`jobExeId`) must not run here, asked with the service's `callTimeoutMs`;
 * - `"execution-reader"`: a node running a `job-executions` service, for live logs.
 */
export type CallerRule =
	| { agentNamed: string; each?: "steps" | "reports" }
	| "scheduler-leader"
	| "stop-confirmed"
	| "execution-reader";

declare module "moleculer" {
	interface ActionSchema {
		/** who may call the action: checked by CallerCheckMiddleware once its params are valid */
		caller?: CallerRule;
	}
}

type Params = Record<string, any>;
type CallerService = Service & { leaders?: LeaderView; settings: { callTimeoutMs?: number } };

/** Throws the refusal of `rule` for this call, from another node (the check as its handler had it). */
async function checkCaller(rule: CallerRule, ctx: Context<Params>, service: CallerService) {
	const params = ctx.params;
	const sender = ctx.nodeID as string;
	if (typeof rule === "object") {
		const items: Params[] =
			rule.each !== undefined && rule.each in params ? params[rule.each] : [params];
		for (const item of items) requireSender(ctx, item.agentId, rule.agentNamed);
	} else if (rule === "scheduler-leader") {
		const specs: Params[] = "executions" in params ? params.executions : [params];
		if (!(await (service.leaders as LeaderView).isLeader(sender)))
			throw new ForbiddenError(
				`node "${sender}" does not lead the scheduler: execution${specs.length > 1 ? "s" : ""} ${specs.map(s => s.jobExeId).join(", ")} not run`
			);
	} else if (rule === "stop-confirmed") {
		const jobExeId: number = params.jobExeId;
		// obeyed only when the database says the execution must not run here
		const answer = await ctx.broker.call<{ jobExeIds: number[] }, unknown>(
			"nodes.mustStop",
			{ jobExeIds: [jobExeId] },
			{ timeout: service.settings.callTimeoutMs }
		);
		if (!answer?.jobExeIds?.includes(jobExeId))
			throw new ForbiddenError(
				`execution ${jobExeId} is to run here as far as the control plane knows: cancel from "${sender}" refused`
			);
	} else {
		const readers = ctx.broker.registry
			.getServiceList({ onlyAvailable: true })
			.filter(svc => svc.name === "job-executions")
			.map(svc => svc.nodeID);
		if (!readers.includes(sender))
			throw new ForbiddenError(
				`node "${sender}" runs no job-executions service: logs are not sent to it`
			);
	}
}

/**
 * Enforces each action's `caller` rule before its handler runs; an action without one is not
 * wrapped (no cost on the gateway's calls). Registered first in the broker's middlewares, so
 * inside the validator: the params it reads have been checked.
 */
export function CallerCheckMiddleware(): Middleware {
	return {
		name: "CallerCheck",
		localAction(next: (ctx: Context<Params>) => Promise<unknown>, action: ActionSchema) {
			const rule = action.caller;
			if (rule === undefined) return next;
			const service = action.service as CallerService;
			return async (ctx: Context<Params>) => {
				if (!isLocalCall(ctx)) await checkCaller(rule, ctx, service);
				return next(ctx);
			};
		}
	};
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
