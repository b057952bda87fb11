import type { Sequelize } from "sequelize";
import type { ExecutionFinished, ProducedFile } from "../../lib/documents/agent-protocol";
import { parseJobInterface } from "../../lib/documents/job-interface";
import { finishExecutions } from "../../lib/executions/finish";
import type { FinishResult } from "../../lib/executions/types";
import { PIPELINED, transaction } from "../../lib/db/run";
import { request } from "./broker";

/**
 * Jobs run to completion through the real code paths, with no agent: queued through REST, placed
 * as the scheduler places them (RUNNING on a node) and completed with the products an agent would
 * report, through finishExecutions in a transaction as the scheduler applies reports.
 */

/** A job type taking one file (`image`) and giving one (`result`) and optional `extras`. */
export const FILE_IFACE = {
	command: "process",
	command_arguments: "${image} ${job_output_dir}",
	input_data: [{ name: "image", type: "file" }],
	output_data: [
		{ name: "result", type: "file", required: false },
		{ name: "extras", type: "files", required: false }
	]
};

async function q<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = []
): Promise<T[]> {
	const [rows] = await db.query(sql, { bind });
	return rows as T[];
}

/** Inserts a job type (and its first revision) with FILE_IFACE; answers its id. */
export async function addFileJobType(
	db: Sequelize,
	name: string,
	extra: Record<string, unknown> = {}
): Promise<number> {
	const iface = JSON.stringify(parseJobInterface(FILE_IFACE));
	const cols: Record<string, unknown> = { name, version: "1.0", interface: iface, ...extra };
	const keys = Object.keys(cols);
	const [row] = await q<{ id: number }>(
		db,
		`INSERT INTO job_type (${keys.join(", ")})
		 VALUES (${keys.map((_, i) => `$${i + 1}`).join(", ")}) RETURNING id`,
		keys.map(k => cols[k])
	);
	await q(
		db,
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, $2)`,
		[row.id, iface]
	);
	return row.id;
}

/** Inserts a node for the executions to run on; answers its id. */
export async function addNode(db: Sequelize, hostname: string): Promise<number> {
	const [node] = await q<{ id: number }>(
		db,
		`INSERT INTO node (hostname, port, slave_id) VALUES ($1, 5051, $1) RETURNING id`,
		[hostname]
	);
	return node.id;
}

export interface JobSpec {
	api: string;
	jobTypeId: number;
	/** the file given to `image` */
	inputFileId: number;
	/** the workspace both outputs go to */
	workspaceId: number;
	nodeId: number;
	agentId: string;
}

/** A file an execution made, as the agent reports it, in the job's output workspace. */
export type MadeFile = Omit<ProducedFile, "workspaceId">;

/**
 * Queues a job through POST /queue/new-job/ and marks its execution RUNNING on the node, as a
 * placement does. Answers the job and execution ids.
 */
export async function startJob(
	db: Sequelize,
	spec: JobSpec
): Promise<{ jobId: number; exeId: number }> {
	const reply = await request("POST", `${spec.api}/queue/new-job/`, {
		job_type_id: spec.jobTypeId,
		job_data: {
			input_data: [{ name: "image", file_id: spec.inputFileId }],
			output_data: [
				{ name: "result", workspace_id: spec.workspaceId },
				{ name: "extras", workspace_id: spec.workspaceId }
			]
		}
	});
	if (reply.status !== 201) throw new Error(`new job failed: ${reply.status} ${reply.text}`);
	const jobId = reply.body.id as number;
	await q(db, `DELETE FROM queue WHERE job_id = $1`, [jobId]);
	const [exe] = await q<{ id: number }>(
		db,
		`UPDATE job_exe SET status = 'RUNNING', started = now(), node_id = $2, agent_id = $3,
			last_modified = now()
		 WHERE job_id = $1 AND status = 'QUEUED' RETURNING id`,
		[jobId, spec.nodeId, spec.agentId]
	);
	await q(
		db,
		`UPDATE job SET status = 'RUNNING', started = now(), last_status_change = now(),
			last_modified = now() WHERE id = $1`,
		[jobId]
	);
	return { jobId, exeId: exe.id };
}

/** An agent's report of an execution that completed (with these files, if any). */
export function completedReport(
	jobExeId: number,
	agentId: string,
	products: ProducedFile[] = []
): ExecutionFinished {
	return {
		jobExeId,
		agentId,
		status: "COMPLETED",
		exitCode: 0,
		products,
		resultsManifest: null,
		parseResults: [],
		stdout: "",
		stderr: "",
		steps: {}
	};
}

/**
 * Marks a QUEUED job's execution RUNNING on the node with its needs scheduled, as a placement
 * does (its queue row taken); answers the execution's id.
 */
export async function placeQueuedJob(
	db: Sequelize,
	jobId: number,
	nodeId: number,
	agentId: string
): Promise<number> {
	await q(db, `DELETE FROM queue WHERE job_id = $1`, [jobId]);
	const [exe] = await q<{ id: number }>(
		db,
		`UPDATE job_exe e SET status = 'RUNNING', started = now(), node_id = $2, agent_id = $3,
			cpus_scheduled = j.cpus_required, mem_scheduled = j.mem_required,
			disk_total_scheduled = j.disk_in_required + j.disk_out_required
		 FROM job j WHERE j.id = e.job_id AND e.job_id = $1 AND e.status = 'QUEUED' RETURNING e.id`,
		[jobId, nodeId, agentId]
	);
	await q(db, `UPDATE job SET status = 'RUNNING', started = now() WHERE id = $1`, [jobId]);
	return exe.id;
}

/** Completes RUNNING executions together, in one report transaction, with the files each made. */
export function completeExecutions(
	db: Sequelize,
	agentId: string,
	workspaceId: number,
	reports: { exeId: number; products: MadeFile[] }[]
): Promise<FinishResult> {
	return transaction(db, PIPELINED, sql =>
		finishExecutions(sql, {
			finished: reports.map(r =>
				completedReport(
					r.exeId,
					agentId,
					r.products.map(p => ({ ...p, workspaceId }))
				)
			)
		})
	);
}

/** Starts a job and completes it with the products; fails unless the job completed. */
export async function runToCompletion(
	db: Sequelize,
	spec: JobSpec & { products: MadeFile[] }
): Promise<{ jobId: number; exeId: number; finish: FinishResult }> {
	const { jobId, exeId } = await startJob(db, spec);
	const finish = await completeExecutions(db, spec.agentId, spec.workspaceId, [
		{ exeId, products: spec.products }
	]);
	if (!finish.completedJobs.includes(jobId))
		throw new Error(`job ${jobId} did not complete: ${finish.notes.join("; ")}`);
	return { jobId, exeId, finish };
}
