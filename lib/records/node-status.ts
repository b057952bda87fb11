import type { Sequelize } from "sequelize";
import { select, selectPrepared } from "../db/run";
import { parseTimestamptz } from "../db/timestamps";
import { recordsOf, withRecords } from "../list/cached-list";
import { generationsSql, versionOf, type RecordSpec } from "../list/record-spec";
import { AnswerCache } from "../list/answer-cache";
import { envelopeHead } from "../list/envelope";
import { formatDatetime } from "../validation/schema";
import { parseListQuery } from "../list/params";
import type { CachedRecord } from "../list/record-cache";
import { JOB_TYPE_BASE_FIELDS, jobExeScalars, jobTypeBaseOf } from "./job";
import { getNode, NODE_COLUMNS, nodeState, serializeNode, type NodeRow } from "./node";
import { hardwareResources } from "./status";

/**
 * A node's details and GET /nodes/status/ (Scale 3.0's NodeDetailsView and NodesStatusView):
 * each node with its executions counted by status over a range, whether it is online, and its
 * running executions. The running executions are records kept by version, as the lists' are
 * (lib/list/cached-list.ts): a cluster's status page shows hundreds of them, each with its job
 * and job type, and reading and serializing them whole at every poll cost ~10 ms per request.
 */

export interface Connectivity {
	/** Moleculer nodeIDs of the agents registered in the cluster now */
	agents: ReadonlySet<string>;
	leaseMs: number;
	now?: Date;
}

/** Whether a node's agent is registered in the cluster and heard from within the lease. */
export function isConnected(row: NodeRow, c: Connectivity): boolean {
	const now = (c.now ?? new Date()).getTime();
	return (
		row.agent_id !== null &&
		c.agents.has(row.agent_id) &&
		row.last_heartbeat !== null &&
		now - row.last_heartbeat.getTime() <= c.leaseMs
	);
}

const date = (d: Date | null) => (d ? formatDatetime(d) : null);
const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** Where a running execution's record is read whole: the execution, its job, type and error. */
const RUNNING_EXE_SOURCE = {
	from: "job_exe e",
	joins: `JOIN job j ON j.id = e.job_id JOIN job_type t ON t.id = j.job_type_id
		LEFT JOIN error er ON er.id = e.error_id`,
	key: "e.id",
	// The job type's summary columns only: its documents (interface, error mapping) are not shown.
	columns: `e.id, e.status, e.command_arguments, e.timeout, e.pre_started, e.pre_completed,
		e.pre_exit_code, e.job_started, e.job_completed, e.job_exit_code, e.post_started,
		e.post_completed, e.post_exit_code, e.created, e.queued, e.started, e.ended,
		e.last_modified, e.node_id, e.cpus_scheduled, e.mem_scheduled, e.disk_in_scheduled,
		e.disk_out_scheduled, e.disk_total_scheduled,
		j.id AS job_id, j.job_type_rev_id, j.event_id, j.error_id AS job_error_id,
		j.status AS job_status, j.priority AS job_priority, j.num_exes AS job_num_exes,
		j.job_type_id, ${JOB_TYPE_BASE_FIELDS.filter(f => f !== "id")
			.map(f => `t.${f} AS jt_${f}`)
			.join(", ")},
		CASE WHEN er.id IS NULL THEN NULL ELSE json_build_object('id', er.id, 'name', er.name,
			'title', er.title, 'description', er.description, 'category', er.category) END AS error`
};

/** A running execution as node details and node status show it (Scale's NodeStatusJobExecutionSerializer). */
export function serializeRunningExe(row: any) {
	// Object.assign, not a spread (see serializeScaleFileBase)
	return Object.assign(jobExeScalars(row), {
		job: {
			id: row.job_id,
			job_type: jobTypeBaseOf(row),
			job_type_rev: { id: row.job_type_rev_id },
			event: { id: row.event_id },
			error: row.job_error_id === null ? null : { id: row.job_error_id },
			status: row.job_status,
			priority: row.job_priority,
			num_exes: row.job_num_exes
		},
		node: { id: row.node_id },
		error: row.error,
		cpus_scheduled: num(row.cpus_scheduled),
		mem_scheduled: num(row.mem_scheduled),
		disk_in_scheduled: num(row.disk_in_scheduled),
		disk_out_scheduled: num(row.disk_out_scheduled),
		disk_total_scheduled: num(row.disk_total_scheduled)
	});
}

/**
 * Current while the execution's row (`xmin`), its job type and error are. The record shows its
 * job's columns too, yet the job's row is not read for the version: while an execution is
 * RUNNING its job changes only in the transactions that change the execution (placement sets
 * both RUNNING in one statement, lib/scheduling/place.ts; completion, failure, retry and cancel
 * end the execution with its job, lib/executions/finish.ts and lib/queue/cancel.ts; requeue and
 * the recipes' BLOCKED/PENDING touch only jobs with no live execution). Probing each running
 * execution's job for its `xmin` was ~0.28 ms of PostgreSQL's ~0.95 per GET /nodes/status/.
 */
const RUNNING_EXE_RECORD: RecordSpec<any> = {
	name: "running-exe",
	version: "e.xmin::text",
	versionJoins: "",
	generations: ["job_type", "error"],
	record: row => serializeRunningExe(row)
};

// Node by node (LATERAL, kept apart by OFFSET 0), so each reads the partial index of running
// executions by node: given all the nodes at once, or the LATERAL flattened, the planner read
// every live execution (~2,800 QUEUED and RUNNING; 1.0 ms against 0.6).
const RUNNING_EXE_KEYS = `
	-- the version is text, the same as the records read whole write it (versionSelect)
	SELECT e.id AS __key, e.node_id AS __node, ${RUNNING_EXE_RECORD.version} AS __version,
		${generationsSql(RUNNING_EXE_RECORD)} AS __generation
	FROM unnest($1::int[]) AS wanted(node_id)
		CROSS JOIN LATERAL (SELECT x.id, x.node_id, x.job_id, x.last_modified, x.xmin FROM job_exe x
			WHERE x.node_id = wanted.node_id AND x.status = 'RUNNING' OFFSET 0) e
	ORDER BY e.last_modified, e.id`;

/** Running executions by key, with their node and version (see versionOf). */
interface RunningKey {
	__key: number;
	__node: number;
	__version: string;
	__generation: string;
}

/** The records (JSON) of running executions, by node, in the keys' order. */
async function recordsByNode(
	db: Sequelize,
	rows: RunningKey[]
): Promise<Map<number, CachedRecord[]>> {
	const byNode = new Map<number, CachedRecord[]>();
	const keys = rows.map(row => ({ __key: row.__key, __version: versionOf(row) }));
	const records = await recordsOf(db, RUNNING_EXE_SOURCE, RUNNING_EXE_RECORD, keys, undefined);
	for (const row of rows) {
		const record = records.get(row.__key);
		if (record === undefined) continue; // gone between the two statements
		const list = byNode.get(row.__node) ?? [];
		list.push(record);
		byNode.set(row.__node, list);
	}
	return byNode;
}

/** The running executions' records (JSON) of each of the nodes, oldest change first. */
async function runningExes(db: Sequelize, nodeIds: number[]): Promise<Map<number, CachedRecord[]>> {
	if (nodeIds.length === 0) return new Map();
	return recordsByNode(db, await selectPrepared<RunningKey>(db, RUNNING_EXE_KEYS, [nodeIds]));
}

/**
 * GET /nodes/{id}/: the node record, its running executions, and (from the latest offer and the
 * running executions) its resources, total/scheduled/used; `disconnected` tells whether its agent
 * is gone from the cluster or out of its lease. `used` is zeros: real-time usage is not measured.
 */
export async function getNodeDetails(db: Sequelize, id: number, c: Connectivity) {
	const row = await getNode(db, id);
	const running = ((await runningExes(db, [id])).get(id) ?? []).map(record =>
		JSON.parse(record.json.toString())
	);
	const scheduled = running.reduce(
		(sum, e) => ({
			cpus: sum.cpus + (e.cpus_scheduled ?? 0),
			mem: sum.mem + (e.mem_scheduled ?? 0),
			disk: sum.disk + (e.disk_total_scheduled ?? 0)
		}),
		{ cpus: 0, mem: 0, disk: 0 }
	);
	const details: Record<string, unknown> = Object.assign(serializeNode(row), {
		job_exes_running: running,
		disconnected: !isConnected(row, c),
		state: nodeState(row, isConnected(row, c))
	});
	if (row.cpus_total !== null || row.mem_total !== null || row.disk_total !== null)
		details.resources = {
			total: hardwareResources(
				Number(row.cpus_total ?? 0),
				Number(row.mem_total ?? 0),
				Number(row.disk_total ?? 0)
			),
			scheduled: hardwareResources(scheduled.cpus, scheduled.mem, scheduled.disk),
			used: { cpus: 0, mem: 0, disk: 0 }
		};
	return details;
}

const STATUS_SPEC = {
	orderable: { id: "id" },
	defaultOrder: ["id"],
	timeColumn: "last_modified",
	filters: {}
};

/**
 * Whole answers of GET /nodes/status/, by their envelope's head (the page asked for, its count
 * and links), kept with the state they show (shownState): a web UI polls the page, and between
 * two changes of a node, a running execution, a job type or an error every poll is the same
 * answer. The statement runs at every request all the same; what a kept answer saves is putting
 * ~200 KB together again (docs/decisions.md, "Job type reports").
 */
const statusAnswers = new WeakMap<Sequelize, AnswerCache>();
const STATUS_ANSWER_BYTES = 8 * 1024 * 1024;

function answersOf(db: Sequelize): AnswerCache {
	let cache = statusAnswers.get(db);
	if (cache === undefined) statusAnswers.set(db, (cache = new AnswerCache(STATUS_ANSWER_BYTES)));
	return cache;
}

/**
 * Everything a page of node status shows, as one text: each node's shown columns, whether it is
 * online, its counts, and its running executions' keys with their versions (and the records'
 * generations), which stand for the records' contents as they do in the record cache.
 */
function shownState(
	nodes: (NodeRow & { __counts: string; __running: string | null; __generation: string })[],
	online: boolean[]
): string {
	const time = (d: Date | null) => (d === null ? null : d.getTime());
	return JSON.stringify(
		nodes.map((n, i) => [
			n.id,
			n.hostname,
			n.port,
			n.slave_id,
			n.pause_reason,
			n.is_paused,
			n.is_paused_errors,
			n.is_active,
			time(n.draining_since),
			n.drain_by,
			time(n.archived),
			time(n.created),
			time(n.last_offer),
			time(n.last_modified),
			n.agent_id,
			time(n.last_heartbeat),
			n.cpus_total,
			n.mem_total,
			n.disk_total,
			online[i],
			n.__counts,
			n.__running,
			n.__generation
		])
	);
}

const COMMA = Buffer.from(",");
const CLOSE = Buffer.from("]}");

/**
 * GET /nodes/status/: one entry per active node (paged), with the counts of the executions it
 * handled in the range (started defaults to 3 hours ago) by status (and error category for
 * FAILED), whether it is online, and its running executions. The answer is the envelope's JSON,
 * UTF-8, put together from the running executions' kept records.
 */
export async function getNodesStatus(
	db: Sequelize,
	req: { query: Record<string, unknown>; baseUrl: string; path: string },
	c: Connectivity
): Promise<Buffer> {
	const given = req.query.started;
	const query =
		given === undefined || given === "" ? { ...req.query, started: "PT3H" } : req.query;
	const p = parseListQuery(query, STATUS_SPEC, c.now);
	// One statement: the page of nodes, each with its executions counted in the range (on
	// (node_id, last_modified, id)) and its running executions' keys and versions (on the partial
	// index of running executions by node), as JSON arrays. Three statements cost PostgreSQL
	// ~0.3 ms each of their own besides their work. The range (always both ends: started is PT3H
	// unless given, ended then now) through sub-selects, so that PostgreSQL reuses a generic plan
	// rather than plan the statement at every request (~0.8 ms; see getJobTypeStatus). The range
	// ends after the millisecond `ended` names: the service's clock counts milliseconds and the
	// rows' times microseconds, so an execution that ended within the request's own millisecond
	// was left out (and the answer cached without it) when compared with `<= ended`.
	const nodes = await selectPrepared<
		NodeRow & {
			__total: string;
			/** JSON `[[status, category, count, most_recent], ...]`, as text (see shownState) */
			__counts: string;
			/** `id:xmin,id:xmin...` (text: ~40 µs less of PostgreSQL than JSON pairs), or null */
			__running: string | null;
			__scheduled: string;
			__generation: string;
		}
	>(
		db,
		`SELECT n.*,
			(SELECT COALESCE(json_agg(json_build_array(c.status, c.category, c.n, c.most_recent)
				ORDER BY c.status, c.category NULLS FIRST), '[]')
			 FROM (SELECT e.status, er.category, count(*) AS n, max(e.last_modified)::text AS most_recent
				FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
				WHERE e.node_id = n.id AND e.last_modified >= (SELECT $3::timestamptz)
					AND e.last_modified < (SELECT $4::timestamptz + interval '1 millisecond')
				GROUP BY e.status, er.category) c)::text AS __counts,
			(SELECT string_agg(x.id || ':' || x.xmin, ',' ORDER BY x.last_modified, x.id)
			 FROM job_exe x
			 WHERE x.node_id = n.id AND x.status = 'RUNNING') AS __running,
			(SELECT json_build_array(coalesce(sum(x.cpus_scheduled), 0),
				coalesce(sum(x.mem_scheduled), 0), coalesce(sum(x.disk_total_scheduled), 0))
			 FROM job_exe x
			 WHERE x.node_id = n.id AND x.status = 'RUNNING')::text AS __scheduled,
			${generationsSql(RUNNING_EXE_RECORD)} AS __generation
		 FROM (SELECT ${NODE_COLUMNS}, count(*) OVER () AS __total FROM node WHERE is_active
			ORDER BY hostname, id LIMIT $1 OFFSET $2) n
		 ORDER BY n.hostname, n.id`,
		[p.limit + 1, p.offset, p.started, p.ended]
	);
	const hasMore = nodes.length > p.limit;
	if (hasMore) nodes.pop();
	let count = nodes.length > 0 ? Number(nodes[0].__total) : 0;
	if (nodes.length === 0 && p.offset > 0) {
		const [row] = await select<{ n: string }>(
			db,
			"SELECT count(*) AS n FROM node WHERE is_active"
		);
		count = Number(row.n);
	}
	const headText = envelopeHead(req, p, count, hasMore);
	const online = nodes.map(n => isConnected(n, c));
	const answers = answersOf(db);
	const state = shownState(nodes, online);
	const kept = answers.get(headText, state);
	if (kept !== undefined) return kept;
	const head = Buffer.from(headText);
	// Each entry up to its last member, `job_exes_running`, whose records are written from the
	// cache after it; the keys of its running executions, in the order the page shows them.
	const entries = nodes.map((n, i) => {
		const running: number[] = [];
		const keys: { __key: number; __version: string }[] = [];
		for (const pair of n.__running === null ? [] : n.__running.split(",")) {
			const colon = pair.indexOf(":");
			const key = Number(pair.slice(0, colon));
			running.push(key);
			keys.push({
				__key: key,
				__version: versionOf({
					__version: pair.slice(colon + 1),
					__generation: n.__generation
				})
			});
		}
		const counts = (JSON.parse(n.__counts) as [string, string | null, number, string][]).map(
			([status, category, total, mostRecent]) => ({
				status,
				count: Number(total),
				most_recent: date(parseTimestamptz(mostRecent)),
				category
			})
		);
		const [cpus, mem, disk] = (JSON.parse(n.__scheduled) as number[]).map(Number);
		const offered = hardwareResources(
			Number(n.cpus_total ?? 0),
			Number(n.mem_total ?? 0),
			Number(n.disk_total ?? 0)
		);
		const entry = JSON.stringify({
			node: serializeNode(n),
			is_online: online[i],
			state: nodeState(n, online[i]),
			resources: {
				offered,
				free: hardwareResources(offered.cpus - cpus, offered.mem - mem, offered.disk - disk)
			},
			job_exe_counts: counts,
			job_exes_running: []
		});
		return { open: Buffer.from(entry.slice(0, -2)), running, keys };
	});
	// the answer written in one copy, the records straight from the cache (see withRecords)
	const answer = await withRecords(
		db,
		RUNNING_EXE_SOURCE,
		RUNNING_EXE_RECORD,
		entries.flatMap(e => e.keys),
		undefined,
		found => {
			// a record gone between the two statements is left out
			const records = entries.map(e => {
				const jsons: Buffer[] = [];
				for (const key of e.running) {
					const record = found.get(key);
					if (record !== undefined) jsons.push(record.json);
				}
				return jsons;
			});
			let length = head.length + CLOSE.length;
			entries.forEach((e, i) => {
				length += (i > 0 ? 1 : 0) + e.open.length + CLOSE.length;
				records[i].forEach((json, j) => (length += json.length + (j > 0 ? 1 : 0)));
			});
			const out = Buffer.allocUnsafe(length);
			let offset = head.copy(out, 0);
			entries.forEach((e, i) => {
				if (i > 0) offset += COMMA.copy(out, offset);
				offset += e.open.copy(out, offset);
				records[i].forEach((json, j) => {
					if (j > 0) offset += COMMA.copy(out, offset);
					offset += json.copy(out, offset);
				});
				offset += CLOSE.copy(out, offset);
			});
			CLOSE.copy(out, offset);
			return out;
		}
	);
	answers.set(headText, state, answer);
	return answer;
}
