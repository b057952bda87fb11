import type { Sql } from "../lib/db/run";
import {
	Errors,
	type Context,
	type Service,
	type ServiceSchema,
	type ServiceSettingSchema
} from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { WhyWaitingMixin, type JobWaiting } from "../mixins/why-waiting.mixin";
import { cachedListAction } from "../mixins/list.mixin";
import { INPUT_FILES } from "../lib/records/file-records";
import { JOB_LIST, JOB_RECORD, JOB_UPDATE_RECORD, JOB_UPDATES_LIST } from "../lib/records/job";
import { getJobDetails } from "../lib/records/job-details";
import { cancelJobTransaction, checkJobUpdate } from "../lib/queue/cancel";
import {
	JOB_OUTCOME_DEFINITIONS,
	OUTCOME_NAMES,
	registerMetrics
} from "../lib/observability/gauges";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { ID_SCHEMA } from "../lib/validation/ids";

/** The spec answers job update errors in text/plain. */
const PLAIN = { plainText: true };
/** What the handlers call on the service besides its database (its methods). */
interface JobsMethods {
	killOnAgent(ctx: Context, jobExeId: number, agentId: string): Promise<void>;
	askWhyWaiting(which: { jobIds?: number[] }): Promise<JobWaiting[] | null>;
}
type JobsThis = Service & JobsMethods;

/** How long a cancel waits for the agent to acknowledge the kill. */
const AGENT_CANCEL_TIMEOUT_MS = 10000;

/**
 * Jobs: list, updates, details and cancel (PATCH /jobs/{id}/ with {"status": "CANCELED"}).
 * The work is in lib/records/job and lib/queue/cancel.
 */
const JobsService: ServiceSchema<ServiceSettingSchema, JobsMethods> = {
	name: "jobs",
	mixins: [DbMixin(), WhyWaitingMixin()],

	actions: {
		list: { rest: "GET /jobs", ...cachedListAction(JOB_LIST, JOB_RECORD, "/api/jobs/") },

		updates: {
			rest: "GET /jobs/updates",
			...cachedListAction(
				JOB_UPDATES_LIST,
				JOB_UPDATE_RECORD,
				"/api/jobs/updates/",
				INPUT_FILES
			)
		},

		get: {
			rest: "GET /jobs/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: JobsThis, ctx: Context<{ id: number }, RequestMeta>) {
				const details = await getJobDetails(this.db, ctx.params.id, {
					apiRoot: ctx.meta.apiRoot
				});
				// a QUEUED job says why it waits (the leading scheduler's last pass)
				if ((details as { status?: string }).status !== "QUEUED") return details;
				const [why] = (await this.askWhyWaiting({ jobIds: [ctx.params.id] })) ?? [];
				// no leading scheduler to say: left out rather than guessed
				if (!why) return details;
				return {
					...details,
					why_waiting: { code: why.code, reason: why.reason, pass_at: why.pass_at }
				};
			}
		},

		/**
		 * Cancels the job: its queue row goes, its live execution and the job become CANCELED in
		 * one transaction (run again if a requeue slipped in, see lib/queue/cancel); a process
		 * that was running is then killed through its agent. Errors are text/plain (400, 404,
		 * and 500 for anything unexpected).
		 */
		update: {
			rest: "PATCH /jobs/:id",
			async handler(this: JobsThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				const { id, ...body } = ctx.params;
				checkJobUpdate(body);
				const jobId = Number(id);
				try {
					const { result, value: details } = await cancelJobTransaction(
						this.db,
						jobId,
						(t: Sql) => getJobDetails(this.db, jobId, { t, apiRoot: ctx.meta.apiRoot })
					);
					// counted here, once: a FAILED job's end was counted when it failed
					if (result.previous !== "FAILED" && this.broker.isMetricsEnabled())
						this.broker.metrics.increment(OUTCOME_NAMES.canceled, {
							job_type: result.jobType
						});
					const exe = result.canceledExe;
					// followers of its logs waiting for it to run end now (lib/http/execution-waits.ts)
					if (exe?.previous === "QUEUED")
						void this.broker.broadcast("job-exes.changed", { ids: [exe.id] });
					if (exe && exe.previous === "RUNNING" && exe.agentId)
						await this.killOnAgent(ctx, exe.id, exe.agentId);
					return details;
				} catch (err: any) {
					if (err instanceof Errors.MoleculerError && err.code < 500) throw err;
					this.logger.error({ err, jobId }, "job cancel failed");
					throw new Errors.MoleculerError(
						`Job ${jobId} could not be canceled: ${err?.message ?? err}. Repeating the request may succeed.`,
						500,
						"SERVER_ERROR",
						PLAIN
					);
				}
			}
		}
	},

	created() {
		if (this.broker.isMetricsEnabled())
			registerMetrics(this.broker.metrics, JOB_OUTCOME_DEFINITIONS);
	},

	methods: {
		/** Asks the execution's agent to kill its process; a failure is logged, not answered. */
		async killOnAgent(this: JobsThis, ctx: Context, jobExeId: number, agentId: string) {
			try {
				await ctx.call(
					"node-agent.cancel",
					{ jobExeId },
					{ nodeID: agentId, retries: 0, timeout: AGENT_CANCEL_TIMEOUT_MS }
				);
			} catch (err) {
				this.logger.warn(
					{ err, jobExeId, agentId },
					"the agent could not be told to kill a canceled execution"
				);
			}
		}
	}
};

export default JobsService;
