import type { PlacedExe } from "../../../lib/executions/types";
import { PlacedExecutions } from "../../../lib/scheduling/dispatch";

const exe = (id: number): PlacedExe =>
	({
		id,
		job_id: id * 10,
		node_id: 1,
		agent_id: "agent-1",
		num_exes: 1,
		max_tries: 3,
		job_type_id: 2,
		name: "t",
		version: "1.0",
		is_operational: true,
		is_long_running: false,
		data: { version: "1.0", input_data: [], output_data: [] },
		interface: { version: "1.0", command: "/bin/true", input_data: [], output_data: [] },
		error_mapping: null,
		in_recipe: true
	}) as PlacedExe;

describe("PlacedExecutions", () => {
	it("answers what recording an end needs of each execution, once", () => {
		const known = new PlacedExecutions();
		known.remember([exe(1), exe(2), exe(3)]);
		const taken = known.takeAll([3, 1]);
		expect(taken?.map(e => [e.id, e.job_id, e.agent_id, e.in_recipe])).toEqual([
			[3, 30, "agent-1", true],
			[1, 10, "agent-1", true]
		]);
		expect(known.takeAll([1])).toBeNull();
		expect(known.size).toBe(1);
	});

	it("answers none, and forgets none, when one of the ids is not known", () => {
		const known = new PlacedExecutions();
		known.remember([exe(1), exe(2)]);
		expect(known.takeAll([1, 7])).toBeNull();
		expect(known.takeAll([1, 2])?.map(e => e.id)).toEqual([1, 2]);
	});

	it("forgets the oldest beyond its bound", () => {
		const known = new PlacedExecutions(3);
		known.remember([exe(1), exe(2)]);
		known.remember([exe(3), exe(4), exe(5)]);
		expect(known.size).toBe(3);
		expect(known.takeAll([1])).toBeNull();
		expect(known.takeAll([2])).toBeNull();
		expect(known.takeAll([3, 4, 5])?.map(e => e.id)).toEqual([3, 4, 5]);
	});
});
