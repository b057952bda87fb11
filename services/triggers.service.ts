import { MetricsMixin, type Metered } from "../mixins/prometheus-gauges.mixin";
import { METRICS, TRIGGER_DEFINITIONS } from "../lib/observability/gauges";
import cron, { type ScheduledTask } from "node-cron";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { EVENT_BATCH, processFileEvents, type Processed } from "../lib/triggers/process";
import { tickClock, type TickResult } from "../lib/triggers/clock";
import { drainBatches } from "../lib/triggers/drain";
import { jsonParams } from "../lib/validation/params";

/**
 * Triggers: turns the INGEST and PARSE trigger events into the jobs their rules ask for
 * (lib/triggers/process.ts), and runs the clock (lib/triggers/clock.ts). Events live in the
 * database; `trigger-events.created` only wakes this service sooner, and it drains what is
 * waiting when it starts and every pollMs besides, so events recorded while it was down or whose
 * hint was lost are processed all the same.
 */

interface Settings extends ServiceSettingSchema {
	/** how often waiting events are looked for without a hint */
	pollMs: number;
	/** batches processed at once by a drain (each its own transaction, SKIP LOCKED) */
	workers: number;
	/** the clock's node-cron expression: every minute, on the minute */
	clock: string;
}

interface Methods {
	drain(): Promise<number>;
	reportBatch(done: Processed): void;
	tick(now?: Date): Promise<TickResult[]>;
}

interface Locals {
	draining: Promise<number> | null;
	drainAgain: boolean;
	pollTimer: NodeJS.Timeout | null;
	clockTask: ScheduledTask | null;
}

type This = Service<Settings> & Methods & Locals & Metered;

const TriggersService: ServiceSchema<Settings, Methods & Locals> = {
	name: "triggers",
	mixins: [DbMixin(), MetricsMixin(TRIGGER_DEFINITIONS)],

	settings: {
		pollMs: 5000,
		workers: 2,
		clock: "0 * * * * *"
	},

	actions: {
		/** Processes the waiting events now; answers how many (for tests and operators). */
		process: {
			async handler(this: This) {
				return { events: await this.drain() };
			}
		},

		/** Runs one tick of the clock now (at `now`, an ISO-8601 time, when given). */
		tick: {
			params: jsonParams({
				type: "object",
				properties: { now: { type: "string", format: "date-time" } }
			}),
			handler(this: This, ctx: Context<{ now?: string }>) {
				return this.tick(ctx.params.now ? new Date(ctx.params.now) : undefined);
			}
		}
	},

	events: {
		"trigger-events.created"(this: This) {
			void this.drain();
		}
	},

	methods: {
		/**
		 * Processes batches until none is left, up to `workers` at once (lib/triggers/drain.ts).
		 * One drain at a time per process; a hint during one runs another after it. Answers the
		 * events processed.
		 */
		drain(this: This): Promise<number> {
			if (this.draining) {
				this.drainAgain = true;
				return this.draining;
			}
			this.draining = (async () => {
				let total = 0;
				try {
					do {
						this.drainAgain = false;
						total += await drainBatches(
							() => processFileEvents(this.db),
							{ workers: this.settings.workers, fullBatch: EVENT_BATCH },
							done => this.reportBatch(done)
						);
					} while (this.drainAgain);
				} catch (err) {
					this.logger.warn(
						{ err },
						"processing trigger events failed (tried again at the next poll)"
					);
				} finally {
					this.draining = null;
				}
				return total;
			})();
			return this.draining;
		},

		/** Logs what one batch did and tells the scheduler of the jobs it queued. */
		reportBatch(this: This, done: Processed) {
			if (this.metered && done.events > 0)
				this.broker.metrics.increment(METRICS.triggerEvents, undefined, done.events);
			for (const r of done.refused)
				this.logger.warn(
					{ eventId: r.eventId, ruleId: r.ruleId },
					`trigger rule's job not created: ${r.reason}`
				);
			if (done.jobs > 0 || done.recipes > 0) {
				this.logger.info(
					{ events: done.events, jobs: done.jobs, recipes: done.recipes },
					"trigger events processed: jobs and recipes created"
				);
				this.broker.emit("queue.changed", { count: done.jobs + done.recipes });
			}
		},

		async tick(this: This, now?: Date): Promise<TickResult[]> {
			const fired = await tickClock(this.db, now);
			for (const f of fired)
				this.logger.info(
					{ rule: f.rule, eventId: f.eventId, ...f.result },
					"clock rule ran"
				);
			return fired;
		}
	},

	created(this: This) {
		this.draining = null;
		this.drainAgain = false;
		this.pollTimer = null;
		this.clockTask = null;
	},

	async started(this: This) {
		this.pollTimer = setInterval(() => void this.drain(), this.settings.pollMs);
		this.pollTimer.unref();
		this.clockTask = cron.schedule(
			this.settings.clock,
			() =>
				void this.tick().catch(err =>
					this.logger.warn(
						{ err },
						"the clock's tick failed (tried again at the next one)"
					)
				),
			{ timezone: "UTC" }
		);
		void this.drain();
	},

	async stopped(this: This) {
		if (this.pollTimer) clearInterval(this.pollTimer);
		await this.clockTask?.stop();
		await this.draining;
	}
};

export default TriggersService;
