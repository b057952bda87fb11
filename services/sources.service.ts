import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { listParamsSchema } from "../mixins/list.mixin";
import { runList, type ListRequest } from "../lib/list/run";
import { parseFileRef, serializeSourceFile, type ScaleFileRow } from "../lib/models/scale-file";
import {
	getSourceDetails,
	serializeSourceUpdates,
	SOURCE_LIST,
	SOURCE_UPDATES_LIST
} from "../lib/models/source-file";
import type { RequestMeta } from "../types/meta";

type Query = Record<string, unknown>;

const REPEATABLE = {
	type: ["array", "object"],
	items: { type: "string" },
	additionalProperties: { type: "string" }
};
/** The list and its updates view take the same parameters. */
const LIST_PARAMS = listParamsSchema(
	Object.fromEntries(Object.keys(SOURCE_LIST.filters).map(f => [f, REPEATABLE]))
);

function listRequest(ctx: Context<Query, RequestMeta>, path: string): ListRequest {
	return {
		query: ctx.meta.query ?? ctx.params,
		baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
		path: ctx.meta.path ?? path
	};
}

/**
 * Source files: the list, its updates view and the details (lib/models/source-file). Records'
 * download URLs point at this API when their workspace has no base URL, so the API root of the
 * request goes along.
 */
const SourcesService: ServiceSchema = {
	name: "sources",
	mixins: [DbMixin()],

	actions: {
		list: {
			params: LIST_PARAMS as any,
			handler(this: Service, ctx: Context<Query, RequestMeta>) {
				return runList(
					this.db,
					SOURCE_LIST,
					listRequest(ctx, "/api/sources/"),
					(rows: ScaleFileRow[]) =>
						rows.map(row => serializeSourceFile(row, ctx.meta.apiRoot))
				);
			}
		},

		updates: {
			params: LIST_PARAMS as any,
			handler(this: Service, ctx: Context<Query, RequestMeta>) {
				return runList(
					this.db,
					SOURCE_UPDATES_LIST,
					listRequest(ctx, "/api/sources/updates/"),
					(rows: ScaleFileRow[]) => serializeSourceUpdates(rows, ctx.meta.apiRoot)
				);
			}
		},

		/** By id, or by file name (Scale's second URL pattern for the same view). */
		get: {
			params: {
				type: "object",
				required: ["ref"],
				properties: { ref: { type: "string" } }
			} as any,
			handler(this: Service, ctx: Context<{ ref: string }, RequestMeta>) {
				return getSourceDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		}
	}
};

export default SourcesService;
