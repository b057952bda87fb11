import { DateTime, Duration } from "luxon";

/** Thrown for text that is not acceptable ISO-8601; `problem` reads after the quoted text. */
export class Iso8601Error extends Error {
	constructor(
		public text: string,
		public problem: string
	) {
		super(`"${text}" ${problem}`);
		this.name = "Iso8601Error";
	}
}

// luxon also reads the basic format, week and ordinal dates, lower case and hour-only offsets;
// the API takes the extended calendar form only, so the shape is checked before luxon reads it.
const DATETIME =
	/^\d{4}-\d{2}-\d{2}T(\d{2}):\d{2}(?::\d{2}(?:[.,]\d+)?)?(Z|[+-](\d{2}):?(\d{2}))?$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
// An unencoded "+" in a query string arrives as a space, so "…T00:00:00+05:00" becomes this.
const SPACE_FOR_PLUS = /T\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)? \d{2}:?\d{2}$/;

/**
 * Parses an ISO-8601 extended-format datetime. A timezone is required because a bare local time
 * would silently depend on the server's zone.
 */
export function parseDatetime(text: string): Date {
	const match = DATETIME.exec(text);
	if (!match) throw new Iso8601Error(text, datetimeProblem(text));
	const [, hour, zone, offsetHours = "0", offsetMinutes = "0"] = match;
	if (zone === undefined) throw new Iso8601Error(text, "has no timezone");
	const parsed = DateTime.fromISO(text, { setZone: true });
	// luxon takes 24:00 for the next midnight and offsets up to ±24:00 or with 60 minutes.
	if (!parsed.isValid || +hour > 23 || +offsetHours > 23 || +offsetMinutes > 59) {
		throw new Iso8601Error(text, "is not a valid date and time");
	}
	return parsed.toJSDate();
}

function datetimeProblem(text: string): string {
	if (DATE_ONLY.test(text)) return "has no timezone";
	if (SPACE_FOR_PLUS.test(text)) {
		return 'has a space where its offset sign should be (URL-encode "+" as %2B)';
	}
	return "is not an ISO-8601 datetime";
}

/**
 * Durations read before, by their text: clients ask the same few again and again (the web UI's
 * `PT3H`, `P7D`), and luxon reads one in ~18 µs, a tenth of the service's own work on a page.
 */
const durations = new Map<string, number>();
const DURATIONS_KEPT = 256;

// Anything longer reaches past the range a JavaScript Date can represent from the epoch.
const MAX_DURATION_MS = 8.64e15;

/**
 * Parses an ISO-8601 duration such as PT3H, P1D or P1Y2M3DT4H5M6.5S into milliseconds. A duration
 * has no anchor date here, so luxon's calendar units have fixed lengths: a year is 365 days and a
 * month 30 days. Good enough for "the last N months" style time filters.
 */
export function parseDuration(text: string): number {
	const known = durations.get(text);
	if (known !== undefined) return known;
	// luxon also takes signed durations and ones with no number (P, PT, P1DT), and a decimal
	// comma in the seconds only.
	const unacceptable = text.includes("-") || text === "P" || text.endsWith("T");
	const ms = unacceptable ? NaN : Duration.fromISO(text.replace(/,/g, ".")).toMillis();
	if (Number.isNaN(ms)) throw new Iso8601Error(text, "is not an ISO-8601 duration");
	if (ms > MAX_DURATION_MS) throw new Iso8601Error(text, "is too long a duration");
	if (durations.size >= DURATIONS_KEPT) durations.clear();
	durations.set(text, Math.round(ms));
	return Math.round(ms);
}

/**
 * ISO-8601 in UTC with milliseconds, e.g. 2015-10-05T21:26:04.876Z, as Scale's API returns. Native,
 * not luxon: it runs for every timestamp of every list row, and luxon's measured slower
 * (docs/decisions.md, Libraries).
 */
export function formatDatetime(d: Date | string): string {
	// text: read so already (lib/db/timestamps.ts isoTimestamp)
	return typeof d === "string" ? d : d.toISOString();
}
