import { FieldError } from "../../../lib/errors";
import {
	createEachRecipe,
	type CreatedRecipe,
	type NewRecipeRequest
} from "../../../lib/recipes/create";

/** Requests told apart by their recipe type id; a created recipe's id is its type id times 10. */
const request = (recipeTypeId: number): NewRecipeRequest => ({ recipeTypeId, data: {} });
const created = (r: NewRecipeRequest): CreatedRecipe => ({
	recipeId: r.recipeTypeId * 10,
	jobIds: [],
	queued: [],
	warnings: []
});

describe("createEachRecipe", () => {
	it("answers the shared creation's answers, refusals included, in one call", async () => {
		const calls: number[][] = [];
		const refusal = new FieldError("recipe_type_id", "no recipe type with id 2");
		const answers = await createEachRecipe(
			async batch => {
				calls.push(batch.map(r => r.recipeTypeId));
				return batch.map(r => (r.recipeTypeId === 2 ? refusal : created(r)));
			},
			[request(1), request(2), request(3)]
		);
		expect(calls).toEqual([[1, 2, 3]]);
		expect(answers).toEqual([created(request(1)), refusal, created(request(3))]);
	});

	it("tries each alone after the shared write failed, so one cannot fail the others", async () => {
		const calls: number[][] = [];
		const broken = new Error("value too long for type character varying(250)");
		const answers = await createEachRecipe(
			async batch => {
				calls.push(batch.map(r => r.recipeTypeId));
				if (batch.some(r => r.recipeTypeId === 2)) throw broken;
				return batch.map(created);
			},
			[request(1), request(2), request(3)]
		);
		expect(calls).toEqual([[1, 2, 3], [1], [2], [3]]);
		expect(answers).toEqual([created(request(1)), broken, created(request(3))]);
	});

	it("answers a single request's failure as its answer, and nothing for no request", async () => {
		const broken = new Error("connection terminated");
		expect(
			await createEachRecipe(async () => {
				throw broken;
			}, [request(1)])
		).toEqual([broken]);
		const never = jest.fn();
		expect(await createEachRecipe(never, [])).toEqual([]);
		expect(never).not.toHaveBeenCalled();
	});
});
