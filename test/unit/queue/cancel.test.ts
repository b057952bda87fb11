import { checkJobUpdate } from "../../../lib/queue/cancel";

describe("checkJobUpdate (PATCH /jobs/{id}/ body)", () => {
	it("accepts only {status: CANCELED}", () => {
		expect(() => checkJobUpdate({ status: "CANCELED" })).not.toThrow();
	});

	it.each([
		[{}, /No fields/],
		[{ status: "CANCELED", priority: 3 }, /Unexpected fields: priority/],
		[{ priority: 3 }, /Unexpected fields: priority/],
		[
			{ status: "canceled" },
			/Invalid or read-only status "canceled". Allowed values: CANCELED/
		],
		[{ status: "RUNNING" }, /Allowed values: CANCELED/],
		[{ status: ["CANCELED"] }, /Allowed values: CANCELED/]
	])("refuses %j as a text/plain 400", (body, message) => {
		let error: any;
		try {
			checkJobUpdate(body);
		} catch (e) {
			error = e;
		}
		expect(error).toBeDefined();
		expect(error.message).toMatch(message);
		expect(error.code).toBe(400);
		expect(error.data).toEqual({ plainText: true });
	});
});
