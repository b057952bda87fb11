import type { Context, ServiceSchema } from "moleculer";
import { runList, type ListSource } from "../lib/list/run";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";

/**
 * A repeatable query parameter. qs turns one repeated more than 20 times into an object keyed
 * "0", "1", ... (lib/list/params reads both forms), so that form must pass validation too.
 */
const REPEATABLE = {
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

/**
 * Gives a service a `list` action answering the list envelope over `source`, with every row
 * passed through `serialize`. Filters declared in the source are repeatable query parameters.
 */
export function ListMixin<Row>(
	source: ListSource,
	serialize: (rows: Row[]) => unknown[] | Promise<unknown[]>
): Partial<ServiceSchema> {
	const filterParams = Object.fromEntries(
		Object.keys(source.filters).map(name => [name, REPEATABLE])
	);
	return {
		actions: {
			list: {
				params: listParamsSchema(filterParams) as any,
				handler(this: any, ctx: Context<Record<string, unknown>, RequestMeta>) {
					return runList(
						this.db,
						source,
						{
							query: ctx.meta.query ?? ctx.params,
							baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
							path: ctx.meta.path ?? `/api/${this.name}/`
						},
						serialize
					);
				}
			}
		}
	};
}
