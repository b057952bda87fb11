import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { listAction } from "../mixins/list.mixin";
import { parseFileRef, serializeSourceFile, type ScaleFileRow } from "../lib/models/scale-file";
import {
	getSourceDetails,
	serializeSourceUpdates,
	SOURCE_LIST,
	SOURCE_UPDATES_LIST
} from "../lib/models/source-file";
import type { RequestMeta } from "../types/meta";

/**
 * Source files: the list, its updates view and the details (lib/models/source-file). Records'
 * download URLs point at this API when their workspace has no base URL, so the API root of the
 * request goes along.
 */
const SourcesService: ServiceSchema = {
	name: "sources",
	mixins: [DbMixin()],

	actions: {
		list: listAction<ScaleFileRow>(
			SOURCE_LIST,
			(rows, ctx) => rows.map(row => serializeSourceFile(row, ctx.meta.apiRoot)),
			"/api/sources/"
		),

		updates: listAction<ScaleFileRow>(
			SOURCE_UPDATES_LIST,
			(rows, ctx) => serializeSourceUpdates(rows, ctx.meta.apiRoot),
			"/api/sources/updates/"
		),

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
