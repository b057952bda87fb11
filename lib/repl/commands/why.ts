import { positiveInt } from "../args";
import { defineCommand } from "../command";
import { age } from "../age";

/** `why <job>`: why a QUEUED job is not running yet (the leading scheduler's last pass). */
export default defineCommand({
	command: "why <job>",
	description: "Why a QUEUED job waits: its reason and code, from the scheduler's last pass",
	values: { operand: "queued-job" },
	async run({ broker, print }, args) {
		const id = positiveInt("job id", args.job);
		const job: any = await broker.call("jobs.get", { id });
		if (job.status !== "QUEUED") {
			print(`job ${id} is ${job.status}: it is not waiting`);
			return;
		}
		const why = job.why_waiting;
		if (!why) {
			print(`job ${id} is QUEUED; no scheduler leads now to say why`);
			return;
		}
		print(`job ${id} (${job.job_type?.name} ${job.job_type?.version}) waits: ${why.reason}`);
		print(
			`code ${why.code}; queued ${age(job.queued)}, told from the pass of ${age(why.pass_at)}`
		);
	}
});
