/**
 * The clock event processors this service knows, by name. A CLOCK trigger rule's `name` must be
 * one of them (Scale registers `scale-daily-metrics` in metrics/apps.py and `scale-job-load` in
 * queue/apps.py); the clock names the processor to run for each due rule.
 */
export const CLOCK_PROCESSORS: readonly string[] = ["scale-daily-metrics", "scale-job-load"];

/** Whether `name` is a registered clock event processor. */
export function isClockProcessor(name: string): boolean {
	return CLOCK_PROCESSORS.includes(name);
}
