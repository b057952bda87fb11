import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { contentDisposition, openDownload } from "../lib/storage/download";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";

/**
 * Files of any kind: the download route that file records' `url` points at when their workspace
 * has no base URL (lib/storage/download).
 */
const FilesService: ServiceSchema = {
	name: "files",
	mixins: [DbMixin()],

	actions: {
		/**
		 * Streams the file from its workspace (the gateway pipes the stream to the client), or
		 * redirects to a presigned link for a file in S3.
		 */
		download: {
			rest: "GET /files/:id/download",
			params: jsonParams({
				type: "object",
				required: ["id"],
				properties: { id: { type: "integer", minimum: 1 } }
			}),
			async handler(this: Service, ctx: Context<{ id: number }, RequestMeta>) {
				const file = await openDownload(this.db, ctx.params.id);
				if ("redirect" in file) {
					ctx.meta.$statusCode = 302;
					ctx.meta.$location = file.redirect;
					return null;
				}
				ctx.meta.$responseType = file.mediaType;
				ctx.meta.$responseHeaders = {
					"Content-Length": String(file.size),
					"Content-Disposition": contentDisposition(file.fileName)
				};
				return file.stream;
			}
		}
	}
};

export default FilesService;
