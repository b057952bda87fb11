/**
 * The messages between the control plane (scheduler, nodes, job-executions services) and the
 * node agents. Agents hold no database credentials: everything they need to run an execution
 * arrives in an ExecutionSpec, and everything they learn goes back through these actions. All
 * are Moleculer actions (acknowledged), never fire-and-forget events, because a lost message
 * would lose a job; every receiver applies them as guarded transitions, so a repeat is harmless.
 *
 * Control plane → agent (always targeted: `ctx.call(name, params, { nodeID: agentId })`):
 *   node-agent.run     { executions: ExecutionSpec[] } (or one ExecutionSpec)
 *                                              → RunAnswer   (returns at once; the scheduler
 *                      sends the executions it placed on the agent together)
 *   node-agent.cancel  { jobExeId }              → { found: boolean }   (SIGTERM, then SIGKILL;
 *                      an id not held here is remembered for a minute: a run of it arriving
 *                      meanwhile, overtaken by its cancel, is not started but reported CANCELED)
 *   node-agent.logs    { jobExeId }              → ExecutionLogs
 *
 * Agent → control plane:
 *   nodes.register     NodeRegistration         → NodeRegistrationAnswer
 *   nodes.heartbeat    NodeHeartbeat            → NodeHeartbeatAnswer (the agent cancels the
 *                      executions listed in `cancel`, and drains when `drain` says so)
 *   nodes.drain        NodeDrain                → { ok: true, nodeId }  (the agent is shutting
 *                      down: nothing new is placed on its node once this is answered)
 *   scheduler.exeSteps { steps: ExecutionStep[] } → { ok: boolean }  (best effort; gathered for a
 *                      moment, so a short execution's steps come only with its report)
 *   scheduler.exeFinished { reports: ExecutionFinished[] } (or one ExecutionFinished)
 *                                              → { ok: boolean }  (the agent sends the reports of
 *                      executions that ended in the same turn of its event loop together, and
 *                      retries until it gets an answer)
 */

import type { S3Place } from "./s3-broker";

export interface Resources {
	cpus: number;
	/** MiB */
	mem: number;
	/** MiB */
	disk: number;
}

/**
 * What a node's Docker engine offers, as its agent sees it (in NodeRegistration and in every
 * NodeHeartbeat). Absent: no engine (as from agents older than this field). The scheduler places
 * a container job type (uses_docker) only on a node whose engine answers, that has its image or
 * pulls, and that allows privileged containers if the type is docker_privileged.
 */
/** How many image references a NodeDocker carries at most, and how long each may be. */
/**
 * The tail of stdout and of stderr a report and the live logs carry: a report carries both, and
 * NATS refuses messages above its max_payload (1 MB by default). The files stay whole on the node.
 */
export const LOG_TAIL_BYTES = 256 * 1024;

export const NODE_DOCKER_LIMITS = { images: 10_000, length: 500 };

export interface NodeDocker {
	/** a Docker engine answers on the node */
	engine: boolean;
	/** the agent is configured to pull the images it lacks */
	pull: boolean;
	/**
	 * the engine's images as it lists them: RepoTags ("busybox:latest",
	 * "registry:5000/x/y:1.2") and RepoDigests ("x/y@sha256:..."); the control plane normalises
	 * them (lib/documents/images.ts). At most 10,000, each at most 500 characters.
	 */
	images: string[];
	/** the agent runs docker_privileged job types */
	privileged: boolean;
}

export interface NodeRegistration {
	/** the agent's Moleculer nodeID: where the control plane sends run/cancel/logs */
	agentId: string;
	/** stable across agent restarts on one machine (kept in the agent's work directory) */
	slaveId: string;
	hostname: string;
	port: number;
	/** what this node offers in all (after configured caps) */
	resources: Resources;
	/** its Docker engine (absent: none) */
	docker?: NodeDocker;
	/** the agent is shutting down (draining): a registration during its drain keeps the node's */
	draining?: boolean;
}

/** The answer to nodes.register; `drain`: the node is to drain (a user's drain of it stands). */
export interface NodeRegistrationAnswer {
	nodeId: number;
	drain?: true;
}

/** An agent shutting down says so (nodes.drain), before it lets its executions end. */
export interface NodeDrain {
	agentId: string;
	slaveId: string;
}

export interface NodeHeartbeat {
	agentId: string;
	slaveId: string;
	resources: Resources;
	/** its Docker engine now (absent: none); stored only when it changed */
	docker?: NodeDocker;
	/**
	 * executions the agent holds now: running, or finished with the report not yet acknowledged
	 * (the control plane fails the ones it thinks run there but are not listed)
	 */
	running: number[];
	/** the agent is shutting down (draining): its node drains, if it did not already */
	draining?: boolean;
}

export interface NodeHeartbeatAnswer {
	ok: true;
	nodeId: number;
	/**
	 * among `running`, the executions that must not run (ended in the database, CANCELED,
	 * FAILED or COMPLETED, unknown to it, or running elsewhere): the agent cancels them. This
	 * catches a cancel that never reached the agent, or reached it before the run and was
	 * forgotten by then.
	 */
	cancel: number[];
	/**
	 * present when the node is draining (its agent's shutdown, or a user's drain: PATCH
	 * /nodes/{id}/ is_draining): the agent takes no new run and lets its executions end within
	 * its drain time. Absent: not draining, and a user's drain the agent follows is over.
	 */
	drain?: true;
}

/**
 * A file input staged from a workspace: the agent copies `hostPath` into the task directory, or
 * downloads the object `s3` names.
 */
export interface StagedFile {
	fileId: number;
	/** absolute path of the file in its (host-mounted) workspace; `s3://bucket/key` in S3 */
	hostPath: string;
	/** the object of a file in an s3 workspace */
	s3?: S3Place & { key: string };
	/**
	 * an s3 workspace's `host_path`, where the nodes mount its bucket read-only: a `partial`
	 * input's file is read at `<mountRoot>/<key>` there instead of downloaded
	 */
	mountRoot?: string;
	fileName: string;
	mediaType: string;
	size: number;
}

export interface OutputWorkspace {
	workspaceId: number;
	/** absolute directory of the workspace on the host ("" for an s3 workspace) */
	hostPath: string;
	/** an s3 workspace's bucket: products are uploaded there, under the same paths */
	s3?: S3Place;
}

export interface ExecutionSpec {
	jobExeId: number;
	jobId: number;
	jobType: {
		id: number;
		name: string;
		version: string;
		usesDocker: boolean;
		dockerImage: string | null;
		dockerPrivileged: boolean;
		isLongRunning: boolean;
	};
	/** the job type revision's interface (job interface 1.0, normalised) */
	interface: import("./types").JobInterface;
	/** property inputs → value; file inputs → one file; files inputs → several */
	inputs: Record<string, { value: string } | { files: StagedFile[] }>;
	/** output name → where its files go */
	outputWorkspaces: Record<string, OutputWorkspace>;
	/** seconds; 0 or a long-running type = no timeout */
	timeout: number;
	resources: Resources;
	/** what the agent runs itself instead of the interface's command (a system job type's work) */
	task?: BuiltinTask;
	/** its place in the queue when placed: the agent launches what it holds in this order */
	rank?: Rank;
}

/**
 * An execution's place in the queue, as the scheduler read it: [priority, queued (µs since
 * 1970), queue row id]; the lower first, compared in that order (compareRanks).
 */
export type Rank = [priority: number, queuedUs: number, queueId: number];

/** Orders ranks as the queue does (priority, queued, id): negative when `a` goes first. */
export function compareRanks(a: Rank, b: Rank): number {
	for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
	return 0;
}

/** A strike's monitor (lib/ingest/monitor.ts), for the system job type `scale-strike`. */
export interface BuiltinTask {
	kind: "strike";
	strikeId: number;
}

export type Step = "pre" | "main" | "post";

export interface ExecutionStep {
	jobExeId: number;
	agentId: string;
	step: Step;
	event: "started" | "completed";
	/** ISO-8601 */
	at: string;
	exitCode?: number | null;
	/** after pre: the substituted command line (arguments joined for display) */
	commandArguments?: string;
}

/** A product file the agent has copied into its output workspace. */
export interface ProducedFile {
	outputName: string;
	workspaceId: number;
	/** path relative to the workspace root */
	filePath: string;
	fileName: string;
	/** from the manifest or the interface, else from the extension */
	mediaType: string;
	size: number;
	/** the store's checksum of the file: an S3 ETag */
	etag?: string | null;
	dataStarted?: string | null;
	dataEnded?: string | null;
	/** GeoJSON geometry from the manifest's geo_metadata, as given */
	geoJson?: unknown;
}

export interface ExecutionFinished {
	jobExeId: number;
	agentId: string;
	status: "COMPLETED" | "FAILED" | "CANCELED";
	/** exit code of the main process (null when it never ran or was killed by a signal) */
	exitCode: number | null;
	/**
	 * the SYSTEM error the agent itself diagnosed (`timeout`, `task-launch`,
	 * `docker-task-launch`, `filesystem-io`, ...) or, with exitCode set and no errorName, an
	 * algorithm failure the control plane maps through the job type's error mapping
	 */
	errorName?: string | null;
	/** a human sentence for the log of what went wrong */
	errorDetail?: string | null;
	products: ProducedFile[];
	/** the results manifest as read (1.1 shape), with ARTIFACT lines merged */
	resultsManifest: unknown | null;
	/** the manifest's parse_results, applied by the control plane to source inputs */
	parseResults: unknown[];
	stdout: string;
	stderr: string;
	/** after pre: the substituted command line (as in the pre step's completion) */
	commandArguments?: string;
	/** ISO-8601 of each step, for the execution record */
	steps: Partial<
		Record<Step, { started?: string; completed?: string; exitCode?: number | null }>
	>;
}

export interface ExecutionLogs {
	stdout: string;
	stderr: string;
	is_finished: boolean;
}

/**
 * An agent's launch pipeline, for the scheduler's launch window (lib/scheduling/launch-window.ts):
 * how many executions it holds not launched yet (the ones of this call among them), and how many
 * it launches a second while it has a backlog (0: not measured yet).
 */
export interface LaunchState {
	rate: number;
	backlog: number;
}

/** `node-agent.run`'s answer (`launch` absent from agents older than the launch window). */
export interface RunAnswer {
	accepted: true;
	launch?: LaunchState;
}

/**
 * NATS refuses a message above its max_payload (1 MB by default). A call that carries several
 * executions or reports (`node-agent.run`, `scheduler.exeFinished`) is kept under CALL_CHARS
 * characters of JSON, at most three bytes each in UTF-8 (768 KiB); an item above that goes in a
 * call of its own, as every item did before calls carried several.
 */
export const CALL_CHARS = 256 * 1024;

/** Splits `items`, in order, into groups whose JSON adds up to at most `limit` characters. */
export function callGroups<T>(
	items: readonly T[],
	jsonOf: (item: T) => unknown = item => item,
	limit = CALL_CHARS
): T[][] {
	const groups: T[][] = [];
	let group: T[] = [];
	let size = 0;
	for (const item of items) {
		const chars = JSON.stringify(jsonOf(item)).length;
		if (group.length > 0 && size + chars > limit) {
			groups.push(group);
			group = [];
			size = 0;
		}
		group.push(item);
		size += chars;
	}
	if (group.length > 0) groups.push(group);
	return groups;
}
