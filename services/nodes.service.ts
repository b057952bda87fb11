import type { Context, Service, ServiceSchema } from "moleculer";
import {
	NODE_DOCKER_LIMITS,
	type NodeDrain,
	type NodeHeartbeat,
	type NodeHeartbeatAnswer,
	type NodeRegistration,
	type NodeRegistrationAnswer
} from "../lib/documents/agent-protocol";
import { NotFoundError } from "../lib/errors";
import { schedulerLeader } from "../lib/records/status";
import { runList } from "../lib/list/run";
import { DbMixin } from "../mixins/db.mixin";
import { jsonAnswer, listParamsSchema } from "../mixins/list.mixin";
import {
	clearAgent,
	drainNode,
	executionsToStop,
	heartbeatNode,
	NODE_LIST_ACTIVE,
	NODE_LIST_ALL,
	parseBoolParam,
	parseNodeEdit,
	registerNode,
	serializeNode,
	updateNode,
	type NodeRow
} from "../lib/records/node";
import { getNodeDetails, getNodesStatus } from "../lib/records/node-status";
import { ERRORS } from "../lib/executions/failure";
import { finishExecutions } from "../lib/executions/finish";
import {
	JOB_OUTCOME_DEFINITIONS,
	OUTCOME_NAMES,
	registerMetrics
} from "../lib/observability/gauges";
import { countOutcomes } from "../lib/observability/job-meter";
import { findForgottenExecutions } from "../lib/scheduling/lost";
import { CONFLICT_RETRY, poolSql, transaction } from "../lib/db/run";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { ID_SCHEMA } from "../lib/validation/ids";

export interface NodesSettings {
	/** a node whose agent has not sent a heartbeat for this long is disconnected */
	leaseMs: number;
	/**
	 * an execution the agent does not list as running, though it started this long ago, has been
	 * lost by it (younger ones may still be on their way)
	 */
	forgottenGraceMs: number;
}

const RESOURCES = {
	type: "object",
	required: ["cpus", "mem", "disk"],
	properties: {
		cpus: { type: "number", minimum: 0 },
		mem: { type: "number", minimum: 0 },
		disk: { type: "number", minimum: 0 }
	}
};
const AGENT_ID = { type: "string", minLength: 1, maxLength: 250 };
/** NodeDocker (lib/documents/agent-protocol.ts), its size bounded: 10,000 images of 500 characters. */
const DOCKER = {
	type: "object",
	required: ["engine", "pull", "images", "privileged"],
	properties: {
		engine: { type: "boolean" },
		pull: { type: "boolean" },
		images: {
			type: "array",
			maxItems: NODE_DOCKER_LIMITS.images,
			items: { type: "string", minLength: 1, maxLength: NODE_DOCKER_LIMITS.length }
		},
		privileged: { type: "boolean" }
	}
};

/**
 * Nodes: the REST resource (list, status, details, replace, update: `is_draining` drains a node)
 * and the agents' side of the protocol (register, heartbeat, drain). Changes the scheduler cares
 * about are broadcast as `nodes.changed` (a wake-up hint).
 */
/** What the handlers call on the service besides its database (its methods). */
interface NodesMethods {
	connectivity(): { agents: Set<string>; leaseMs: number };
	edit(
		ctx: Context<Record<string, unknown>, RequestMeta>,
		mode: "replace" | "update"
	): Promise<ReturnType<typeof serializeNode>>;
	reconcile(nodeId: number, hb: NodeHeartbeat): Promise<void>;
}
type NodesThis = Service<NodesSettings> & NodesMethods;

const NodesService: ServiceSchema<NodesSettings, NodesMethods> = {
	name: "nodes",
	mixins: [DbMixin()],
	settings: { leaseMs: 15000, forgottenGraceMs: 30000 },

	actions: {
		list: {
			rest: "GET /nodes",
			params: jsonParams(listParamsSchema({ include_inactive: {} })),
			handler(this: NodesThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				const query = ctx.meta.query ?? ctx.params;
				const all = parseBoolParam(query.include_inactive, "include_inactive", false);
				return runList<NodeRow, unknown>(
					this.db,
					all ? NODE_LIST_ALL : NODE_LIST_ACTIVE,
					{
						query,
						baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
						path: ctx.meta.path ?? "/api/nodes/"
					},
					rows => rows.map(serializeNode)
				);
			}
		},

		status: {
			rest: "GET /nodes/status",
			params: jsonParams(listParamsSchema()),
			async handler(this: NodesThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				const json = await getNodesStatus(
					this.db,
					{
						query: ctx.meta.query ?? ctx.params,
						baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
						path: ctx.meta.path ?? "/api/nodes/status/"
					},
					this.connectivity()
				);
				return jsonAnswer(ctx, json);
			}
		},

		get: {
			rest: "GET /nodes/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			handler(this: NodesThis, ctx: Context<{ id: number }>) {
				return getNodeDetails(this.db, ctx.params.id, this.connectivity());
			}
		},

		replace: {
			rest: "PUT /nodes/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			handler(this: NodesThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				return this.edit(ctx, "replace");
			}
		},

		update: {
			rest: "PATCH /nodes/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			handler(this: NodesThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				return this.edit(ctx, "update");
			}
		},

		/** Agent → control plane: an agent announces its node and what it offers. */
		register: {
			caller: { agentNamed: "a registration" },
			params: jsonParams({
				type: "object",
				required: ["agentId", "slaveId", "hostname", "resources"],
				properties: {
					agentId: AGENT_ID,
					slaveId: AGENT_ID,
					hostname: { type: "string", minLength: 1, maxLength: 250 },
					port: { type: "integer", minimum: 0, maximum: 65535 },
					resources: RESOURCES,
					docker: DOCKER,
					draining: { type: "boolean" }
				}
			}),
			async handler(
				this: NodesThis,
				ctx: Context<NodeRegistration>
			): Promise<NodeRegistrationAnswer> {
				const { id, drain } = await registerNode(this.db, ctx.params);
				this.broker.broadcast("nodes.changed", { nodeIds: [id] });
				return drain ? { nodeId: id, drain: true } : { nodeId: id };
			}
		},

		/**
		 * Agent → control plane: the lease renewed, the current offer, and the executions the agent
		 * holds. Those it should hold but does not list are failed (node-lost, past a grace); those
		 * it lists but must not run are answered in `cancel`, for it to stop them; `drain` tells
		 * it that its node is draining. A NOT_FOUND answer means the node is unknown: the agent
		 * registers again.
		 */
		heartbeat: {
			caller: { agentNamed: "a heartbeat" },
			params: jsonParams({
				type: "object",
				required: ["agentId", "slaveId", "resources"],
				properties: {
					agentId: AGENT_ID,
					slaveId: AGENT_ID,
					resources: RESOURCES,
					running: { type: "array", items: ID_SCHEMA },
					docker: DOCKER,
					draining: { type: "boolean" }
				}
			}),
			async handler(
				this: NodesThis,
				ctx: Context<NodeHeartbeat>
			): Promise<NodeHeartbeatAnswer> {
				const hb = ctx.params;
				const change = await heartbeatNode(this.db, hb, this.settings.leaseMs);
				if (!change)
					throw new NotFoundError(
						`No node with slave id "${hb.slaveId}": register first`
					);
				if (change.changed)
					this.broker.broadcast("nodes.changed", { nodeIds: [change.id] });
				await this.reconcile(change.id, hb);
				const cancel = await executionsToStop(this.db, hb.agentId, hb.running ?? []);
				// debug: an execution canceled by a user is listed too while its process is killed
				// (the agent says when a cancel is news to it)
				if (cancel.length > 0)
					this.logger.debug(
						{ nodeId: change.id, agentId: hb.agentId, cancel },
						"the agent holds executions that must not run: it is told to cancel them"
					);
				return change.drain
					? { ok: true, nodeId: change.id, cancel, drain: true }
					: { ok: true, nodeId: change.id, cancel };
			}
		},

		/**
		 * Agent → control plane: the agent is shutting down and drains its node. Once this is
		 * answered nothing new is placed there (lib/scheduling/claim.ts reads the drain under the
		 * node's lock); its executions have the agent's drain time to end. NOT_FOUND for a node
		 * not registered (the agent registers again, saying it drains).
		 */
		drain: {
			caller: { agentNamed: "a drain" },
			params: jsonParams({
				type: "object",
				required: ["agentId", "slaveId"],
				properties: { agentId: AGENT_ID, slaveId: AGENT_ID }
			}),
			async handler(this: NodesThis, ctx: Context<NodeDrain>) {
				const node = await drainNode(this.db, ctx.params);
				if (!node)
					throw new NotFoundError(
						`No node with slave id "${ctx.params.slaveId}": register first`
					);
				this.logger.info(
					{ nodeId: node.id, agentId: ctx.params.agentId },
					"the node drains: its agent is shutting down"
				);
				this.broker.broadcast("nodes.changed", { nodeIds: [node.id] });
				return { ok: true, nodeId: node.id };
			}
		},

		/** Agent → control plane: which node leads the scheduler now (an agent runs only its runs). */
		leader: {
			params: jsonParams({ type: "object" }),
			async handler(this: NodesThis): Promise<{ leader: string | null }> {
				return { leader: await schedulerLeader(this.db) };
			}
		},

		/**
		 * Agent → control plane: which of the given executions must not run on the calling agent
		 * (a cancel is obeyed only when the database says so).
		 */
		mustStop: {
			params: jsonParams({
				type: "object",
				required: ["jobExeIds"],
				properties: { jobExeIds: { type: "array", maxItems: 10000, items: ID_SCHEMA } }
			}),
			async handler(this: NodesThis, ctx: Context<{ jobExeIds: number[] }>) {
				return {
					jobExeIds: await executionsToStop(
						this.db,
						ctx.nodeID as string,
						ctx.params.jobExeIds
					)
				};
			}
		}
	},

	events: {
		/**
		 * An agent that said goodbye leaves its nodes (its executions are lost at once). One
		 * Moleculer stopped hearing keeps them: it may be restarting under its node ID, or
		 * heartbeat through another replica, and its executions are lost only when its lease runs
		 * out (the scheduler's checkLost).
		 */
		async "$node.disconnected"(
			this: NodesThis,
			ctx: Context<{ node: { id: string }; unexpected?: boolean }>
		) {
			const agentId = ctx.params?.node?.id;
			if (!agentId || ctx.params.unexpected) return;
			try {
				const ids = await clearAgent(this.db, agentId);
				if (ids.length > 0) this.broker.broadcast("nodes.changed", { nodeIds: ids });
			} catch (error) {
				this.logger.warn({ err: error, agentId }, "cannot clear a departed agent");
			}
		}
	},

	created() {
		if (this.broker.isMetricsEnabled())
			registerMetrics(this.broker.metrics, JOB_OUTCOME_DEFINITIONS);
	},

	methods: {
		connectivity() {
			const agents = new Set<string>(
				this.broker.registry
					.getServiceList({ onlyAvailable: true })
					.filter((s: { name: string }) => s.name === "node-agent")
					.map((s: { nodeID?: string }) => s.nodeID as string)
			);
			return { agents, leaseMs: this.settings.leaseMs };
		},

		async edit(ctx: Context<Record<string, unknown>, RequestMeta>, mode: "replace" | "update") {
			const { id, ...body } = ctx.params;
			const fields = parseNodeEdit(body, mode);
			const row = await updateNode(this.db, id as number, fields);
			this.broker.broadcast("nodes.changed", { nodeIds: [row.id] });
			ctx.meta.$statusCode = 201;
			ctx.meta.$location =
				ctx.meta.baseUrl && ctx.meta.path
					? `${ctx.meta.baseUrl}${ctx.meta.path}`
					: `/nodes/${row.id}/`;
			return serializeNode(row);
		},

		/**
		 * Fails (node-lost) the executions this agent should run but does not report, once they are
		 * old enough not to be in flight.
		 */
		async reconcile(nodeId: number, hb: NodeHeartbeat) {
			if (!Array.isArray(hb.running)) return;
			const forgotten = await findForgottenExecutions(poolSql(this.db), {
				nodeId,
				agentId: hb.agentId,
				running: hb.running,
				graceMs: this.settings.forgottenGraceMs
			});
			if (forgotten.length === 0) return;
			this.logger.warn({ nodeId, forgotten }, "executions the agent does not run: node-lost");
			const result = await transaction(
				this.db,
				{ pipelined: true, retry: CONFLICT_RETRY },
				sql =>
					finishExecutions(sql, {
						failures: forgotten.map(jobExeId => ({
							jobExeId,
							errorName: ERRORS.nodeLost
						}))
					})
			);
			// counted here: the scheduler does not see these ends (lib/observability/gauges.ts)
			if (this.broker.isMetricsEnabled())
				countOutcomes(this.broker.metrics, OUTCOME_NAMES, result);
			if (result.ended.size > 0) this.broker.broadcast("scheduler.wake");
		}
	}
};

export default NodesService;
