import { INT4_MAX } from "../validation/ids";
/** A bad argument of a REPL command: printed as is, and nothing is called. */
export class ReplArgError extends Error {}

/** A positive integer id from a command argument. */
export function positiveInt(name: string, raw: unknown): number {
	const text = String(raw ?? "").trim();
	if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > INT4_MAX)
		throw new ReplArgError(`${name} must be a positive integer, got "${raw ?? ""}"`);
	return Number(text);
}

/** One of `allowed` (case-insensitive), answered as written there. */
export function oneOf(name: string, raw: unknown, allowed: readonly string[]): string {
	const text = String(raw ?? "").trim();
	const match = allowed.find(a => a.toLowerCase() === text.toLowerCase());
	if (!match)
		throw new ReplArgError(`${name} must be one of ${allowed.join(", ")}, got "${raw ?? ""}"`);
	return match;
}

/** A UTC day, YYYY-MM-DD, that exists in the calendar. */
export function day(name: string, raw: unknown): string {
	const text = String(raw ?? "").trim();
	const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
	const date = m ? new Date(Date.UTC(+m[1], +m[2] - 1, +m[3])) : null;
	if (!m || !date || date.toISOString().slice(0, 10) !== text)
		throw new ReplArgError(`${name} must be a day as YYYY-MM-DD, got "${raw ?? ""}"`);
	return text;
}

/** Ids given as separate arguments or separated by commas. */
export function idList(name: string, raw: unknown): number[] {
	const parts = (Array.isArray(raw) ? raw : [raw])
		.flatMap(v => String(v ?? "").split(","))
		.map(s => s.trim())
		.filter(Boolean);
	if (parts.length === 0) throw new ReplArgError(`give at least one ${name}`);
	return parts.map(p => positiveInt(name, p));
}
