import type { Sequelize } from "sequelize";
import { select, write, type Sql, transaction } from "../db/run";
import { isDue, type ClockTriggerConfiguration } from "../documents/trigger-configuration";
import { computeDailyMetrics } from "../metrics/compute";
import { recordJobLoad } from "../queue/load";
import { foldFailedJobDeltas } from "../records/job-type-reports";

/**
 * The clock (Scale's job/clock.py): every minute each active CLOCK rule whose schedule has come
 * round since its last event records an event of its `event_type` and runs the processor
 * registered under the rule's name, in one transaction under an advisory lock on the event
 * type, so a tick happens once however many replicas of the `triggers` service tick. A processor
 * that fails rolls its tick back: the next minute tries again.
 */

export interface ClockTick {
	/** the event recorded */
	eventId: number;
	occurred: Date;
	/** when this rule's previous event occurred (null: never) */
	lastOccurred: Date | null;
}

/** A clock event processor: does its work inside the tick's transaction; answers what it did. */
export type ClockProcessor = (
	db: Sequelize,
	t: Sql,
	tick: ClockTick
) => Promise<Record<string, unknown>>;

const DAY_MS = 86_400_000;

/** A UTC day as YYYY-MM-DD. */
function dayOf(ms: number): string {
	return new Date(ms).toISOString().slice(0, 10);
}

/**
 * The days the daily metrics are due for at a tick (Scale's DailyMetricsProcessor): every day
 * from the day of the previous tick up to yesterday, or yesterday alone the first time.
 */
export function dueMetricsDays(lastOccurred: Date | null, occurred: Date): string[] {
	const today = Math.floor(occurred.getTime() / DAY_MS) * DAY_MS;
	if (!lastOccurred) return [dayOf(today - DAY_MS)];
	const days: string[] = [];
	for (let day = Math.floor(lastOccurred.getTime() / DAY_MS) * DAY_MS; day < today; day += DAY_MS)
		days.push(dayOf(day));
	return days;
}

/**
 * The processors by rule name. `scale-daily-metrics` computes each due day's metrics
 * (lib/metrics/compute.ts) and records the days it ran for in daily_metrics_day.
 */
export const PROCESSORS: Record<string, ClockProcessor> = {
	// and the FAILED job counts' deltas folded (migration 0013), on the same once-a-minute tick
	"scale-job-load": async (db, t) => ({
		rows: await recordJobLoad(db, t),
		failedJobDeltas: await foldFailedJobDeltas(db, t)
	}),
	"scale-daily-metrics": async (db, t, tick) => {
		const days = dueMetricsDays(tick.lastOccurred, tick.occurred);
		const rows = { jobTypes: 0, ingests: 0, errors: 0 };
		for (const day of days) {
			const written = await computeDailyMetrics(db, day, t);
			rows.jobTypes += written.jobTypes;
			rows.ingests += written.ingests;
			rows.errors += written.errors;
		}
		if (days.length > 0)
			await write(
				db,
				`INSERT INTO daily_metrics_day (day, event_id)
				 SELECT d::date, $2 FROM unnest($1::text[]) AS d
				 ON CONFLICT (day) DO UPDATE SET event_id = EXCLUDED.event_id, computed = now()
				 RETURNING day`,
				[days, tick.eventId],
				t
			);
		return { days, rows };
	}
};

interface ClockRule {
	id: number;
	name: string;
	configuration: ClockTriggerConfiguration;
}

export interface TickResult {
	rule: string;
	eventType: string;
	eventId: number;
	result: Record<string, unknown>;
}

/** One tick of the clock at `now`: answers the rules that fired and what their processors did. */
export async function tickClock(
	db: Sequelize,
	now: Date = new Date(),
	processors: Record<string, ClockProcessor> = PROCESSORS
): Promise<TickResult[]> {
	const rules = await select<ClockRule>(
		db,
		`SELECT id, name, configuration FROM trigger_rule
		 WHERE type = 'CLOCK' AND is_active AND archived IS NULL ORDER BY id`
	);
	const fired: TickResult[] = [];
	for (const rule of rules) {
		const processor = processors[rule.name];
		if (!processor) continue;
		const { event_type: eventType, schedule } = rule.configuration;
		const done = await transaction(db, async t => {
			// one tick per event type across replicas: the lock, then the due check under it
			await select(
				db,
				"SELECT pg_advisory_xact_lock(hashtext('scale.clock.' || $1))",
				[eventType],
				t
			);
			const [state] = await select<{ last_occurred: Date }>(
				db,
				"SELECT last_occurred FROM clock_state WHERE event_type = $1",
				[eventType],
				t
			);
			const lastOccurred = state?.last_occurred ?? null;
			if (!isDue(schedule, lastOccurred, now)) return null;
			const [event] = await write<{ id: number; occurred: Date }>(
				db,
				`INSERT INTO trigger_event (type, rule_id, description, occurred, processed)
				 VALUES ($1, $2, '{"version": "1.0"}', $3, $3) RETURNING id, occurred`,
				[eventType, rule.id, now],
				t
			);
			await write(
				db,
				`INSERT INTO clock_state (event_type, last_event_id, last_occurred) VALUES ($1, $2, $3)
				 ON CONFLICT (event_type) DO UPDATE SET last_event_id = EXCLUDED.last_event_id,
					last_occurred = EXCLUDED.last_occurred, last_modified = now()
				 RETURNING id`,
				[eventType, event.id, now],
				t
			);
			const result = await processor(db, t, {
				eventId: event.id,
				occurred: event.occurred,
				lastOccurred
			});
			return { rule: rule.name, eventType, eventId: event.id, result };
		});
		if (done) fired.push(done);
	}
	return fired;
}
