import { FieldError } from "../errors";
import { formatDatetime } from "../validation/schema";
import { parseListQuery, type ListSpec, type ParsedList } from "./params";

/** The longest range the time-series views answer (Scale's max_duration). */
export const MAX_RANGE_MS = 31 * 24 * 3600 * 1000;
/** The start of their range when none is given: a week back. */
export const DEFAULT_SPAN_MS = 7 * 24 * 3600 * 1000;

/**
 * A list request of a time-series view (`/load/`, `/ingests/status/`): `started` defaults to a
 * week before `now`, `ended` to now, and a range longer than 31 days is a 400 on `started`.
 */
export function parseBoundedRange(
	query: Record<string, unknown>,
	spec: ListSpec,
	now: Date
): ParsedList & { started: Date; ended: Date } {
	const given = query.started !== undefined && query.started !== null && query.started !== "";
	const p = parseListQuery(
		given
			? query
			: { ...query, started: formatDatetime(new Date(now.getTime() - DEFAULT_SPAN_MS)) },
		spec,
		now
	);
	const started = p.started as Date;
	const ended = p.ended as Date;
	if (ended.getTime() - started.getTime() > MAX_RANGE_MS)
		throw new FieldError(
			"started",
			"the range from started to ended must be at most 31 days " +
				`(got ${formatDatetime(started)} to ${formatDatetime(ended)})`
		);
	return { ...p, started, ended };
}
