import { positiveInt } from "../args";
import { defineCommand } from "../command";

/** `cancel <id>`: cancels a job (its running process is killed on its agent). */
export default defineCommand({
	command: "cancel <id>",
	description: "Cancel a job; a running process is killed on its agent",
	async run({ broker, print }, args) {
		const id = positiveInt("job id", args.id);
		const job: any = await broker.call("jobs.update", { id, status: "CANCELED" });
		print(`job ${job.id}: ${job.status}`);
	}
});
