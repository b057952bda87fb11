import path from "path";
import type { EndingExe, PlacedExe, FailureRequest } from "../executions/types";
import { ERRORS, runFailureError } from "../executions/failure";
import { entryFileIds } from "../documents/job-data";
import {
	callGroups,
	type ExecutionSpec,
	type OutputWorkspace,
	type StagedFile
} from "../documents/agent-protocol";
import type { JobInterface } from "../documents/types";
import { STRIKE_JOB_TYPE } from "../documents/strike-configuration";
import type { Sql } from "../db/run";
import { s3PlaceOf } from "../documents/s3-broker";

/** What handing placed executions to their agents needs of the scheduler service. */
export interface DispatchLink {
	/** the execution specs of placed executions, in their order */
	buildSpecs(placed: readonly PlacedExe[]): Promise<ExecutionSpec[]>;
	/** `node-agent.run` on one agent, without retries */
	run(agentId: string, executions: ExecutionSpec[]): Promise<unknown>;
	/** records a failure the control plane decides (through the reports' batcher) */
	fail(failure: FailureRequest): void;
	/** asks an agent to stop an execution it may have started after all */
	cancelOnAgent(jobExeId: number, agentId: string): void;
	/** places nothing on an agent for a while: it could not be reached */
	setAside(agentId: string): void;
	info(fields: Record<string, unknown>, message: string): void;
	warn(fields: Record<string, unknown>, message: string): void;
	error(fields: Record<string, unknown>, message: string): void;
}

/**
 * Hands placed executions to their agents: one call per agent for the executions placed on it
 * together (several where their JSON would make too large a message: callGroups), none waiting
 * for another. A run that fails fails its executions (node-lost for an agent out of reach, which
 * is then set aside, unless this process was cut off from NATS; task-launch otherwise); one that
 * timed out may have started after all, so the agent is also asked to stop it (one cut off by
 * this process's NATS outage is stopped by the agent's next heartbeat answer). Specs that
 * cannot be built fail every execution.
 */
export async function dispatchPlaced(placed: PlacedExe[], link: DispatchLink): Promise<void> {
	let specs: ExecutionSpec[];
	try {
		specs = await link.buildSpecs(placed);
	} catch (error) {
		link.error({ err: error }, "cannot build execution specs");
		for (const exe of placed) link.fail({ jobExeId: exe.id, errorName: ERRORS.unknown });
		return;
	}
	const byAgent = new Map<string, { exe: PlacedExe; spec: ExecutionSpec }[]>();
	placed.forEach((exe, i) => {
		link.info(
			{ jobId: exe.job_id, jobExeId: exe.id, nodeId: exe.node_id, agentId: exe.agent_id },
			"execution placed"
		);
		const forAgent = byAgent.get(exe.agent_id) ?? [];
		forAgent.push({ exe, spec: specs[i] });
		byAgent.set(exe.agent_id, forAgent);
	});
	for (const [agentId, forAgent] of byAgent)
		for (const runs of callGroups(forAgent, r => r.spec))
			link.run(
				agentId,
				runs.map(r => r.spec)
			).catch((error: any) => {
				const errorName = runFailureError(error);
				link.warn(
					{ err: error, jobExeIds: runs.map(r => r.exe.id), agentId, errorName },
					"node-agent.run failed"
				);
				// cut off from NATS, this process reached no agent: that one is not to blame
				if (errorName === ERRORS.nodeLost && error?.type !== "BROKER_DISCONNECTED")
					link.setAside(agentId);
				for (const { exe } of runs) {
					if (error?.type === "REQUEST_TIMEOUT") link.cancelOnAgent(exe.id, agentId);
					link.fail({ jobExeId: exe.id, errorName });
				}
			});
}

/**
 * The ExecutionSpec each placed execution is sent to its agent with: everything the agent needs,
 * since it has no database. Input files are staged from their workspace's host path; outputs go to
 * the workspaces the job data names.
 */

interface FileRow {
	id: number;
	file_name: string;
	file_path: string;
	media_type: string;
	file_size: string | number;
	host_path: string | null;
	/** an s3 workspace's broker configuration */
	s3?: Record<string, unknown> | null;
}

interface WorkspaceRow {
	id: number;
	host_path: string | null;
	s3?: Record<string, unknown> | null;
}

/** The file ids and workspace ids the job data of the placed executions refer to. */
export function referencedIds(placed: readonly PlacedExe[]): {
	fileIds: number[];
	workspaceIds: number[];
} {
	const files = new Set<number>();
	const workspaces = new Set<number>();
	for (const exe of placed) {
		for (const input of exe.data?.input_data ?? [])
			for (const id of entryFileIds(input)) files.add(id);
		for (const output of exe.data?.output_data ?? [])
			if (Number.isInteger(output.workspace_id)) workspaces.add(output.workspace_id);
	}
	return { fileIds: [...files], workspaceIds: [...workspaces] };
}

/**
 * Builds the specs, reading the files and workspaces involved in one statement (none without any).
 * An s3 workspace's credentials go in them only when `withCredentials` (docs/decisions.md, "S3
 * credentials reach agents only over a protected link").
 */
export async function buildSpecs(
	sql: Sql,
	placed: readonly PlacedExe[],
	withCredentials = false
): Promise<ExecutionSpec[]> {
	const { fileIds, workspaceIds } = referencedIds(placed);
	let files = new Map<number, FileRow>();
	let workspaces = new Map<number, WorkspaceRow>();
	if (fileIds.length > 0 || workspaceIds.length > 0) {
		const [row] = await sql.query<{
			files: FileRow[] | null;
			workspaces: WorkspaceRow[] | null;
		}>(
			`SELECT
				(SELECT json_agg(json_build_object('id', f.id, 'file_name', f.file_name,
					'file_path', f.file_path, 'media_type', f.media_type, 'file_size', f.file_size,
					'host_path', w.json_config->'broker'->>'host_path', 's3', ${S3_BROKER}))
				 FROM scale_file f JOIN workspace w ON w.id = f.workspace_id
				 WHERE f.id = ANY($1::int[])) AS files,
				(SELECT json_agg(json_build_object('id', w.id,
					'host_path', w.json_config->'broker'->>'host_path', 's3', ${S3_BROKER}))
				 FROM workspace w WHERE w.id = ANY($2::int[])) AS workspaces`,
			[fileIds, workspaceIds]
		);
		files = new Map((row.files ?? []).map(f => [f.id, f]));
		workspaces = new Map((row.workspaces ?? []).map(w => [w.id, w]));
	}
	return placed.map(exe => specFor(exe, files, workspaces, withCredentials));
}

const S3_BROKER = `CASE WHEN w.json_config->'broker'->>'type' = 's3' THEN w.json_config->'broker' END`;

function staged(file: FileRow, withCredentials: boolean): StagedFile {
	if (file.s3) {
		const place = s3PlaceOf(file.s3, withCredentials);
		const staged: StagedFile = {
			fileId: file.id,
			hostPath: `s3://${place.bucket}/${file.file_path}`,
			s3: { ...place, key: file.file_path },
			fileName: file.file_name,
			mediaType: file.media_type,
			size: Number(file.file_size)
		};
		if (typeof file.s3.host_path === "string") staged.mountRoot = file.s3.host_path;
		return staged;
	}
	return {
		fileId: file.id,
		hostPath: path.posix.join(file.host_path ?? "/", file.file_path),
		fileName: file.file_name,
		mediaType: file.media_type,
		size: Number(file.file_size)
	};
}

/**
 * What the agent runs itself instead of a command: a strike's monitor for the system job type
 * `scale-strike` (lib/ingest/monitor.ts), the strike named by its "Strike ID" input.
 */
function builtinTask(exe: PlacedExe): Pick<ExecutionSpec, "task"> {
	if (!exe.is_system || exe.name !== STRIKE_JOB_TYPE) return {};
	const input = (exe.data?.input_data ?? []).find(
		(i: { name: string }) => i.name === "Strike ID"
	);
	const strikeId = Number(input?.value);
	return Number.isInteger(strikeId) && strikeId > 0 ? { task: { kind: "strike", strikeId } } : {};
}

export function specFor(
	exe: PlacedExe,
	files: ReadonlyMap<number, FileRow>,
	workspaces: ReadonlyMap<number, WorkspaceRow>,
	withCredentials = false
): ExecutionSpec {
	const iface = exe.interface as JobInterface;
	const inputs: ExecutionSpec["inputs"] = {};
	for (const input of exe.data?.input_data ?? []) {
		if (typeof input.value === "string") {
			inputs[input.name] = { value: input.value };
			continue;
		}
		const ids = entryFileIds(input);
		inputs[input.name] = {
			files: ids.flatMap(id => {
				const file = files.get(id);
				return file ? [staged(file, withCredentials)] : [];
			})
		};
	}
	const outputWorkspaces: Record<string, OutputWorkspace> = {};
	for (const output of exe.data?.output_data ?? []) {
		const ws = workspaces.get(output.workspace_id);
		outputWorkspaces[output.name] = ws?.s3
			? {
					workspaceId: output.workspace_id,
					hostPath: "",
					s3: s3PlaceOf(ws.s3, withCredentials)
				}
			: { workspaceId: output.workspace_id, hostPath: ws?.host_path ?? "" };
	}
	return {
		jobExeId: exe.id,
		jobId: exe.job_id,
		jobType: {
			id: exe.job_type_id,
			name: exe.name,
			version: exe.version,
			usesDocker: exe.uses_docker,
			dockerImage: exe.docker_image,
			dockerPrivileged: exe.docker_privileged,
			isLongRunning: exe.is_long_running
		},
		interface: iface,
		inputs,
		outputWorkspaces,
		...builtinTask(exe),
		timeout: exe.is_long_running ? 0 : exe.timeout,
		resources: { cpus: exe.cpus, mem: exe.mem, disk: exe.disk_total },
		...(exe.rank ? { rank: exe.rank } : {})
	};
}

/**
 * What the scheduler knows of the executions it placed, from the statement that placed them:
 * what recording their ends reads of each (EndingExe). A report of executions all known here
 * then needs no read before the statement that completes them: a round trip less between a
 * recipe job's completion and its dependents' queueing, each a wait for a cpu under load
 * (docs/decisions.md, "Recipes"). Bounded: the oldest are forgotten first, and a report of an
 * execution forgotten, or placed by another replica, is read as before.
 */
export class PlacedExecutions {
	private readonly known = new Map<number, EndingExe>();

	constructor(private readonly max = 10000) {}

	get size(): number {
		return this.known.size;
	}

	remember(placed: readonly PlacedExe[]): void {
		for (const exe of placed) {
			this.known.set(exe.id, {
				id: exe.id,
				agent_id: exe.agent_id,
				job_id: exe.job_id,
				node_id: exe.node_id,
				num_exes: exe.num_exes,
				max_tries: exe.max_tries,
				job_type_id: exe.job_type_id,
				name: exe.name,
				version: exe.version,
				is_operational: exe.is_operational,
				is_long_running: exe.is_long_running,
				data: exe.data,
				interface: exe.interface,
				error_mapping: exe.error_mapping,
				in_recipe: exe.in_recipe
			});
		}
		// a Map iterates in insertion order: the first keys are the oldest
		for (const id of this.known.keys()) {
			if (this.known.size <= this.max) break;
			this.known.delete(id);
		}
	}

	/** The executions of these ids, all of them, each forgotten; null (and none forgotten) if one is not known. */
	takeAll(ids: readonly number[]): EndingExe[] | null {
		const found: EndingExe[] = [];
		for (const id of ids) {
			const exe = this.known.get(id);
			if (!exe) return null;
			found.push(exe);
		}
		for (const id of ids) this.known.delete(id);
		return found;
	}
}
