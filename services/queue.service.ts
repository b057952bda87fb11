import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { WhyWaitingMixin, type JobWaiting } from "../mixins/why-waiting.mixin";
import { listParamsSchema, REPEATABLE } from "../mixins/list.mixin";
import { CONFLICT_RETRY, plannedPoolSql, select, transaction, MicroBatcher } from "../lib/db/run";
import { buildEnvelope } from "../lib/list/envelope";
import { parseListQuery } from "../lib/list/params";
import { JOB_COLUMNS, JOB_FROM, serializeJob, type JobListRow } from "../lib/records/job";
import { getJobsDetails, jobsDetailsFromRows, type JobDetails } from "../lib/records/job-details";
import { getJobLoad, LOAD_FILTERS, recordJobLoad } from "../lib/queue/load";
import { queueEachNewJob } from "../lib/jobs/new-job";
import type { NewJobRequest, QueuedJob } from "../lib/jobs/types";
import { requeueJobs, type RequeueFilters } from "../lib/queue/requeue";
import { getQueueStatus } from "../lib/queue/status";
import type { RequestMeta } from "../types/meta";
import {
	createEachRecipe,
	createRecipes,
	type CreatedRecipe,
	type NewRecipeRequest
} from "../lib/recipes/create";
import { getRecipeDetailsOf } from "../lib/records/recipe";
import { NotFoundError } from "../lib/errors";
import { intakeGateOf } from "../lib/recipes/intake-gate";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, parseIntSchema } from "../lib/validation/body";
import { ID_SCHEMA, INT4_MAX } from "../lib/validation/ids";

/** A new job posted through REST, with the API root its request used. */
interface PostedJob {
	request: NewJobRequest;
	apiRoot?: string;
}

/** What a new job posted through REST is answered with. */
interface NewJobAnswer {
	job: QueuedJob;
	details: JobDetails;
}

/** What the handlers call on the service besides its database (its methods). */
interface QueueMethods {
	writeNewJobs(posted: PostedJob[]): Promise<(NewJobAnswer | Error)[]>;
	writeNewRecipes(posted: PostedRecipe[]): Promise<(NewRecipeAnswer | Error)[]>;
	queueChanged(count: number): void;
	recordLoad(): Promise<number>;
	jobPage(ctx: Context<unknown, RequestMeta>, ids: number[]): Promise<unknown>;
	askWhyWaiting(which: { jobTypeIds?: number[] }): Promise<JobWaiting[] | null>;
}
/** The service as its handlers see it: its methods and the batchers of new jobs and recipes (from `created`). */
type QueueThis = Service<QueueSettings> &
	QueueMethods & {
		newJobs?: MicroBatcher<PostedJob, NewJobAnswer | Error>;
		newRecipes?: MicroBatcher<PostedRecipe, NewRecipeAnswer | Error>;
		/** jobs queued since the last hint, not yet told (see queueChanged) */
		untold?: number;
	};

/** A new recipe posted through REST, with the API root its request used. */
interface PostedRecipe {
	request: NewRecipeRequest;
	apiRoot?: string;
}

/** What a new recipe posted through REST is answered with. */
interface NewRecipeAnswer {
	created: CreatedRecipe;
	details: unknown;
}

/** Scale's requeue body: every field optional; any other is a 400 (REQUEUE_SENT_BY_UI aside). */
/**
 * Scale 3.0's web UI puts the URL it posts to in the body (loadService.requeueJobs: `{job_ids,
 * url}`), whose Requeue button would otherwise be refused: accepted and left out.
 */
const REQUEUE_SENT_BY_UI = ["url"];

const REQUEUE_SCHEMA = {
	type: "object",
	properties: {
		started: { type: "string" },
		ended: { type: "string" },
		status: { type: "string", enum: ["FAILED", "CANCELED"] },
		job_ids: { type: "array", items: parseIntSchema(ID_SCHEMA) },
		job_type_ids: { type: "array", items: parseIntSchema(ID_SCHEMA) },
		job_type_names: { type: "array", items: { type: "string" } },
		job_type_categories: { type: "array", items: { type: "string" } },
		error_categories: {
			type: "array",
			items: { type: "string", enum: ["SYSTEM", "ALGORITHM", "DATA"] }
		},
		priority: parseIntSchema({ type: ["integer", "null"], minimum: 1, maximum: INT4_MAX })
	}
};

/**
 * The queue: new jobs (POST /queue/new-job/), requeue (POST /queue/requeue-jobs/), the queue by
 * job type (GET /queue/status/) and the load history (GET /load/), which the triggers service's
 * clock records every minute (rule `scale-job-load`). After every commit that adds to the queue it emits `queue.changed`
 * ({count}), the scheduler's wake-up; the database stays the truth.
 */
export interface QueueSettings extends ServiceSettingSchema {
	/**
	 * How long a batch of new recipes waits at most for the scheduler's control loop to be quiet
	 * (lib/recipes/intake-gate.ts); 0: it does not wait.
	 */
	recipeIntakeWaitMs: number;
}

const QueueService: ServiceSchema<QueueSettings, QueueMethods> = {
	name: "queue",
	mixins: [DbMixin(), WhyWaitingMixin()],
	settings: { recipeIntakeWaitMs: 60 },

	actions: {
		newJob: {
			rest: "POST /queue/new-job",
			params: jsonParams(
				bodyParams({
					type: "object",
					required: ["job_type_id"],
					properties: {
						job_type_id: parseIntSchema(ID_SCHEMA),
						job_data: { type: "object" }
					}
				})
			),
			async handler(
				this: QueueThis,
				ctx: Context<{ job_type_id: number; job_data?: unknown }, RequestMeta>
			) {
				// New jobs posted together are written in one statement (atomic without a
				// transaction) and their details read in one more, before this request wakes the
				// scheduler: the answer shows the job QUEUED unless a pass woken by something else
				// claimed it in that moment (then it shows the job as it is).
				const queued: NewJobAnswer | Error = await this.newJobs!.add({
					request: {
						jobTypeId: ctx.params.job_type_id,
						jobData: ctx.params.job_data ?? {}
					},
					apiRoot: ctx.meta.apiRoot
				});
				if (queued instanceof Error) throw queued;
				const { job, details } = queued;
				this.logger.info(
					{ jobId: job.jobId, jobExeId: job.jobExeId, jobTypeId: ctx.params.job_type_id },
					"job queued"
				);
				this.queueChanged(1);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/jobs/${details.id}/`;
				return details;
			}
		},

		/**
		 * POST /queue/new-recipe/: the recipe and its jobs written, those without dependencies
		 * queued, in one statement (lib/recipes/create.ts); 201 with the recipe's details.
		 */
		newRecipe: {
			rest: "POST /queue/new-recipe",
			params: jsonParams(
				bodyParams({
					type: "object",
					required: ["recipe_type_id"],
					properties: {
						recipe_type_id: parseIntSchema(ID_SCHEMA),
						recipe_data: { type: "object" }
					}
				})
			),
			async handler(
				this: QueueThis,
				ctx: Context<{ recipe_type_id: number; recipe_data?: unknown }, RequestMeta>
			) {
				// Recipes posted together are checked and written together: the reads that check
				// them, then one statement (atomic on its own) for all that pass, on the pg
				// client's pool without a transaction; each request is answered on its own.
				const answer = await this.newRecipes!.add({
					request: {
						recipeTypeId: ctx.params.recipe_type_id,
						data: ctx.params.recipe_data ?? {}
					},
					apiRoot: ctx.meta.apiRoot
				});
				if (answer instanceof Error) throw answer;
				const { created, details } = answer;
				this.logger.info(
					{
						recipeId: created.recipeId,
						recipeTypeId: ctx.params.recipe_type_id,
						jobIds: created.jobIds,
						queued: created.queued
					},
					"recipe created"
				);
				if (created.queued.length > 0) this.queueChanged(created.queued.length);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/recipes/${created.recipeId}/`;
				return details;
			}
		},

		requeueJobs: {
			rest: "POST /queue/requeue-jobs",
			// a misspelt filter (job_id for job_ids) must not turn into a requeue of every job
			params: jsonParams(bodyParams(REQUEUE_SCHEMA, REQUEUE_SENT_BY_UI)),
			async handler(this: QueueThis, ctx: Context<RequeueFilters, RequestMeta>) {
				// run again after a deadlock: the requeue takes its jobs' rows, then their recipes'
				// (unblockRecipeJobs); a report ending a job of the same recipe, the other way round
				const result = await transaction(this.db, { retry: CONFLICT_RETRY }, t =>
					requeueJobs(this.db, t, ctx.params)
				);
				const queued = result.queued.length + result.recipeQueued.length;
				if (queued > 0) this.queueChanged(queued);
				return this.jobPage(ctx, result.matchedIds);
			}
		},

		status: {
			rest: "GET /queue/status",
			async handler(this: QueueThis) {
				const status = await getQueueStatus(this.db);
				// each job type's head job: why it waits (the leading scheduler's last pass)
				const ids = status.results.map(r => r.job_type.id);
				const why = ids.length > 0 ? await this.askWhyWaiting({ jobTypeIds: ids }) : null;
				// with no leading scheduler to say, the entries are as Scale's
				if (why === null) return status;
				const byType = new Map(why.map(w => [w.job_type_id, w]));
				const said = (id: number) => {
					const w = byType.get(id);
					return w ? { code: w.code, reason: w.reason, pass_at: w.pass_at } : null;
				};
				return {
					...status,
					results: status.results.map(r => ({ ...r, why_waiting: said(r.job_type.id) })),
					queue_status: status.queue_status.map((q, i) => ({
						...q,
						why_waiting: said(ids[i])
					}))
				};
			}
		},

		load: {
			rest: "GET /load",
			params: jsonParams(
				listParamsSchema(Object.fromEntries(LOAD_FILTERS.map(name => [name, REPEATABLE])))
			),
			handler(this: QueueThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				return getJobLoad(this.db, {
					query: ctx.meta.query ?? ctx.params,
					baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
					path: ctx.meta.path ?? "/api/load/"
				});
			}
		},

		/**
		 * Records this minute's load now, once per minute across replicas; internal. The clock
		 * (the `scale-job-load` rule of the triggers service) does it every minute.
		 */
		recordLoad: {
			async handler(this: QueueThis) {
				return { rows: await this.recordLoad() };
			}
		}
	},

	methods: {
		/**
		 * Recipes posted together: checked and written together (lib/recipes/create.ts), then
		 * the details of those written read together, two statements for all (and their input
		 * files), under each request's API root.
		 */
		async writeNewRecipes(
			this: QueueThis,
			posted: PostedRecipe[]
		): Promise<(NewRecipeAnswer | Error)[]> {
			const created = await createEachRecipe(
				batch => createRecipes(plannedPoolSql(this.db), batch),
				posted.map(p => p.request)
			);
			// the details too wait for the control loop, if it started meanwhile
			await intakeGateOf(this.broker).quiet(this.settings.recipeIntakeWaitMs);
			const details = new Map<string | undefined, Map<number, unknown>>();
			for (const apiRoot of new Set(posted.map(p => p.apiRoot))) {
				const ids = created.flatMap((c, i) =>
					!(c instanceof Error) && posted[i].apiRoot === apiRoot ? [c.recipeId] : []
				);
				if (ids.length > 0)
					details.set(apiRoot, await getRecipeDetailsOf(this.db, ids, apiRoot));
			}
			return created.map((c, i) => {
				if (c instanceof Error) return c;
				const found = details.get(posted[i].apiRoot)?.get(c.recipeId);
				return found === undefined
					? new NotFoundError(`No recipe with id ${c.recipeId}`)
					: { created: c, details: found };
			});
		},

		/**
		 * Queues new jobs posted together; answers each its job's details (file URLs under the
		 * API root its request used) or its refusal.
		 */
		async writeNewJobs(
			this: QueueThis,
			posted: PostedJob[]
		): Promise<(NewJobAnswer | Error)[]> {
			const queued = await queueEachNewJob(
				this.db,
				posted.map(p => p.request),
				true
			);
			const details = new Map<number, JobDetails>();
			const apiRoots = new Set(posted.map(p => p.apiRoot));
			for (const apiRoot of apiRoots) {
				const written = queued.filter(
					(q, i): q is QueuedJob => !(q instanceof Error) && posted[i].apiRoot === apiRoot
				);
				// the details come with the write; a job written without them (a job type changed
				// meanwhile, and the requests were written one by one) has them read
				const [built, read] = await Promise.all([
					jobsDetailsFromRows(
						this.db,
						written.flatMap(q => (q.details ? [q.details] : [])),
						{ apiRoot }
					),
					getJobsDetails(
						this.db,
						written.flatMap(q => (q.details ? [] : [q.jobId])),
						{ apiRoot }
					)
				]);
				for (const map of [built, read]) for (const [id, d] of map) details.set(id, d);
			}
			return queued.map(q =>
				q instanceof Error
					? q
					: {
							job: { jobId: q.jobId, jobExeId: q.jobExeId, eventId: q.eventId },
							details: details.get(q.jobId) as JobDetails
						}
			);
		},

		/**
		 * Hints the scheduler that jobs were queued: one event for the requests answered in the
		 * same turn of the event loop (a batch of new jobs answers all its requests at once),
		 * which is one message where the scheduler runs on another node or thread.
		 */
		queueChanged(this: QueueThis, count: number) {
			if (!this.untold)
				setImmediate(() => {
					const told = this.untold ?? 0;
					this.untold = 0;
					this.broker.emit("queue.changed", { count: told });
				});
			this.untold = (this.untold ?? 0) + count;
		},

		async recordLoad(this: QueueThis): Promise<number> {
			return transaction(this.db, t => recordJobLoad(this.db, t));
		},

		/**
		 * A page of the given jobs as job records, in the order of the jobs list (last_modified,
		 * then id), in the list envelope; paging from the request's query.
		 */
		async jobPage(this: QueueThis, ctx: Context<unknown, RequestMeta>, ids: number[]) {
			const query = ctx.meta.query ?? {};
			const paging = parseListQuery(
				{ page: query.page, page_size: query.page_size },
				{ orderable: {}, defaultOrder: [], timeColumn: null, filters: {} }
			);
			const rows = await select<JobListRow>(
				this.db,
				`SELECT ${JOB_COLUMNS} FROM ${JOB_FROM} WHERE j.id = ANY($1::int[])
				 ORDER BY j.last_modified, j.id LIMIT ${paging.limit + 1} OFFSET ${paging.offset}`,
				[ids]
			);
			const hasMore = rows.length > paging.limit;
			if (hasMore) rows.pop();
			return buildEnvelope({
				count: ids.length,
				page: paging.page,
				pageSize: paging.pageSize,
				hasMore,
				results: rows.map(serializeJob),
				baseUrl: ctx.meta.baseUrl ?? "http://127.0.0.1",
				path: ctx.meta.path ?? "/api/queue/requeue-jobs/",
				query
			});
		}
	},

	created(this: QueueThis) {
		this.untold = 0;
		// New jobs posted at the same time are written together: one statement and one commit
		// for all of them (each still checked, and answered, on its own).
		this.newJobs = new MicroBatcher<PostedJob, NewJobAnswer | Error>(
			requests => this.writeNewJobs(requests),
			{ delayMs: 1, maxItems: 500 }
		);
		this.newRecipes = new MicroBatcher<PostedRecipe, NewRecipeAnswer | Error>(
			posted => this.writeNewRecipes(posted),
			{
				delayMs: 1,
				maxItems: 200,
				// after the scheduler's control loop, which advances the recipes under way
				// (lib/recipes/intake-gate.ts); the requests that come meanwhile join the batch
				ready: () => intakeGateOf(this.broker).quiet(this.settings.recipeIntakeWaitMs)
			}
		);
	},

	async stopped(this: QueueThis) {
		await Promise.all([this.newJobs?.drain(), this.newRecipes?.drain()]);
	}
};

export default QueueService;
