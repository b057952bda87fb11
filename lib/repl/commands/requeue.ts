import { idList } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";

/** `requeue <ids...>`: queues FAILED or CANCELED jobs again. */
export default defineCommand({
	command: "requeue <ids...>",
	description: "Requeue FAILED or CANCELED jobs (ids separated by spaces or commas)",
	async run({ broker, print }, args) {
		const ids = idList("job id", args.ids);
		const page: any = await broker.call("queue.requeueJobs", { job_ids: ids });
		print(
			formatTable(
				["id", "job type", "status"],
				page.results.map((j: any) => [j.id, j.job_type?.name, j.status])
			)
		);
		const found = new Set(page.results.map((j: any) => j.id));
		const missing = ids.filter(id => !found.has(id));
		if (missing.length > 0) print(`not requeued (no such job): ${missing.join(", ")}`);
	}
});
