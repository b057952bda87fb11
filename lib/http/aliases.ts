/**
 * The REST route table, built from the `rest:` of each service's actions (Moleculer's
 * TypeScript template style). Nothing else is exposed; internal actions stay internal. Paths are
 * written without the trailing slash: the gateway matches both forms.
 */
import type { ServiceSchema } from "moleculer";

/**
 * An action's route, as moleculer-web's autoAliases reads it: `"METHOD /path"`, or an object
 * whose `handler` runs before the action (a connect-style middleware). Paths are under the
 * gateway's route (`/api`, `/api/v3`), not under the service's name.
 */
export type RestRoute =
	| string
	| {
			method: string;
			path: string;
			handler?: (req: any, res: any, next: (err?: unknown) => void) => void;
	  };

declare module "moleculer" {
	interface ActionSchema {
		/** the action's public route(s); an action without one is not reachable over HTTP */
		rest?: RestRoute | RestRoute[];
	}
}

/** moleculer-web's alias table: `"METHOD path"` → action, or [middleware, action]. */
export type Aliases = Record<string, string | unknown[]>;

/**
 * The gateway's alias table from the services' schemas (their actions' and their mixins'
 * `rest:`). Built once at start from every service the code holds, not from the services the
 * registry lists (autoAliases): a route is served whether its service runs here, on another
 * node or not yet, and no peer can add one by announcing a service.
 */
export function aliasesFrom(schemas: Partial<ServiceSchema>[]): Aliases {
	const aliases: Aliases = {};
	for (const { method, path, actionName, route } of routesOf(schemas)) {
		const key = `${method} ${path.replace(/^\/+/, "")}`;
		if (key in aliases) throw new Error(`Two actions claim the route ${key}`);
		aliases[key] =
			typeof route === "object" && route.handler ? [route.handler, actionName] : actionName;
	}
	return aliases;
}

/** One route of an action: its method, path (`/jobs/:id`), action and schema. */
export interface ActionRoute {
	method: string;
	path: string;
	actionName: string;
	action: Record<string, unknown>;
	route: RestRoute;
}

/** Every route the services' actions (and their mixins' actions) declare, in order. */
export function* routesOf(schemas: Partial<ServiceSchema>[]): Generator<ActionRoute> {
	for (const schema of schemas) {
		const actions = Object.assign(
			{},
			...(schema.mixins ?? []).map(mixin => mixin.actions ?? {}),
			schema.actions ?? {}
		);
		for (const [name, action] of Object.entries(actions)) {
			if (typeof action !== "object" || action === null || !("rest" in action)) continue;
			const rest = action.rest as RestRoute | RestRoute[] | undefined;
			for (const route of rest === undefined ? [] : Array.isArray(rest) ? rest : [rest]) {
				const [method, path] =
					typeof route === "string" ? route.split(/\s+/) : [route.method, route.path];
				yield {
					method,
					path,
					actionName: `${schema.name}.${name}`,
					action: action as Record<string, unknown>,
					route
				};
			}
		}
	}
}

/** Path parameters that are integer ids: anything else in their place is a 404, as in Scale. */
export const ID_PARAMS = ["id"];

/**
 * Requests whose errors the spec answers in text/plain: job update and the node details,
 * replace and update endpoints. Matched on the raw path, because a body that fails to parse
 * fails before the route's alias is resolved.
 */
export function answersInPlainText(method: string | undefined, path: string): boolean {
	const p = path.split("?")[0].replace(/\/+$/, "");
	if (method === "PATCH" && /\/api(\/v3)?\/jobs\/[^/]+$/.test(p)) return true;
	return (
		(method === "GET" || method === "PUT" || method === "PATCH") &&
		/\/api(\/v3)?\/nodes\/[^/]+$/.test(p) &&
		!/\/nodes\/status$/.test(p)
	);
}
