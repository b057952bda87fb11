import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { ListMixin } from "../mixins/list.mixin";
import {
	createError,
	ERROR_LIST,
	getError,
	serializeError,
	updateError,
	type ErrorEdit,
	type ErrorRow,
	type NewError
} from "../lib/records/error";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, readOnlyWarnings, withWarnings } from "../lib/validation/body";
import { ERROR_READ_ONLY } from "../lib/documents/configuration";

/** What an error's record shows that no body sets. */
const READ_ONLY = [...ERROR_READ_ONLY, "is_builtin"];
import { ID_SCHEMA } from "../lib/validation/ids";

const NAME = { type: "string", minLength: 1, maxLength: 50, pattern: "^[A-Za-z0-9_.-]+$" };
// No NUL: PostgreSQL text cannot hold it, and Sequelize would silently store "\0" instead.
const NO_NUL = "^[^\\u0000]*$";
const TITLE = { type: ["string", "null"], maxLength: 50, pattern: NO_NUL };
const DESCRIPTION = { type: ["string", "null"], maxLength: 250, pattern: NO_NUL };

const ErrorsService: ServiceSchema = {
	name: "errors",
	mixins: [
		DbMixin(),
		ListMixin<ErrorRow>(ERROR_LIST, rows => rows.map(serializeError), "GET /errors")
	],

	actions: {
		create: {
			rest: "POST /errors",
			params: jsonParams(
				bodyParams(
					{
						type: "object",
						required: ["name", "category"],
						properties: {
							name: NAME,
							title: TITLE,
							description: DESCRIPTION,
							category: { enum: ["ALGORITHM", "DATA"] }
						}
					},
					READ_ONLY
				)
			),
			async handler(this: Service, ctx: Context<NewError, RequestMeta>) {
				const row = await createError(this.db, ctx.params);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/errors/${row.id}/`;
				return withWarnings(serializeError(row), readOnlyWarnings(ctx.params, "error"));
			}
		},

		get: {
			rest: "GET /errors/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: Service, ctx: Context<{ id: number }>) {
				return serializeError(await getError(this.db, ctx.params.id));
			}
		},

		update: {
			rest: "PATCH /errors/:id",
			params: jsonParams(
				bodyParams(
					{
						type: "object",
						required: ["id"],
						properties: {
							id: ID_SCHEMA,
							title: TITLE,
							description: DESCRIPTION,
							category: { enum: ["SYSTEM", "ALGORITHM", "DATA"] }
						}
					},
					[...READ_ONLY, "name"]
				)
			),
			async handler(this: Service, ctx: Context<ErrorEdit & { id: number }>) {
				const { id, ...fields } = ctx.params;
				const edit: ErrorEdit = {};
				if ("title" in fields) edit.title = fields.title;
				if ("description" in fields) edit.description = fields.description;
				if (fields.category) edit.category = fields.category;
				return withWarnings(
					serializeError(await updateError(this.db, id, edit)),
					readOnlyWarnings(ctx.params, "error")
				);
			}
		}
	}
};

export default ErrorsService;
