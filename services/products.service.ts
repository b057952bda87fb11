import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { listAction } from "../mixins/list.mixin";
import {
	getProductDetails,
	PRODUCT_LIST,
	PRODUCT_UPDATES_LIST,
	serializeProduct,
	serializeProductUpdates,
	type ProductRow
} from "../lib/models/product-file";
import { parseFileRef } from "../lib/models/scale-file";
import type { RequestMeta } from "../types/meta";

/**
 * Products: the list, its updates view and the details (lib/models/product-file). Records'
 * download URLs point at this API when their workspace has no base URL, so the API root of the
 * request goes along.
 */
const ProductsService: ServiceSchema = {
	name: "products",
	mixins: [DbMixin()],

	actions: {
		list: listAction<ProductRow>(
			PRODUCT_LIST,
			(rows, ctx) => rows.map(row => serializeProduct(row, ctx.meta.apiRoot)),
			"/api/products/"
		),

		updates: listAction<ProductRow>(
			PRODUCT_UPDATES_LIST,
			function (rows, ctx) {
				return serializeProductUpdates(this.db, rows, ctx.meta.apiRoot);
			},
			"/api/products/updates/"
		),

		/** By id, or by file name (Scale's second URL pattern for the same view). */
		get: {
			params: {
				type: "object",
				required: ["ref"],
				properties: { ref: { type: "string" } }
			} as any,
			handler(this: Service, ctx: Context<{ ref: string }, RequestMeta>) {
				return getProductDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		}
	}
};

export default ProductsService;
