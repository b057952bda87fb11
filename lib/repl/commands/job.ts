import { positiveInt } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";

/** `job <id>`: a job's details and its executions. */
export default defineCommand({
	command: "job <id>",
	description: "A job's details and its executions",
	async run({ broker, print }, args) {
		const id = positiveInt("job id", args.id);
		const job: any = await broker.call("jobs.get", { id });
		print(
			formatTable(
				["field", "value"],
				[
					["id", job.id],
					["job type", `${job.job_type?.name} ${job.job_type?.version}`],
					["status", job.status],
					["priority", job.priority],
					["tries", `${job.num_exes} of ${job.max_tries}`],
					["error", job.error ? `${job.error.name} (${job.error.category})` : null],
					["recipe", job.recipe?.id ?? null],
					["created", job.created],
					["queued", job.queued],
					["started", job.started],
					["ended", job.ended]
				]
			)
		);
		const exes: any = await broker.call("job-executions.list", {
			job_id: String(id),
			page_size: "100"
		});
		print("");
		print(
			formatTable(
				["execution", "status", "node", "started", "ended", "error"],
				exes.results.map((e: any) => [
					e.id,
					e.status,
					e.node?.hostname ?? null,
					e.started,
					e.ended,
					e.error?.name ?? null
				])
			)
		);
	}
});
