import { aliasesFrom } from "../../lib/http/aliases";

describe("aliasesFrom", () => {
	const before = () => undefined;

	it("takes each action's routes, its mixins' too, under the gateway's route", () => {
		const aliases = aliasesFrom([
			{
				name: "things",
				mixins: [{ actions: { list: { rest: "GET /things", handler() {} } } }],
				actions: {
					get: { rest: "GET /things/:id", handler() {} },
					import: {
						rest: [
							"POST /things",
							{ method: "POST", path: "/things/upload", handler: before }
						],
						handler() {}
					},
					internal: { handler() {} }
				}
			}
		]);
		expect(aliases).toEqual({
			"GET things": "things.list",
			"GET things/:id": "things.get",
			"POST things": "things.import",
			"POST things/upload": [before, "things.import"]
		});
	});

	it("refuses two actions claiming one route", () => {
		expect(() =>
			aliasesFrom([
				{ name: "a", actions: { x: { rest: "GET /x", handler() {} } } },
				{ name: "b", actions: { y: { rest: "GET /x", handler() {} } } }
			])
		).toThrow("Two actions claim the route GET x");
	});
});
