import type { Sequelize } from "sequelize";
import { select } from "../db/run";
import { LEADER_APPLICATION_NAME, SCHEDULER_LOCK_KEY } from "../db/leader";

export interface Resources {
	cpus: number;
	mem: number;
	disk: number;
}

/**
 * Resources as Scale 3.0 gave them (mesos_api's HardwareResources.to_dict): each rounded to one
 * decimal, so a sum of float columns reads 0.3, not 0.30000000000000004.
 */
export function hardwareResources(cpus: number, mem: number, disk: number): Resources {
	const round = (value: number) => Math.round(value * 10) / 10;
	return { cpus: round(cpus), mem: round(mem), disk: round(disk) };
}

export interface ClusterStatus {
	master: { hostname: string; port: number; is_online: boolean };
	scheduler: { hostname: string | null; is_online: boolean; is_paused: boolean };
	queue_depth: number;
	resources: { total: Resources; scheduled: Resources; used: Resources };
	/** ours: what an operator should know (agents sharing a host), in words */
	warnings: string[];
}

/** Hosts where more than one active agent was heard from within the lease. */
export interface SharedHost {
	hostname: string;
	nodes: number[];
	cpus: number;
}

/** The advisory lock holder's nodeID: the query below, on its own. */
const LEADER_SQL = `SELECT substr(a.application_name, length($1) + 1) AS leader
	FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = $2
		AND l.objsubid = 1
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND a.application_name LIKE $1 || '%'
	LIMIT 1`;

/** The nodeID of the scheduler replica that leads now (holds the lock), or null. */
export async function schedulerLeader(db: Sequelize): Promise<string | null> {
	const rows = await select<{ leader: string }>(db, LEADER_SQL, [
		LEADER_APPLICATION_NAME,
		SCHEDULER_LOCK_KEY
	]);
	return rows[0]?.leader ?? null;
}

/**
 * The database half of the cluster status, in one round trip: the scheduler pause, the queue
 * depth, and the resources offered by active nodes and scheduled to running executions.
 */
export async function readClusterState(db: Sequelize, leaseMs = 15000) {
	const [row] = await select<Record<string, any>>(
		db,
		`SELECT
			(SELECT is_paused FROM scheduler WHERE id = 1) AS is_paused,
			(${LEADER_SQL}) AS leader,
			(SELECT count(*) FROM queue) AS queue_depth,
			n.cpus, n.mem, n.disk, e.cpus AS s_cpus, e.mem AS s_mem, e.disk AS s_disk,
			(SELECT json_agg(h) FROM (
				SELECT hostname, array_agg(id ORDER BY id) AS nodes, sum(cpus_total) AS cpus
				FROM node WHERE is_active AND agent_id IS NOT NULL
					AND last_heartbeat > now() - $3::int * interval '1 millisecond'
				GROUP BY hostname HAVING count(*) > 1 ORDER BY hostname) h) AS shared
		 FROM
			(SELECT coalesce(sum(cpus_total), 0) AS cpus, coalesce(sum(mem_total), 0) AS mem,
			        coalesce(sum(disk_total), 0) AS disk
			   FROM node WHERE is_active) n,
			(SELECT coalesce(sum(cpus_scheduled), 0) AS cpus, coalesce(sum(mem_scheduled), 0) AS mem,
			        coalesce(sum(disk_total_scheduled), 0) AS disk
			   FROM job_exe WHERE status = 'RUNNING') e`,
		[LEADER_APPLICATION_NAME, SCHEDULER_LOCK_KEY, Math.round(leaseMs)]
	);
	return {
		shared: ((row.shared ?? []) as SharedHost[]).map(h => ({ ...h, cpus: Number(h.cpus) })),
		isPaused: !!row.is_paused,
		/** the nodeID of the replica holding the scheduler's leadership lock, if any */
		leader: (row.leader as string | null) ?? null,
		queueDepth: Number(row.queue_depth),
		total: hardwareResources(Number(row.cpus), Number(row.mem), Number(row.disk)),
		scheduled: hardwareResources(Number(row.s_cpus), Number(row.s_mem), Number(row.s_disk))
	};
}

/**
 * Agents on one machine each offer what they are given: the whole machine unless AGENT_CPUS,
 * AGENT_MEM_MIB and AGENT_DISK_MIB give each its share, and then its cpus count once per agent.
 */
export function sharedHostWarnings(shared: readonly SharedHost[]): string[] {
	return shared.map(
		h =>
			`host ${h.hostname} runs ${h.nodes.length} agents (nodes ${h.nodes.join(", ")}) offering ${Math.round(h.cpus * 100) / 100} cpus in all: unless each was given its share (AGENT_CPUS, AGENT_MEM_MIB, AGENT_DISK_MIB), the machine's resources are counted ${h.nodes.length} times`
	);
}
