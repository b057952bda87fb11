import { RUN_PARAMS } from "../../../lib/documents/agent-protocol-schemas";
import { compileChecker } from "../../../lib/validation/schema";
import { spec } from "../../fixtures/agent";

describe("RUN_PARAMS", () => {
	const check = compileChecker(RUN_PARAMS);
	const run = spec({
		command: "/bin/true",
		commandArguments: "",
		inputData: [{ name: "in", type: "file" }],
		outputData: [{ name: "out", media_type: "text/plain" }],
		workspaceDir: "/ws"
	});

	it("takes an execution as the scheduler sends it, alone or among others", () => {
		expect(check(run)).toBe(true);
		expect(check({ executions: [run, run] })).toBe(true);
	});

	it("refuses an interface whose inputs or outputs are of a kind the agent does not run", () => {
		const input = { ...run.interface.input_data[0], type: "directory" };
		const output = { ...run.interface.output_data[0], type: "property" };
		expect(check({ ...run, interface: { ...run.interface, input_data: [input] } })).not.toBe(
			true
		);
		expect(check({ ...run, interface: { ...run.interface, output_data: [output] } })).not.toBe(
			true
		);
		const unnamed = { type: "file", required: true };
		expect(check({ ...run, interface: { ...run.interface, output_data: [unnamed] } })).not.toBe(
			true
		);
	});
});
