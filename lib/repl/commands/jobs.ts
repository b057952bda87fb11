import { oneOf, positiveInt } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";
import { span, when } from "../age";

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
		{ option: "-l, --limit <n>", description: "how many (default 25, at most 1000)" },
		{ option: "--timestamps", description: "times as timestamps rather than ages" }
	],
	values: { options: { "--status": JOB_STATUSES, "--type": "job-type" } },
	async run({ broker, print }, args) {
		const o = args.options ?? {};
		const params: Record<string, unknown> = { order: "-last_modified" };
		if (o.status !== undefined) params.status = oneOf("status", o.status, JOB_STATUSES);
		if (o.type !== undefined) params.job_type_name = String(o.type);
		const limit = o.limit === undefined ? 25 : positiveInt("limit", o.limit);
		params.page_size = String(Math.min(limit, 1000));
		const page: any = await broker.call("jobs.list", params);
		// each job's node: where its latest execution ran (one call for the page)
		const nodeOf = new Map<number, string>();
		if (page.results.length > 0) {
			const exes: any = await broker.call("job-executions.list", {
				job_id: page.results.map((j: any) => String(j.id)),
				order: "id",
				page_size: "1000"
			});
			for (const e of exes.results)
				if (e.node) nodeOf.set(e.job.id, `${e.node.hostname} (${e.node.id})`);
		}
		const now = Date.now();
		const duration = (j: any) =>
			j.started
				? span(
						(j.ended ? new Date(j.ended).getTime() : now) -
							new Date(j.started).getTime()
					)
				: null;
		const stamps = o.timestamps === true;
		print(
			formatTable(
				["id", "job type", "status", "node", "duration", "tries", "priority", "changed"],
				page.results.map((j: any) => [
					j.id,
					`${j.job_type?.name} ${j.job_type?.version}`,
					j.status,
					nodeOf.get(j.id) ?? null,
					duration(j),
					j.num_exes,
					j.priority,
					when(j.last_status_change ?? j.last_modified, stamps)
				])
			)
		);
		print(`${page.results.length} of ${page.count} jobs`);
	}
});
