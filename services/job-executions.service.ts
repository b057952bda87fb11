import type { Readable } from "stream";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { lastLines, LogFollowers } from "../lib/http/log-followers";
import { ExecutionWaits, type LogSources, openExecutionLog } from "../lib/http/execution-waits";
import { cachedListAction } from "../mixins/list.mixin";
import type { ExecutionLogs } from "../lib/documents/agent-protocol";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import {
	ENDED_EXE_STATUSES,
	getJobExeDetails,
	getJobExeListRow,
	JOB_EXE_LIST,
	JOB_EXE_RECORD,
	loadStoredLogs,
	readExeStates,
	type StoredLogs,
	serializeJobExeLogs,
	type JobExeListRow
} from "../lib/records/job-exe";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { ID_SCHEMA } from "../lib/validation/ids";

/** How long the logs view waits for a running execution's agent. */
const AGENT_LOGS_TIMEOUT_MS = 10000;

interface LogsParams {
	id: number;
	/** one stream as text/plain (what current_stdout_url and current_stderr_url point at) */
	stream?: "stdout" | "stderr";
	/** text/plain, streamed as written until the execution ends (chunked) */
	follow?: boolean;
	/** as text/plain: only the last lines */
	tail?: number;
}

/**
 * Job executions: list, details and logs. The logs of a running execution are read live from
 * the agent running it (`node-agent.logs`, targeted at its nodeID); once the execution has ended
 * (or when its agent does not answer) they come from storage (job_exe_log).
 */
/** What the handlers call on the service besides its database (its methods). */
interface JobExecutionsMethods {
	liveLogs(ctx: Context, jobExeId: number, agentId: string): Promise<ExecutionLogs | null>;
}
type JobExecutionsThis = Service &
	JobExecutionsMethods & { followers?: LogFollowers; waits?: ExecutionWaits };

interface JobExecutionsSettings extends ServiceSettingSchema {
	/** how often followers waiting for executions to run read them when no event came */
	followPollMs: number;
}

const JobExecutionsService: ServiceSchema<ServiceSettingSchema, JobExecutionsMethods> = {
	name: "job-executions",
	mixins: [DbMixin()],
	settings: { followPollMs: 1000 } as JobExecutionsSettings,

	actions: {
		list: {
			rest: "GET /job-executions",
			...cachedListAction(JOB_EXE_LIST, JOB_EXE_RECORD, "/api/job-executions/")
		},

		get: {
			rest: "GET /job-executions/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: JobExecutionsThis, ctx: Context<{ id: number }, RequestMeta>) {
				return getJobExeDetails(this.db, ctx.params.id, { apiRoot: ctx.meta.apiRoot });
			}
		},

		logs: {
			rest: "GET /job-executions/:id/logs",
			params: jsonParams({
				[QUERY_SCHEMA]: true,
				type: "object",
				required: ["id"],
				properties: {
					id: ID_SCHEMA,
					stream: { type: "string", enum: ["stdout", "stderr"] },
					follow: { type: "boolean" },
					tail: { type: "integer", minimum: 0, maximum: 1000000 }
				}
			}),
			async handler(this: JobExecutionsThis, ctx: Context<LogsParams, RequestMeta>) {
				let row: JobExeListRow = await getJobExeListRow(this.db, ctx.params.id);
				const { follow, tail } = ctx.params;
				// answered at once; its output comes once it runs, and it ends with it
				if (follow && !ENDED_EXE_STATUSES.includes(row.status)) {
					ctx.meta.$responseType = "text/plain; charset=utf-8";
					ctx.meta.$responseHeaders = { "Cache-Control": "no-store" };
					return this.followers!.follow(
						row.id,
						{ stream: ctx.params.stream ?? null, tailLines: tail ?? null },
						ctx.nodeID ?? ""
					);
				}
				let logs: ExecutionLogs | null = null;
				let stored: StoredLogs | null = null;
				if (row.status !== "RUNNING") stored = await loadStoredLogs(this.db, row.id);
				// A canceled execution's logs are stored when its agent reports it, a moment after
				// the cancel: until then the agent still has them.
				const held = row.status === "RUNNING" || (row.status === "CANCELED" && !stored);
				if (held && row.agent_id) {
					logs = await this.liveLogs(ctx, row.id, row.agent_id);
					// The agent may have finished it meanwhile: read the record again.
					if (!logs) {
						row = await getJobExeListRow(this.db, ctx.params.id);
						stored = await loadStoredLogs(this.db, row.id);
					}
				}
				logs ??= {
					...(stored ?? { stdout: "", stderr: "" }),
					is_finished: ENDED_EXE_STATUSES.includes(row.status)
				};
				if (ctx.params.stream || follow || tail !== undefined) {
					// as text: one stream, or both (stdout, then stderr); an execution not running
					// is followed to its end at once
					const text = ctx.params.stream
						? (logs[ctx.params.stream] ?? "")
						: `${logs.stdout ?? ""}${logs.stderr ?? ""}`;
					ctx.meta.$responseType = "text/plain; charset=utf-8";
					return tail === undefined
						? text
						: lastLines(Buffer.from(text), tail).toString("utf8");
				}
				return serializeJobExeLogs(row, logs);
			}
		}
	},

	events: {
		/** A node left: what it followed (a REPL over NATS) is sent no more. */
		"$node.disconnected"(this: JobExecutionsThis, ctx: Context<{ node: { id: string } }>) {
			const nodeId = ctx.params?.node?.id;
			if (nodeId) this.followers!.callerGone(nodeId);
		},

		/** Executions placed (scheduler) or canceled before they ran (jobs): their waits end. */
		"job-exes.changed": {
			params: jsonParams({
				type: "object",
				required: ["ids"],
				properties: { ids: { type: "array", items: ID_SCHEMA } }
			}),
			handler(this: JobExecutionsThis, ctx: Context<{ ids: number[] }>) {
				this.waits!.changed(ctx.params.ids);
			}
		}
	},

	created() {
		this.waits = new ExecutionWaits(
			ids => readExeStates(this.db, ids),
			(this.settings as JobExecutionsSettings).followPollMs
		);
		const call = (action: string, jobExeId: number, agentId: string) =>
			this.broker.call(
				action,
				{ jobExeId },
				{ nodeID: agentId, retries: 0, timeout: AGENT_LOGS_TIMEOUT_MS }
			);
		const sources: LogSources = {
			waits: this.waits,
			follow: (jobExeId, agentId) =>
				call("node-agent.followLogs", jobExeId, agentId) as Promise<Readable>,
			unfollow: (jobExeId, agentId) =>
				void call("node-agent.unfollowLogs", jobExeId, agentId).catch((err: unknown) =>
					this.logger.debug(
						{ err, jobExeId, agentId },
						"the agent was not told to unfollow"
					)
				),
			stored: jobExeId => loadStoredLogs(this.db, jobExeId),
			retrying: (jobExeId, err) =>
				this.logger.debug(
					{ err, jobExeId },
					"the agent does not stream it yet: asked again"
				)
		};
		// one agent stream per execution followed, whatever the followers here
		this.followers = new LogFollowers(
			(jobExeId, signal) => openExecutionLog(sources, jobExeId, signal),
			(jobExeId, err) => this.logger.warn({ err, jobExeId }, "a followed log failed")
		);
	},

	methods: {
		/** The logs as the agent has them now, or null when it does not answer. */
		async liveLogs(
			this: JobExecutionsThis,
			ctx: Context,
			jobExeId: number,
			agentId: string
		): Promise<ExecutionLogs | null> {
			try {
				const live = (await ctx.call(
					"node-agent.logs",
					{ jobExeId },
					{ nodeID: agentId, retries: 0, timeout: AGENT_LOGS_TIMEOUT_MS }
				)) as ExecutionLogs;
				return {
					stdout: live?.stdout ?? "",
					stderr: live?.stderr ?? "",
					is_finished: !!live?.is_finished
				};
			} catch (err: any) {
				// NOT_FOUND: the agent has just reported the end, and the logs are stored
				const level = err?.type === "NOT_FOUND" ? "debug" : "warn";
				this.logger[level](
					{ err, jobExeId, agentId },
					"live logs unavailable; answering the stored logs"
				);
				return null;
			}
		}
	}
};

export default JobExecutionsService;
