import type { Context, Middleware, ServiceBroker } from "moleculer";
import { DatabaseUnavailableError } from "../errors";
import { isConnectionError } from "./unavailable";

/**
 * The database URL of each broker in this process. It is kept here, not in the broker's
 * `metadata` or options: Moleculer sends a node's metadata to every peer in its INFO packets and
 * answers `$node.options` with its options, and the URL carries the password.
 */
const urls = new WeakMap<ServiceBroker, string>();

/**
 * An action's error that says PostgreSQL cannot be reached, as a DatabaseUnavailableError (503 at
 * the gateway): sent to another node, an error keeps its own type and code but not the pg error
 * Sequelize wrapped, so the gateway could not tell an outage from a bug.
 */
function unavailableAsRetryable(next: (ctx: Context) => Promise<unknown>) {
	return (ctx: Context) =>
		next(ctx).catch((err: unknown) => {
			throw isConnectionError(err)
				? new DatabaseUnavailableError(String((err as Error)?.message ?? err))
				: err;
		});
}

/**
 * A middleware that ties `url` to the broker it is given to, before any service is created. The
 * URL lives in this closure only, so a serialised middleware list shows nothing of it. A broker
 * with a database also has its actions' connection errors answered as DatabaseUnavailableError.
 */
export function DatabaseMiddleware(url: string | null): Middleware {
	const middleware: Middleware = {
		name: "Database",
		created(broker: ServiceBroker) {
			if (url) urls.set(broker, url);
		}
	} as Middleware;
	if (url) middleware.localAction = unavailableAsRetryable;
	return middleware;
}

/** The database URL of `broker`'s process, or null when it runs no database service. */
export function databaseUrlOf(broker: ServiceBroker): string | null {
	return urls.get(broker) ?? null;
}
