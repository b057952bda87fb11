import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { cachedListAction } from "../mixins/list.mixin";
import { SOURCE_FILES } from "../lib/records/file-records";
import {
	getProductDetails,
	PRODUCT_LIST,
	PRODUCT_RECORD,
	PRODUCT_UPDATE_RECORD,
	PRODUCT_UPDATES_LIST
} from "../lib/records/product-file";
import { parseFileRef } from "../lib/records/scale-file";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";

/**
 * Products: the list, its updates view and the details (lib/records/product-file). Records'
 * download URLs point at this API when their workspace has no base URL, so the API root of the
 * request goes along.
 */
const ProductsService: ServiceSchema = {
	name: "products",
	mixins: [DbMixin()],

	actions: {
		list: {
			rest: "GET /products",
			...cachedListAction(PRODUCT_LIST, PRODUCT_RECORD, "/api/products/")
		},

		updates: {
			rest: "GET /products/updates",
			...cachedListAction(
				PRODUCT_UPDATES_LIST,
				PRODUCT_UPDATE_RECORD,
				"/api/products/updates/",
				SOURCE_FILES
			)
		},

		/** By id, or by file name (Scale's second URL pattern for the same view). */
		get: {
			rest: "GET /products/:ref",
			params: jsonParams({
				type: "object",
				required: ["ref"],
				properties: { ref: { type: "string" } }
			}),
			handler(this: Service, ctx: Context<{ ref: string }, RequestMeta>) {
				return getProductDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		}
	}
};

export default ProductsService;
