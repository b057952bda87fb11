import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { cachedListAction } from "../mixins/list.mixin";
import { parseFileRef } from "../lib/records/scale-file";
import {
	getSourceDetails,
	SOURCE_LIST,
	SOURCE_RECORD,
	SOURCE_UPDATE_RECORD,
	SOURCE_UPDATES_LIST
} from "../lib/records/source-file";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";

/**
 * Source files: the list, its updates view and the details (lib/records/source-file). Records'
 * download URLs point at this API when their workspace has no base URL, so the API root of the
 * request goes along.
 */
const SourcesService: ServiceSchema = {
	name: "sources",
	mixins: [DbMixin()],

	actions: {
		list: {
			rest: "GET /sources",
			...cachedListAction(SOURCE_LIST, SOURCE_RECORD, "/api/sources/")
		},

		updates: {
			rest: "GET /sources/updates",
			...cachedListAction(SOURCE_UPDATES_LIST, SOURCE_UPDATE_RECORD, "/api/sources/updates/")
		},

		/** By id, or by file name (Scale's second URL pattern for the same view). */
		get: {
			rest: "GET /sources/:ref",
			params: jsonParams({
				type: "object",
				required: ["ref"],
				properties: { ref: { type: "string" } }
			}),
			handler(this: Service, ctx: Context<{ ref: string }, RequestMeta>) {
				return getSourceDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		}
	}
};

export default SourcesService;
