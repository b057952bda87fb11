import type { Middleware, ServiceBroker } from "moleculer";

/**
 * The database URL of each broker in this process. It is kept here, not in the broker's
 * `metadata` or options: Moleculer sends a node's metadata to every peer in its INFO packets and
 * answers `$node.options` with its options, and the URL carries the password.
 */
const urls = new WeakMap<ServiceBroker, string>();

/**
 * A middleware that ties `url` to the broker it is given to, before any service is created. The
 * URL lives in this closure only, so a serialised middleware list shows nothing of it.
 */
export function DatabaseMiddleware(url: string | null): Middleware {
	return {
		name: "Database",
		created(broker: ServiceBroker) {
			if (url) urls.set(broker, url);
		}
	} as Middleware;
}

/** The database URL of `broker`'s process, or null when it runs no database service. */
export function databaseUrlOf(broker: ServiceBroker): string | null {
	return urls.get(broker) ?? null;
}
