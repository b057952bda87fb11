import { Errors, type Context, type Middleware, type ServiceBroker } from "moleculer";

/**
 * How long after its timeout a request still unanswered is given up for good. Moleculer's own
 * Timeout middleware answers the caller at the timeout; this one only lets go of what it leaves
 * behind, just after.
 */
const AFTER_TIMEOUT_MS = 5;

/**
 * A call to another node made, or still unanswered, while this process has no NATS connection:
 * nats.js discards what is published while it reconnects, and an answer published meanwhile
 * reaches no one, so such a call can only time out. It fails at once instead (retryable, 503 at
 * the gateway); the caller tries again once the connection is back.
 */
export class NatsCutOffError extends Errors.MoleculerRetryableError {
	constructor(action: string, nodeID?: string | null) {
		super(
			`this process is cut off from NATS: '${action}'${nodeID ? ` on node '${nodeID}'` : ""} not answered`,
			503,
			"BROKER_DISCONNECTED",
			{ action, nodeID: nodeID ?? null }
		);
	}
}

/** What this module reads of a transporter (lib/transport/bound-nats.ts) */
interface CutOffState {
	cutOff?: boolean;
}

/** Whether `broker`'s NATS connection is lost now (its transporter reconnects by itself). */
export function isCutOff(broker: ServiceBroker): boolean {
	const transit = broker.transit as unknown as { tx?: CutOffState } | undefined;
	return transit?.tx?.cutOff === true;
}

interface PendingRequests {
	removePendingRequest(id: string): void;
}

/**
 * Every call to another node ends by its timeout, for the caller and for the broker.
 *
 * Moleculer's Timeout middleware rejects the caller's promise at the timeout, but the request
 * itself stays in the transit's pending requests, and its context among the broker's tracked
 * contexts, until an answer comes: a request or an answer lost in a NATS outage never comes,
 * and the broker's stop then waited its whole shutdownTimeout for those contexts and ended in
 * GracefulStopTimeoutError. Registered among the user middlewares, this one wraps the transit's
 * request inside the ContextTracker: at the timeout (a few milliseconds after Moleculer's, which
 * answers the caller and logs it) it drops the pending request and settles the tracked promise.
 * A call without a timeout (0) is left as it is; the broker's requestTimeout gives every call one.
 * A call made while this process is cut off from NATS fails at once (NatsCutOffError), unsent.
 */
export function RequestDeadlineMiddleware(): Middleware {
	let broker: ServiceBroker | null = null;
	return {
		name: "RequestDeadline",
		created(b: ServiceBroker) {
			broker = b;
		},
		remoteAction(next: (ctx: Context) => Promise<unknown>) {
			return (ctx: Context) => {
				if (broker && isCutOff(broker))
					return broker.Promise.reject(
						new NatsCutOffError(ctx.action?.name ?? "", ctx.nodeID)
					);
				const sent = next(ctx);
				const timeout = Number(ctx.options?.timeout ?? 0);
				if (!(timeout > 0) || !broker) return sent;
				const transit = broker.transit as unknown as PendingRequests | undefined;
				return new broker.Promise((resolve, reject) => {
					const timer = setTimeout(() => {
						transit?.removePendingRequest(ctx.id);
						reject(
							new Errors.RequestTimeoutError({
								action: ctx.action?.name ?? "",
								nodeID: ctx.nodeID ?? ""
							} as any)
						);
					}, timeout + AFTER_TIMEOUT_MS);
					sent.then(
						value => {
							clearTimeout(timer);
							resolve(value);
						},
						(error: unknown) => {
							clearTimeout(timer);
							reject(error);
						}
					);
				});
			};
		}
	} as Middleware;
}
