import type { Readable } from "stream";
import { oneOf, positiveInt, ReplArgError } from "../args";
import { defineCommand } from "../command";

/**
 * `logs <job_exe id> [--stream stdout|stderr] [--tail N] [-f]`: an execution's output, live
 * from its agent while it runs; with -f, followed as it is written until the execution ends.
 */
export default defineCommand({
	command: "logs <id>",
	description:
		"An execution's stdout and stderr (live from its agent while it runs); -f follows it to its end",
	options: [
		{ option: "--stream <stream>", description: "stdout or stderr only" },
		{ option: "--tail <n>", description: "only the last n lines (of each stream)" },
		{
			option: "-f, --follow",
			description: "print the output as it is written, until the execution ends"
		}
	],
	values: { options: { "--stream": ["stdout", "stderr"] } },
	async run({ broker, print, write }, args) {
		const id = positiveInt("job_exe id", args.id);
		const o = args.options ?? {};
		const stream =
			o.stream === undefined ? undefined : oneOf("stream", o.stream, ["stdout", "stderr"]);
		let tail: number | undefined;
		if (o.tail !== undefined) {
			if (!/^\d+$/.test(String(o.tail)))
				throw new ReplArgError(`tail must be a number of lines, got "${o.tail}"`);
			tail = Number(o.tail);
		}
		if (o.follow === true) {
			const answer = await broker.call("job-executions.logs", {
				id,
				follow: true,
				...(stream ? { stream } : {}),
				...(tail !== undefined ? { tail } : {})
			});
			if (typeof answer === "string") write(answer);
			else
				await new Promise<void>((resolve, reject) => {
					const live = answer as Readable;
					live.on("data", (chunk: Buffer) => write(chunk.toString("utf8")));
					live.on("end", resolve);
					live.on("error", reject);
				});
			print(`--- execution ${id} ended ---`);
			return;
		}
		for (const s of stream ? [stream] : ["stdout", "stderr"]) {
			const text = (await broker.call("job-executions.logs", {
				id,
				stream: s,
				...(tail !== undefined ? { tail } : {})
			})) as string;
			print(`--- ${s} of execution ${id} ---`);
			print(text === "" ? "(empty)" : String(text).replace(/\n$/, ""));
		}
	}
});
