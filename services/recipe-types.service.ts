import { type Sql, transaction } from "../lib/db/run";
import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { ListMixin } from "../mixins/list.mixin";
import {
	getRecipeTypeDetails,
	NEW_RECIPE_TYPE_SCHEMA,
	RECIPE_TYPE_FIELDS,
	RECIPE_TYPE_LIST,
	saveRecipeType,
	serializeRecipeType,
	validateRecipeType,
	type RecipeTypeRow,
	type RecipeTypeSpec
} from "../lib/records/recipe-type";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, readOnlyWarnings, withWarnings } from "../lib/validation/body";
import { RECIPE_TYPE_READ_ONLY } from "../lib/documents/configuration";
import { ID_SCHEMA } from "../lib/validation/ids";

/**
 * Recipe types: list, create, details, edit (title, description, definition, trigger rule) and
 * validation. The work is in lib/records/recipe-type.
 */
const RecipeTypesService: ServiceSchema = {
	name: "recipe-types",
	mixins: [
		DbMixin(),
		ListMixin<RecipeTypeRow>(
			RECIPE_TYPE_LIST,
			rows => rows.map(serializeRecipeType),
			"GET /recipe-types"
		)
	],

	actions: {
		create: {
			rest: "POST /recipe-types",
			params: jsonParams(bodyParams(NEW_RECIPE_TYPE_SCHEMA, RECIPE_TYPE_READ_ONLY)),
			async handler(this: Service, ctx: Context<RecipeTypeSpec, RequestMeta>) {
				const { id } = await transaction(this.db, (t: Sql) =>
					saveRecipeType(this.db, ctx.params, t)
				);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/recipe-types/${id}/`;
				return withWarnings(
					await getRecipeTypeDetails(this.db, id),
					readOnlyWarnings(ctx.params, "recipe type")
				);
			}
		},

		validate: {
			rest: "POST /recipe-types/validation",
			params: jsonParams(bodyParams(NEW_RECIPE_TYPE_SCHEMA, RECIPE_TYPE_READ_ONLY)),
			async handler(this: Service, ctx: Context<RecipeTypeSpec>) {
				return {
					warnings: [
						...readOnlyWarnings(ctx.params, "recipe type"),
						...(await validateRecipeType(this.db, ctx.params))
					]
				};
			}
		},

		get: {
			rest: "GET /recipe-types/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: Service, ctx: Context<{ id: number }>) {
				return getRecipeTypeDetails(this.db, ctx.params.id);
			}
		},

		update: {
			rest: "PATCH /recipe-types/:id",
			params: jsonParams(
				bodyParams(
					{
						type: "object",
						required: ["id"],
						properties: { id: ID_SCHEMA, ...RECIPE_TYPE_FIELDS }
					},
					[...RECIPE_TYPE_READ_ONLY, "name", "version"]
				)
			),
			async handler(this: Service, ctx: Context<RecipeTypeSpec & { id: number }>) {
				const { id, ...spec } = ctx.params;
				await transaction(this.db, (t: Sql) =>
					saveRecipeType(this.db, spec, t, { existingId: id })
				);
				return withWarnings(
					await getRecipeTypeDetails(this.db, id),
					readOnlyWarnings(ctx.params, "recipe type")
				);
			}
		}
	}
};

export default RecipeTypesService;
