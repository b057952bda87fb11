import type { ActionSchema, Context, Service, ServiceSchema } from "moleculer";
import type { RestRoute } from "../lib/http/aliases";
import { runCachedList } from "../lib/list/cached-list";
import type { Embedded } from "../lib/list/embedded";
import type { RecordSpec } from "../lib/list/record-spec";
import { runList, type ListRequest } from "../lib/list/run";
import type { ListSource } from "../lib/list/types";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";

/**
 * A repeatable query parameter. qs turns one repeated more than 20 times into an object keyed
 * "0", "1", ... (lib/list/params reads both forms), so that form must pass validation too.
 */
export const REPEATABLE = {
	type: ["array", "object"],
	items: { type: "string" },
	additionalProperties: { type: "string" }
};

/** The JSON Schema of the paging and ordering parameters every list endpoint accepts. */
export const LIST_PARAMS = {
	page: { type: "integer", minimum: 1 },
	page_size: { type: "integer", minimum: 1, maximum: 1000 },
	order: REPEATABLE,
	started: { type: "string" },
	ended: { type: "string" }
};

/** A query-string params schema: the list parameters plus the endpoint's own. */
export function listParamsSchema(extra: Record<string, unknown> = {}) {
	return { [QUERY_SCHEMA]: true, type: "object", properties: { ...LIST_PARAMS, ...extra } };
}

type ListContext = Context<Record<string, unknown>, RequestMeta>;

/** The list request of an action's call: the gateway's parsed query and the request's URLs. */
export function listRequest(ctx: ListContext, path: string): ListRequest {
	return {
		query: ctx.meta.query ?? ctx.params,
		baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
		path: ctx.meta.path ?? path
	};
}

/**
 * An action answering the list envelope over `source`, its filters taken as repeatable query
 * parameters, each page's rows passed through `serialize` (which gets the call, for the API
 * root of download URLs, and the service, for its database). `path` is the list's own path,
 * for next/previous links of calls that do not come through the gateway (default
 * `/api/<service name>/`).
 */
export function listAction<Row, S extends Service<any> = Service>(
	source: ListSource,
	serialize: (this: S, rows: Row[], ctx: ListContext) => unknown[] | Promise<unknown[]>,
	path?: string
): ActionSchema<S> {
	const filterParams = Object.fromEntries(
		Object.keys(source.filters).map(name => [name, REPEATABLE])
	);
	return {
		params: jsonParams(listParamsSchema(filterParams)),
		handler(this: S, ctx: ListContext) {
			return runList(
				this.db,
				source,
				listRequest(ctx, path ?? `/api/${this.name}/`),
				(rows: Row[]) => serialize.call(this, rows, ctx)
			);
		}
	};
}

/**
 * A list action whose records are cached by version (lib/list/cached-list.ts). Called by the
 * gateway it answers the envelope's JSON in a Buffer, sent as it is; called by anything else,
 * the envelope as an object. `embedded` names the records each record embeds that are kept apart.
 */
export function cachedListAction<Row>(
	source: ListSource,
	spec: RecordSpec<Row>,
	path?: string,
	embedded?: Embedded
): ActionSchema {
	const filterParams = Object.fromEntries(
		Object.keys(source.filters).map(name => [name, REPEATABLE])
	);
	return {
		params: jsonParams(listParamsSchema(filterParams)),
		async handler(this: Service, ctx: ListContext) {
			const json = await runCachedList(
				this.db,
				source,
				spec,
				listRequest(ctx, path ?? `/api/${this.name}/`),
				ctx.meta.apiRoot,
				embedded
			);
			return jsonAnswer(ctx, json);
		}
	};
}

/**
 * An answer made as JSON text (UTF-8): sent as it is when the gateway called the action (it names
 * the action in `jsonTextFor`), parsed for any other caller (`broker.call`, the REPL).
 */
export function jsonAnswer(ctx: Context<unknown, RequestMeta>, json: Buffer): unknown {
	if (ctx.meta.jsonTextFor !== undefined && ctx.meta.jsonTextFor === ctx.action?.name) {
		ctx.meta.$responseType = "application/json; charset=utf-8";
		return json;
	}
	return JSON.parse(json.toString());
}

/** Gives a service a `list` action (see listAction) over `source`, served on `rest`. */
export function ListMixin<Row>(
	source: ListSource,
	serialize: (rows: Row[]) => unknown[] | Promise<unknown[]>,
	rest: RestRoute
): Partial<ServiceSchema> {
	return { actions: { list: { rest, ...listAction<Row>(source, rows => serialize(rows)) } } };
}
