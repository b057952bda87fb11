import { idList } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";

/** Statuses a requeue leaves as they are (it queues FAILED and CANCELED jobs again). */
const NOT_REQUEUED = ["COMPLETED", "RUNNING"];

/** `requeue <ids...>`: queues FAILED or CANCELED jobs again. */
export default defineCommand({
	command: "requeue <ids...>",
	description: "Requeue FAILED or CANCELED jobs (ids separated by spaces or commas)",
	async run({ broker, print }, args) {
		const ids = idList("job id", args.ids);
		const page: any = await broker.call("queue.requeueJobs", { job_ids: ids });
		// the answer lists every job named; only FAILED and CANCELED ones went back on the queue
		const requeued = page.results.filter((j: any) => !NOT_REQUEUED.includes(j.status));
		const refused = page.results.filter((j: any) => NOT_REQUEUED.includes(j.status));
		if (requeued.length > 0)
			print(
				formatTable(
					["id", "job type", "status"],
					requeued.map((j: any) => [j.id, j.job_type?.name, j.status])
				)
			);
		for (const j of refused)
			print(`refused: job ${j.id} is ${j.status}; only FAILED or CANCELED jobs are requeued`);
		const found = new Set(page.results.map((j: any) => j.id));
		const missing = ids.filter(id => !found.has(id));
		if (missing.length > 0) print(`refused: no such job: ${missing.join(", ")}`);
	}
});
