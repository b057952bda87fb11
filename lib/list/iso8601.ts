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

const DATETIME =
	/^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}:?\d{2})?$/;
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
	const [, year, month, day, hour, minute, second = "0", fraction = "", zone] = match;
	if (zone === undefined) throw new Iso8601Error(text, "has no timezone");
	const date = utcDate(+year, +month, +day, +hour, +minute, +second, fraction);
	const offset = zoneOffsetMinutes(zone);
	if (date === null || offset === null) {
		throw new Iso8601Error(text, "is not a valid date and time");
	}
	return new Date(date.getTime() - offset * 60_000);
}

function datetimeProblem(text: string): string {
	if (DATE_ONLY.test(text)) return "has no timezone";
	if (SPACE_FOR_PLUS.test(text)) {
		return 'has a space where its offset sign should be (URL-encode "+" as %2B)';
	}
	return "is not an ISO-8601 datetime";
}

/** Null when a field is out of range, e.g. February 30th or 24:00. */
function utcDate(
	year: number,
	month: number,
	day: number,
	hour: number,
	minute: number,
	second: number,
	fraction: string
): Date | null {
	if (hour > 23 || minute > 59 || second > 59) return null;
	// setUTCFullYear, unlike Date.UTC, does not map years 0-99 onto 1900-1999.
	const date = new Date(0);
	date.setUTCFullYear(year, month - 1, day);
	const overflowed = date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day;
	if (overflowed) return null;
	date.setUTCHours(hour, minute, second, Number(fraction.padEnd(3, "0").slice(0, 3)));
	return date;
}

function zoneOffsetMinutes(zone: string): number | null {
	if (zone === "Z") return 0;
	const digits = zone.slice(1).replace(":", "");
	const hours = Number(digits.slice(0, 2));
	const minutes = Number(digits.slice(2));
	if (hours > 23 || minutes > 59) return null;
	return (zone[0] === "-" ? -1 : 1) * (hours * 60 + minutes);
}

const NUMBER = "(\\d+(?:[.,]\\d+)?)";
const DURATION = new RegExp(
	`^P(?:${NUMBER}Y)?(?:${NUMBER}M)?(?:${NUMBER}W)?(?:${NUMBER}D)?` +
		`(?:T(?:${NUMBER}H)?(?:${NUMBER}M)?(?:${NUMBER}S)?)?$`
);
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
// A duration has no anchor date here, so calendar units use fixed lengths: a year is 365 days
// and a month 30 days. Good enough for "the last N months" style time filters.
const UNIT_MS = [365 * DAY_MS, 30 * DAY_MS, 7 * DAY_MS, DAY_MS, HOUR_MS, 60_000, 1000];
// Anything longer reaches past the range a JavaScript Date can represent from the epoch.
const MAX_DURATION_MS = 8.64e15;

/** Parses an ISO-8601 duration such as PT3H, P1D or P1Y2M3DT4H5M6.5S into milliseconds. */
export function parseDuration(text: string): number {
	const match = DURATION.exec(text);
	if (!match || text === "P" || text.endsWith("T")) {
		throw new Iso8601Error(text, "is not an ISO-8601 duration");
	}
	const ms = UNIT_MS.reduce(
		(total, unit, i) => total + unit * Number((match[i + 1] ?? "0").replace(",", ".")),
		0
	);
	if (ms > MAX_DURATION_MS) throw new Iso8601Error(text, "is too long a duration");
	return Math.round(ms);
}

/** ISO-8601 in UTC with milliseconds, e.g. 2015-10-05T21:26:04.876Z, as Scale's API returns. */
export function formatDatetime(d: Date): string {
	return d.toISOString();
}
