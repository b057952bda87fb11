import { oneOf, positiveInt } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";

export const JOB_STATUSES = [
	"PENDING",
	"BLOCKED",
	"QUEUED",
	"RUNNING",
	"FAILED",
	"COMPLETED",
	"CANCELED"
] as const;

/** `jobs [--status S] [--type NAME] [--limit N]`: the latest jobs. */
export default defineCommand({
	command: "jobs",
	description: "Jobs, the latest first: --status, --type (job type name), --limit (25)",
	options: [
		{ option: "-s, --status <status>", description: "one of " + JOB_STATUSES.join(", ") },
		{ option: "-t, --type <name>", description: "a job type name" },
		{ option: "-l, --limit <n>", description: "how many (default 25, at most 1000)" }
	],
	async run({ broker, print }, args) {
		const o = args.options ?? {};
		const params: Record<string, unknown> = { order: "-last_modified" };
		if (o.status !== undefined) params.status = oneOf("status", o.status, JOB_STATUSES);
		if (o.type !== undefined) params.job_type_name = String(o.type);
		const limit = o.limit === undefined ? 25 : positiveInt("limit", o.limit);
		params.page_size = String(Math.min(limit, 1000));
		const page: any = await broker.call("jobs.list", params);
		print(
			formatTable(
				["id", "job type", "status", "exes", "priority", "last modified"],
				page.results.map((j: any) => [
					j.id,
					`${j.job_type?.name} ${j.job_type?.version}`,
					j.status,
					j.num_exes,
					j.priority,
					j.last_modified
				])
			)
		);
		print(`${page.results.length} of ${page.count} jobs`);
	}
});
