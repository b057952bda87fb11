import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { LIST_PARAMS, listAction, listRequest } from "../mixins/list.mixin";
import { getIngestDetails, INGEST_LIST, serializeIngests } from "../lib/models/ingest";
import { getIngestStatus } from "../lib/models/ingest-status";
import { parseFileRef } from "../lib/models/scale-file";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";

/**
 * Ingests: the list, the details and the status per strike (lib/models/ingest,
 * lib/models/ingest-status). Source file records' download URLs point at this API when their
 * workspace has no base URL, so the API root of the request goes along.
 */
const IngestService: ServiceSchema = {
	name: "ingest",
	mixins: [DbMixin()],

	actions: {
		list: listAction(
			INGEST_LIST,
			(rows: Parameters<typeof serializeIngests>[0], ctx) =>
				serializeIngests(rows, ctx.meta.apiRoot),
			"/api/ingests/"
		),

		status: {
			params: {
				[QUERY_SCHEMA]: true,
				type: "object",
				properties: {
					page: LIST_PARAMS.page,
					page_size: LIST_PARAMS.page_size,
					started: LIST_PARAMS.started,
					ended: LIST_PARAMS.ended,
					use_ingest_time: { type: "string" }
				}
			} as any,
			handler(this: Service, ctx: Context<Record<string, unknown>, RequestMeta>) {
				return getIngestStatus(this.db, listRequest(ctx, "/api/ingests/status/"));
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
				return getIngestDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		}
	}
};

export default IngestService;
