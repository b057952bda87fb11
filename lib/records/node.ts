import type { Sequelize } from "sequelize";
import type { NodeHeartbeat, NodeRegistration } from "../documents/agent-protocol";
import { select, write, type Sql } from "../db/run";
import { BadRequestError, NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import { imagesHash, normalizeImages } from "../documents/images";

/**
 * Nodes (Scale 3.0's node/models.py, views.py, serializers.py): one row per cluster machine,
 * registered by its agent (slave_id is the agent's stable id), refreshed by its heartbeats (the
 * latest offer and the lease), and paused, resumed or archived by users.
 */

export interface NodeRow {
	id: number;
	hostname: string;
	port: number;
	slave_id: string;
	agent_id: string | null;
	pause_reason: string | null;
	is_paused: boolean;
	is_paused_errors: boolean;
	is_active: boolean;
	cpus_total: number | null;
	mem_total: number | null;
	disk_total: number | null;
	last_offer: Date | null;
	last_heartbeat: Date | null;
	created: Date;
	archived: Date | null;
	last_modified: Date;
	/** its Docker engine (migration 0024); the image list itself is not read with the row */
	docker_engine: boolean;
	docker_pull: boolean;
	docker_privileged: boolean;
	/** how many images its engine has (cardinality of docker_images) */
	docker_image_count: number;
	/** when the node began to drain (migration 0026); null: it is not draining */
	draining_since: Date | null;
	/** who drains it: its agent, shutting down, or a user (PATCH is_draining); null: nobody */
	drain_by: "agent" | "user" | null;
}

/**
 * The columns of a NodeRow: every column of `node` but its Docker image list, which may be long
 * (up to 10,000 references) and which only the scheduler reads, counted instead.
 */
export const NODE_COLUMNS = `id, hostname, port, slave_id, agent_id, pause_reason, is_paused,
	is_paused_errors, is_active, cpus_total, mem_total, disk_total, last_offer, last_heartbeat,
	created, archived, last_modified, docker_engine, docker_pull, docker_privileged,
	cardinality(docker_images) AS docker_image_count, draining_since, drain_by`;

const date = (d: Date | null) => (d ? formatDatetime(d) : null);

/** How a node stands: lost (its agent gone or out of its lease) first, then draining, paused. */
export type NodeState = "online" | "paused" | "draining" | "lost" | "inactive";

export function nodeState(row: NodeRow, online: boolean): NodeState {
	if (!row.is_active) return "inactive";
	if (!online) return "lost";
	if (row.draining_since !== null) return "draining";
	return row.is_paused ? "paused" : "online";
}

/**
 * Scale's NodeSerializer, with the drain (not in Scale 3.0): `is_draining`, `draining_since` and
 * `drain_by` (`agent`: its agent is shutting down; `user`: drained through the API or the REPL);
 * and ours: `agent_id`, the Moleculer node id of the agent that registered it (three agents on
 * one machine are three nodes of one hostname, told apart by it), and its `last_heartbeat`.
 */
export function serializeNode(row: NodeRow) {
	return {
		id: row.id,
		hostname: row.hostname,
		port: row.port,
		slave_id: row.slave_id,
		agent_id: row.agent_id,
		last_heartbeat: date(row.last_heartbeat),
		pause_reason: row.pause_reason,
		is_paused: row.is_paused,
		is_paused_errors: row.is_paused_errors,
		is_active: row.is_active,
		is_draining: row.draining_since !== null,
		draining_since: date(row.draining_since),
		drain_by: row.drain_by,
		archived: date(row.archived),
		created: formatDatetime(row.created),
		last_offer: date(row.last_offer),
		last_modified: formatDatetime(row.last_modified)
	};
}

const ORDERABLE = Object.fromEntries(
	[
		"id",
		"hostname",
		"port",
		"slave_id",
		"pause_reason",
		"is_paused",
		"is_paused_errors",
		"is_active",
		"draining_since",
		"archived",
		"created",
		"last_offer",
		"last_modified"
	].map(k => [k, `node.${k}`])
);

/** GET /nodes/?include_inactive=true: every node; ordered by last_modified as Scale's get_nodes. */
export const NODE_LIST_ALL: ListSource = {
	from: "node",
	columns: NODE_COLUMNS,
	orderable: ORDERABLE,
	defaultOrder: ["last_modified"],
	timeColumn: "node.last_modified",
	filters: {}
};

/** GET /nodes/: the active nodes only. */
export const NODE_LIST_ACTIVE: ListSource = {
	...NODE_LIST_ALL,
	from: "(SELECT * FROM node WHERE is_active) node"
};

/** Scale's parse_bool: true/t/1 and false/f/0, any case. */
export function parseBoolParam(value: unknown, field: string, fallback: boolean): boolean {
	const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
	if (list.length === 0 || list[list.length - 1] === "") return fallback;
	const text = String(list[list.length - 1])
		.trim()
		.toLowerCase();
	if (["true", "t", "1"].includes(text)) return true;
	if (["false", "f", "0"].includes(text)) return false;
	throw new BadRequestError(`${field}: must be a boolean (true or false), got "${text}"`, {
		field
	});
}

// ---- agents: registration and heartbeats ------------------------------------------------------

export interface NodeChange {
	id: number;
	/** anything the scheduler cares about changed: resources, agent, or it was out of its lease */
	changed: boolean;
	/** the node is draining (its agent's shutdown or a user's drain) */
	drain: boolean;
}

/**
 * The drain columns as a registration leaves them: an agent that says it is draining (shutting
 * down) drains its node; otherwise a drain of its own ends (a new process came up), a user's stays.
 * `$n` is the registration's `draining` flag.
 */
function drainOnRegistration(n: number): string {
	return `draining_since = CASE WHEN $${n}::boolean THEN coalesce(node.draining_since, now())
				WHEN node.drain_by = 'user' THEN node.draining_since END,
			drain_by = CASE WHEN $${n}::boolean THEN coalesce(node.drain_by, 'agent')
				WHEN node.drain_by = 'user' THEN 'user' END`;
}

/** A node's Docker engine as stored (NodeDocker normalised; absent = no engine). */
export interface StoredDocker {
	engine: boolean;
	pull: boolean;
	privileged: boolean;
	/** normalised, sorted (lib/documents/images.ts) */
	images: string[];
	hash: string;
}

export function storedDocker(docker: NodeRegistration["docker"]): StoredDocker {
	if (!docker) return { engine: false, pull: false, privileged: false, images: [], hash: "" };
	const images = normalizeImages(docker.images);
	return {
		engine: docker.engine,
		pull: docker.pull,
		privileged: docker.privileged,
		images,
		hash: imagesHash(images)
	};
}

/**
 * Registers (or re-registers) an agent's node by slave_id, with its offer and a fresh lease, and
 * its drain as drainOnRegistration says.
 */
export async function registerNode(db: Sequelize, reg: NodeRegistration): Promise<NodeChange> {
	const docker = storedDocker(reg.docker);
	const [row] = await write<{ id: number; drain: boolean }>(
		db,
		`INSERT INTO node (hostname, port, slave_id, agent_id, cpus_total, mem_total, disk_total,
			last_offer, last_heartbeat, docker_engine, docker_pull, docker_privileged,
			docker_images, docker_images_hash, draining_since, drain_by)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), $8, $9, $10, $11::text[], $12,
			CASE WHEN $13::boolean THEN now() END, CASE WHEN $13::boolean THEN 'agent' END)
		 ON CONFLICT (slave_id) DO UPDATE SET hostname = EXCLUDED.hostname, port = EXCLUDED.port,
			agent_id = EXCLUDED.agent_id, cpus_total = EXCLUDED.cpus_total,
			mem_total = EXCLUDED.mem_total, disk_total = EXCLUDED.disk_total, last_offer = now(),
			last_heartbeat = now(), last_modified = now(),
			docker_engine = EXCLUDED.docker_engine, docker_pull = EXCLUDED.docker_pull,
			docker_privileged = EXCLUDED.docker_privileged,
			docker_images = CASE WHEN node.docker_images_hash = EXCLUDED.docker_images_hash
				THEN node.docker_images ELSE EXCLUDED.docker_images END,
			docker_images_hash = EXCLUDED.docker_images_hash,
			${drainOnRegistration(13)}
		 RETURNING id, draining_since IS NOT NULL AS drain`,
		[
			reg.hostname,
			reg.port ?? 0,
			reg.slaveId,
			reg.agentId,
			reg.resources.cpus,
			reg.resources.mem,
			reg.resources.disk,
			docker.engine,
			docker.pull,
			docker.privileged,
			docker.images,
			docker.hash,
			reg.draining === true
		]
	);
	return { id: row.id, changed: true, drain: row.drain };
}

/**
 * A heartbeat: the agent's current offer, its Docker engine, and a renewed lease. Null when no
 * node has the slave id (the agent must register). `changed` when the offer, the engine or the
 * agent changed, or the node had been out of its lease (so it may take work again). An agent that
 * says it is draining (shutting down) drains its node, if it was not; `drain` answers whether
 * the node drains (a user's drain too, which the agent learns of here).
 *
 * One statement, as before the engine was reported: the row is rewritten at every heartbeat
 * anyway (the lease), and the engine's columns are set in the same write. The image list is
 * compared by its hash and bound again only when that differs (`ELSE n.docker_images` keeps
 * the stored value, out-of-line storage included, as it is).
 */
export async function heartbeatNode(
	db: Sequelize,
	hb: NodeHeartbeat,
	leaseMs: number
): Promise<NodeChange | null> {
	const docker = storedDocker(hb.docker);
	const [row] = await write<{ id: number; changed: boolean; drain: boolean }>(
		db,
		`UPDATE node n SET agent_id = $2, cpus_total = $3, mem_total = $4, disk_total = $5,
			last_offer = now(), last_heartbeat = now(),
			draining_since = CASE WHEN $12::boolean THEN coalesce(old.draining_since, now())
				ELSE old.draining_since END,
			drain_by = CASE WHEN $12::boolean THEN coalesce(old.drain_by, 'agent') ELSE old.drain_by END,
			docker_engine = $7, docker_pull = $8, docker_privileged = $9,
			docker_images = CASE WHEN old.docker_images_hash = $10 THEN n.docker_images
				ELSE $11::text[] END,
			docker_images_hash = $10,
			last_modified = CASE WHEN old.agent_id IS DISTINCT FROM $2
				OR old.cpus_total IS DISTINCT FROM $3::float8 OR old.mem_total IS DISTINCT FROM $4::float8
				OR old.disk_total IS DISTINCT FROM $5::float8 OR old.docker_engine <> $7::boolean
				OR old.docker_pull <> $8::boolean OR old.docker_privileged <> $9::boolean
				OR old.docker_images_hash <> $10::text
				OR ($12::boolean AND old.draining_since IS NULL) THEN now() ELSE n.last_modified END
		 FROM (SELECT id, agent_id, cpus_total, mem_total, disk_total, last_heartbeat,
				docker_engine, docker_pull, docker_privileged, docker_images_hash, draining_since,
				drain_by
			   FROM node WHERE slave_id = $1 FOR UPDATE) old
		 WHERE n.id = old.id
		 RETURNING n.id, (old.agent_id IS DISTINCT FROM $2
			OR old.cpus_total IS DISTINCT FROM $3::float8 OR old.mem_total IS DISTINCT FROM $4::float8
			OR old.disk_total IS DISTINCT FROM $5::float8 OR old.last_heartbeat IS NULL
			OR old.last_heartbeat < now() - $6::int * interval '1 millisecond'
			OR old.docker_engine <> $7::boolean OR old.docker_pull <> $8::boolean
			OR old.docker_privileged <> $9::boolean OR old.docker_images_hash <> $10::text) AS changed,
			n.draining_since IS NOT NULL AS drain`,
		[
			hb.slaveId,
			hb.agentId,
			hb.resources.cpus,
			hb.resources.mem,
			hb.resources.disk,
			Math.round(leaseMs),
			docker.engine,
			docker.pull,
			docker.privileged,
			docker.hash,
			docker.images,
			hb.draining === true
		]
	);
	return row ? { id: row.id, changed: row.changed, drain: row.drain } : null;
}

/**
 * An agent shutting down drains its node (nodes.drain): nothing new is placed there from the
 * commit on (a placement that share-locked the row first is waited for). Null when no node has
 * the slave id. A drain under way keeps its start and, a user's, its author; the agent is the
 * node's, as a heartbeat would make it.
 */
export async function drainNode(
	db: Sequelize,
	agent: { agentId: string; slaveId: string }
): Promise<{ id: number; since: Date } | null> {
	const [row] = await write<{ id: number; since: Date }>(
		db,
		`UPDATE node SET agent_id = $2::text, draining_since = coalesce(draining_since, now()),
			drain_by = coalesce(drain_by, 'agent'),
			last_modified = CASE WHEN draining_since IS NULL OR agent_id IS DISTINCT FROM $2::text
				THEN now() ELSE last_modified END
		 WHERE slave_id = $1 RETURNING id, draining_since AS since`,
		[agent.slaveId, agent.agentId]
	);
	return row ?? null;
}

/** Forgets an agent that left the cluster: its nodes have no agent until one registers. */
export async function clearAgent(db: Sequelize, agentId: string): Promise<number[]> {
	const rows = await write<{ id: number }>(
		db,
		`UPDATE node SET agent_id = NULL, last_modified = now() WHERE agent_id = $1 RETURNING id`,
		[agentId]
	);
	return rows.map(r => r.id);
}

/**
 * Among the executions an agent says it holds, those it must not run: ended (CANCELED, FAILED,
 * COMPLETED), unknown, or RUNNING on another agent; the database is the record, and an agent
 * learns of an execution only after its placement committed, so none of these can be on its way.
 * The usual one: a cancel committed after the placement and reached the agent before its run (or
 * not at all), so the process was started after all. Ids in ascending order.
 */
export async function executionsToStop(
	db: Sequelize,
	agentId: string,
	held: readonly number[]
): Promise<number[]> {
	const ids = [...new Set(held)].sort((a, b) => a - b);
	if (ids.length === 0) return [];
	const running = await select<{ id: number }>(
		db,
		`SELECT id FROM job_exe WHERE id = ANY($1::int[]) AND status = 'RUNNING' AND agent_id = $2`,
		[ids, agentId]
	);
	const here = new Set(running.map(r => r.id));
	return ids.filter(id => !here.has(id));
}

// ---- user edits ------------------------------------------------------------------------------

/**
 * PUT: all of the required ones; PATCH: any of them (Scale's NodeDetailsView). `is_draining` is
 * ours: true drains the node (a user's drain), false ends any drain.
 */
export const NODE_UPDATE_FIELDS = [
	"hostname",
	"port",
	"pause_reason",
	"is_paused",
	"is_active",
	"is_draining"
];
export const NODE_REQUIRED_FIELDS = ["hostname", "port", "is_paused", "is_active"];

export interface NodeEdit {
	hostname?: string;
	port?: number;
	pause_reason?: string | null;
	is_paused?: boolean;
	is_active?: boolean;
	is_draining?: boolean;
}

function plain(message: string): BadRequestError {
	return new BadRequestError(message, { plainText: true });
}

/**
 * Checks a replace (PUT, every required field) or update (PATCH, at least one field) body, as
 * Scale does: missing and unexpected fields are a text/plain 400 listing them; so are values of
 * the wrong type.
 */
export function parseNodeEdit(body: Record<string, unknown>, mode: "replace" | "update"): NodeEdit {
	const keys = Object.keys(body);
	const problems: string[] = [];
	if (mode === "replace") {
		const missing = NODE_REQUIRED_FIELDS.filter(f => !keys.includes(f));
		if (missing.length > 0) problems.push(`Missing required fields: ${missing.join(", ")}`);
	}
	const extra = keys.filter(k => !NODE_UPDATE_FIELDS.includes(k));
	if (extra.length > 0) problems.push(`Unexpected fields: ${extra.join(", ")}`);
	if (problems.length > 0) throw plain(problems.join("\n"));
	if (keys.length === 0) throw plain("No fields specified for update.");

	const edit: NodeEdit = {};
	if ("hostname" in body) {
		const v = body.hostname;
		if (typeof v !== "string" || v.trim() === "" || v.length > 250 || v.includes("\u0000"))
			throw plain("hostname: must be a non-empty string of at most 250 characters");
		edit.hostname = v;
	}
	if ("port" in body) {
		const v = body.port;
		if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 65535)
			throw plain("port: must be an integer from 0 to 65535");
		edit.port = v as number;
	}
	if ("pause_reason" in body) {
		const v = body.pause_reason;
		if (v !== null && (typeof v !== "string" || v.length > 250 || v.includes("\u0000")))
			throw plain("pause_reason: must be a string of at most 250 characters, or null");
		edit.pause_reason = v as string | null;
	}
	for (const flag of ["is_paused", "is_active", "is_draining"] as const) {
		if (flag in body) {
			if (typeof body[flag] !== "boolean") throw plain(`${flag}: must be true or false`);
			edit[flag] = body[flag] as boolean;
		}
	}
	return edit;
}

function notFound(id: number): NotFoundError {
	return new NotFoundError(`No node with id ${id}`, { plainText: true });
}

export async function getNode(db: Sequelize, id: number, t?: Sql): Promise<NodeRow> {
	const [row] = await select<NodeRow>(
		db,
		`SELECT ${NODE_COLUMNS} FROM node WHERE id = $1`,
		[id],
		t
	);
	if (!row) throw notFound(id);
	return row;
}

/**
 * Applies an edit as Scale's update_node: a change of is_active archives (or un-archives) the
 * node; any is_paused clears is_paused_errors (the scheduler sets it itself); un-pausing clears
 * pause_reason. `is_draining` true makes the drain a user's (begun now unless under way; it
 * outlasts the agent's restarts); false ends a drain, the agent's own too.
 */
export async function updateNode(db: Sequelize, id: number, edit: NodeEdit): Promise<NodeRow> {
	const set = (k: keyof NodeEdit) => k in edit;
	const [row] = await write<NodeRow>(
		db,
		`UPDATE node SET
			hostname = CASE WHEN $2::boolean THEN $3 ELSE hostname END,
			port = CASE WHEN $4::boolean THEN $5::int ELSE port END,
			is_active = CASE WHEN $6::boolean THEN $7::boolean ELSE is_active END,
			archived = CASE WHEN $6::boolean AND $7::boolean IS DISTINCT FROM is_active
				THEN (CASE WHEN $7::boolean THEN NULL ELSE now() END) ELSE archived END,
			is_paused = CASE WHEN $8::boolean THEN $9::boolean ELSE is_paused END,
			is_paused_errors = CASE WHEN $8::boolean THEN false ELSE is_paused_errors END,
			pause_reason = CASE
				WHEN $8::boolean AND NOT $9::boolean THEN NULL
				WHEN $10::boolean THEN $11
				ELSE pause_reason END,
			draining_since = CASE WHEN $12::boolean IS NULL THEN draining_since
				WHEN $12::boolean THEN coalesce(draining_since, now()) END,
			drain_by = CASE WHEN $12::boolean IS NULL THEN drain_by
				WHEN $12::boolean THEN 'user' END,
			last_modified = now()
		 WHERE id = $1 RETURNING ${NODE_COLUMNS}`,
		[
			id,
			set("hostname"),
			edit.hostname ?? null,
			set("port"),
			edit.port ?? null,
			set("is_active"),
			edit.is_active ?? null,
			set("is_paused"),
			edit.is_paused ?? null,
			set("pause_reason"),
			edit.pause_reason ?? null,
			edit.is_draining ?? null
		]
	);
	if (!row) throw notFound(id);
	return row;
}
