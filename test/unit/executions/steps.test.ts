import { collectSteps } from "../../../lib/executions/complete";

describe("collectSteps", () => {
	it("maps step reports to the execution's columns, later reports winning", () => {
		const cols = collectSteps(
			[
				{
					jobExeId: 1,
					agentId: "a",
					step: "pre",
					event: "started",
					at: "2024-01-01T00:00:00Z"
				},
				{
					jobExeId: 1,
					agentId: "a",
					step: "pre",
					event: "completed",
					at: "2024-01-01T00:00:01Z",
					exitCode: 0,
					commandArguments: "x y"
				},
				{ jobExeId: 1, agentId: "a", step: "main", event: "started", at: "bad time" },
				{
					jobExeId: 2,
					agentId: "a",
					step: "post",
					event: "started",
					at: "2024-01-01T00:00:09Z"
				}
			],
			[]
		);
		expect(cols.get(1)).toMatchObject({
			pre_started: "2024-01-01T00:00:00Z",
			pre_completed: "2024-01-01T00:00:01Z",
			pre_exit_code: 0,
			job_started: null,
			command_arguments: "x y"
		});
		expect(cols.get(2)).toMatchObject({ post_started: "2024-01-01T00:00:09Z" });
	});

	it("takes the final report's step times and main exit code", () => {
		const cols = collectSteps(
			[],
			[
				{
					jobExeId: 3,
					agentId: "a",
					status: "FAILED",
					exitCode: 4,
					products: [],
					resultsManifest: null,
					parseResults: [],
					stdout: "",
					stderr: "",
					steps: {
						main: {
							started: "2024-01-01T00:00:02Z",
							completed: "2024-01-01T00:00:03Z"
						},
						post: { started: "2024-01-01T00:00:03Z", exitCode: 1 }
					}
				}
			]
		);
		expect(cols.get(3)).toMatchObject({
			job_started: "2024-01-01T00:00:02Z",
			job_completed: "2024-01-01T00:00:03Z",
			job_exit_code: 4,
			post_started: "2024-01-01T00:00:03Z",
			post_exit_code: 1,
			pre_started: null
		});
	});
});
