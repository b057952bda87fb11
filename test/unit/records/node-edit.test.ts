import { parseBoolParam, parseNodeEdit, type NodeRow } from "../../../lib/records/node";
import { isConnected } from "../../../lib/records/node-status";

function problem(fn: () => unknown): { message: string; code: number; plainText: boolean } {
	try {
		fn();
	} catch (error: any) {
		return { message: error.message, code: error.code, plainText: !!error.data?.plainText };
	}
	throw new Error("expected a problem");
}

describe("parseNodeEdit", () => {
	it("needs hostname, port, is_paused and is_active to replace; pause_reason is optional", () => {
		expect(
			parseNodeEdit({ hostname: "h", port: 1, is_paused: false, is_active: true }, "replace")
		).toEqual({ hostname: "h", port: 1, is_paused: false, is_active: true });
		expect(problem(() => parseNodeEdit({ hostname: "h" }, "replace"))).toEqual({
			message: "Missing required fields: port, is_paused, is_active",
			code: 400,
			plainText: true
		});
	});

	it("takes is_draining, a boolean, to update or replace, and names it when it is not one", () => {
		expect(parseNodeEdit({ is_draining: true }, "update")).toEqual({ is_draining: true });
		expect(
			parseNodeEdit(
				{ hostname: "h", port: 1, is_paused: false, is_active: true, is_draining: false },
				"replace"
			)
		).toMatchObject({ is_draining: false });
		for (const bad of ["true", 1, null])
			expect(problem(() => parseNodeEdit({ is_draining: bad }, "update"))).toEqual({
				message: "is_draining: must be true or false",
				code: 400,
				plainText: true
			});
	});

	it("lists missing and unexpected fields together", () => {
		expect(problem(() => parseNodeEdit({ hostname: "h", id2: 1 }, "replace")).message).toBe(
			"Missing required fields: port, is_paused, is_active\nUnexpected fields: id2"
		);
	});

	it("takes any of the fields to update, but at least one and nothing else", () => {
		expect(parseNodeEdit({ pause_reason: null }, "update")).toEqual({ pause_reason: null });
		expect(problem(() => parseNodeEdit({}, "update")).message).toBe(
			"No fields specified for update."
		);
		expect(problem(() => parseNodeEdit({ is_paused: true, slave_id: "x" }, "update"))).toEqual({
			message: "Unexpected fields: slave_id",
			code: 400,
			plainText: true
		});
	});

	it("checks the values", () => {
		expect(problem(() => parseNodeEdit({ port: 70000 }, "update")).message).toMatch(/^port:/);
		expect(problem(() => parseNodeEdit({ port: 1.5 }, "update")).message).toMatch(/^port:/);
		expect(problem(() => parseNodeEdit({ hostname: "" }, "update")).message).toMatch(
			/^hostname:/
		);
		expect(problem(() => parseNodeEdit({ is_active: 1 }, "update")).message).toMatch(
			/^is_active:/
		);
		expect(
			problem(() => parseNodeEdit({ pause_reason: "x".repeat(251) }, "update")).message
		).toMatch(/^pause_reason:/);
	});
});

describe("parseBoolParam", () => {
	it("reads Scale's boolean spellings and falls back when absent or empty", () => {
		for (const t of ["true", "True", "t", "1", " TRUE "])
			expect(parseBoolParam(t, "x", false)).toBe(true);
		for (const f of ["false", "F", "0"]) expect(parseBoolParam(f, "x", true)).toBe(false);
		expect(parseBoolParam(undefined, "x", true)).toBe(true);
		expect(parseBoolParam("", "x", false)).toBe(false);
		expect(parseBoolParam(["false", "true"], "x", false)).toBe(true);
		expect(
			problem(() => parseBoolParam("yes please", "include_inactive", false))
		).toMatchObject({
			code: 400,
			plainText: false
		});
	});
});

describe("isConnected", () => {
	const now = new Date("2024-01-01T00:01:00Z");
	const row = (extra: Partial<NodeRow>) =>
		({ agent_id: "a", last_heartbeat: new Date("2024-01-01T00:00:50Z"), ...extra }) as NodeRow;
	const c = { agents: new Set(["a"]), leaseMs: 15000, now };

	it("needs a registered agent heard from within the lease", () => {
		expect(isConnected(row({}), c)).toBe(true);
		expect(isConnected(row({ agent_id: null }), c)).toBe(false);
		expect(isConnected(row({ agent_id: "b" }), c)).toBe(false);
		expect(isConnected(row({ last_heartbeat: null }), c)).toBe(false);
		expect(isConnected(row({ last_heartbeat: new Date("2024-01-01T00:00:40Z") }), c)).toBe(
			false
		);
	});
});
