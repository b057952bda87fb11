import { defineCommand } from "../command";
import { formatTable } from "../table";

/** `queue`: what waits to run, per job type. */
export default defineCommand({
	command: "queue",
	description: "Queue status: queued jobs per job type, the longest wait, the highest priority",
	async run({ broker, print }) {
		const status: any = await broker.call("queue.status", {});
		const rows = (status.queue_status ?? []).map((q: any) => [
			`${q.job_type_name} ${q.job_type_version}`,
			q.count,
			q.longest_queued,
			q.highest_priority,
			q.is_job_type_paused ? "yes" : "no"
		]);
		print(formatTable(["job type", "queued", "longest queued", "priority", "paused"], rows));
	}
});
