import { parseSettingsEdit } from "../../../lib/scheduling/settings";

describe("parseSettingsEdit", () => {
	it("takes is_paused and the node error settings, ignoring other fields", () => {
		expect(
			parseSettingsEdit({ is_paused: true, node_error_period: 5, max_node_errors: 2.5, x: 1 })
		).toEqual({ is_paused: true, node_error_period: 5, max_node_errors: 2.5 });
	});

	it("needs at least one of them", () => {
		expect(() => parseSettingsEdit({})).toThrow(/No fields specified/);
		expect(() => parseSettingsEdit({ other: 1 })).toThrow(/No fields specified/);
	});

	it("names the field at fault", () => {
		expect(() => parseSettingsEdit({ is_paused: "true" })).toThrow(/^is_paused:/);
		expect(() => parseSettingsEdit({ node_error_period: 0 })).toThrow(/^node_error_period:/);
		expect(() => parseSettingsEdit({ node_error_period: 1.5 })).toThrow(/^node_error_period:/);
		expect(() => parseSettingsEdit({ max_node_errors: 0 })).toThrow(/^max_node_errors:/);
	});
});
