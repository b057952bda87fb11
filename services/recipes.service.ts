import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { listAction } from "../mixins/list.mixin";
import { getRecipeDetails, RECIPE_LIST } from "../lib/records/recipe";
import { serializeRecipe, type RecipeListRow } from "../lib/records/recipe-record";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { ID_SCHEMA } from "../lib/validation/ids";

/**
 * Recipes, the read side: the list (GET /recipes/) and the details (GET /recipes/{id}/). The
 * work is in lib/records/recipe.
 */
const RecipesService: ServiceSchema = {
	name: "recipes",
	mixins: [DbMixin()],

	actions: {
		list: {
			rest: "GET /recipes",
			...listAction<RecipeListRow>(RECIPE_LIST, rows => rows.map(serializeRecipe))
		},

		get: {
			rest: "GET /recipes/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			handler(this: Service, ctx: Context<{ id: number }, RequestMeta>) {
				return getRecipeDetails(this.db, ctx.params.id, ctx.meta.apiRoot);
			}
		}
	}
};

export default RecipesService;
