import type { Sequelize } from "sequelize";
import { select } from "../db/connection";

export interface Resources {
	cpus: number;
	mem: number;
	disk: number;
}

export interface ClusterStatus {
	master: { hostname: string; port: number; is_online: boolean };
	scheduler: { hostname: string | null; is_online: boolean; is_paused: boolean };
	queue_depth: number;
	resources: { total: Resources; scheduled: Resources; used: Resources };
}

/**
 * The database half of the cluster status, in one round trip: the scheduler pause, the queue
 * depth, and the resources offered by active nodes and scheduled to running executions.
 */
export async function readClusterState(db: Sequelize) {
	const [row] = await select<Record<string, string | boolean | null>>(
		db,
		`SELECT
			(SELECT is_paused FROM scheduler WHERE id = 1) AS is_paused,
			(SELECT count(*) FROM queue) AS queue_depth,
			n.cpus, n.mem, n.disk, e.cpus AS s_cpus, e.mem AS s_mem, e.disk AS s_disk
		 FROM
			(SELECT coalesce(sum(cpus_total), 0) AS cpus, coalesce(sum(mem_total), 0) AS mem,
			        coalesce(sum(disk_total), 0) AS disk
			   FROM node WHERE is_active) n,
			(SELECT coalesce(sum(cpus_scheduled), 0) AS cpus, coalesce(sum(mem_scheduled), 0) AS mem,
			        coalesce(sum(disk_total_scheduled), 0) AS disk
			   FROM job_exe WHERE status = 'RUNNING') e`
	);
	return {
		isPaused: !!row.is_paused,
		queueDepth: Number(row.queue_depth),
		total: { cpus: Number(row.cpus), mem: Number(row.mem), disk: Number(row.disk) },
		scheduled: { cpus: Number(row.s_cpus), mem: Number(row.s_mem), disk: Number(row.s_disk) }
	};
}
