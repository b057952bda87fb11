import type { Sequelize } from "sequelize";
import { select } from "../db/connection";
import { formatDatetime } from "../list/iso8601";

/** One entry of GET /queue/status/: the queued executions of one job type. */
export interface QueueStatusEntry {
	count: number;
	longest_queued: string;
	job_type_name: string;
	job_type_version: string;
	highest_priority: number;
	is_job_type_paused: boolean;
}

/**
 * The queue by job type (Scale 3.0's QueueManager.get_queue_status), in one query over the
 * narrow `queue` table: unpaused types first, then by highest priority (lowest number) and the
 * longest wait, as Scale orders them.
 */
export async function getQueueStatus(db: Sequelize): Promise<{ queue_status: QueueStatusEntry[] }> {
	const rows = await select<{
		count: number;
		longest_queued: Date;
		job_type_name: string;
		job_type_version: string;
		highest_priority: number;
		is_job_type_paused: boolean;
	}>(
		db,
		`SELECT count(*)::int AS count, min(q.queued) AS longest_queued,
			jt.name AS job_type_name, jt.version AS job_type_version,
			min(q.priority) AS highest_priority, jt.is_paused AS is_job_type_paused
		 FROM queue q JOIN job_type jt ON jt.id = q.job_type_id
		 GROUP BY jt.id
		 ORDER BY jt.is_paused, min(q.priority), min(q.queued), jt.id`
	);
	return {
		queue_status: rows.map(row => ({
			count: row.count,
			longest_queued: formatDatetime(row.longest_queued),
			job_type_name: row.job_type_name,
			job_type_version: row.job_type_version,
			highest_priority: row.highest_priority,
			is_job_type_paused: row.is_job_type_paused
		}))
	};
}
