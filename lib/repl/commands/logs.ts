import { oneOf, positiveInt } from "../args";
import { defineCommand } from "../command";

/** `logs <job_exe id> [--stream stdout|stderr]`: an execution's output, live while it runs. */
export default defineCommand({
	command: "logs <id>",
	description: "An execution's stdout and stderr (live from its agent while it runs)",
	options: [{ option: "--stream <stream>", description: "stdout or stderr only" }],
	async run({ broker, print }, args) {
		const id = positiveInt("job_exe id", args.id);
		const streams =
			args.options?.stream === undefined
				? ["stdout", "stderr"]
				: [oneOf("stream", args.options.stream, ["stdout", "stderr"])];
		for (const stream of streams) {
			const text = (await broker.call("job-executions.logs", { id, stream })) as string;
			print(`--- ${stream} of execution ${id} ---`);
			print(text === "" ? "(empty)" : String(text).replace(/\n$/, ""));
		}
	}
});
