import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { FieldError, BadRequestError } from "../errors";
import { BODY_SCHEMA, PARSE_INT, READ_ONLY_GIVEN } from "./body";
import { DateTime, Duration } from "luxon";

/** Checks of what clients send: JSON Schemas (ajv) for bodies and params, and ISO-8601 times (below). */

export interface FieldProblem {
	type: string;
	field: string;
	message: string;
}

/** Marks a params schema whose values come from a query string, so "5" may stand for 5. */
export const QUERY_SCHEMA = "$$query";

function makeAjv(coerce: boolean): Ajv {
	// Bodies are checked strictly: a client sending "5" for an integer has a bug worth a 400.
	const ajv = new Ajv({
		allErrors: false,
		useDefaults: true,
		coerceTypes: coerce ? "array" : false,
		allowUnionTypes: true,
		strict: true
	});
	addFormats(ajv);
	ajv.addKeyword({ keyword: PARSE_INT, schemaType: "boolean" });
	return ajv;
}

const strictAjv = makeAjv(false);
const queryAjv = makeAjv(true);

/** JSON pointer `/interface/input_data/1/name` → `interface.input_data[1].name` */
export function pointerToPath(pointer: string): string {
	return pointer
		.split("/")
		.slice(1)
		.map(p => p.replace(/~1/g, "/").replace(/~0/g, "~"))
		.reduce(
			(acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part),
			""
		);
}

function describe(err: ErrorObject): FieldProblem {
	let field = pointerToPath(err.instancePath);
	let message = err.message || "is invalid";
	switch (err.keyword) {
		case "required":
			field = field ? `${field}.${err.params.missingProperty}` : err.params.missingProperty;
			message = "is required";
			break;
		case "additionalProperties":
			field = field
				? `${field}.${err.params.additionalProperty}`
				: err.params.additionalProperty;
			message = "is not allowed";
			break;
		case "enum":
			message = `must be one of ${(err.params.allowedValues as unknown[]).join(", ")}`;
			break;
	}
	return { type: err.keyword, field: field || "body", message };
}

export type Checker = (value: unknown) => true | FieldProblem[];

/** Compiles a JSON Schema into a checker giving `true` or the problems found, each naming its field. */
export function compileChecker(schema: Record<string, unknown>): Checker {
	const { [QUERY_SCHEMA]: isQuery, [BODY_SCHEMA]: readOnly, ...jsonSchema } = schema;
	const validate: ValidateFunction = (isQuery ? queryAjv : strictAjv).compile(jsonSchema);
	const check: Checker = value =>
		validate(value) ? true : (validate.errors || []).map(describe);
	const properties = (jsonSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
	const digits = Object.entries(properties).filter(
		([, p]) =>
			p[PARSE_INT] === true || (p.items as Record<string, unknown>)?.[PARSE_INT] === true
	);
	if (readOnly === undefined && digits.length === 0) return check;
	return value => {
		if (value === null || typeof value !== "object" || Array.isArray(value))
			return check(value);
		const body = value as Record<string | symbol, unknown>;
		for (const [field] of digits) if (field in body) body[field] = integerOfDigits(body[field]);
		const unknown =
			readOnly === undefined
				? []
				: takeReadOnly(body, properties, readOnly as readonly string[]);
		const checked = check(body);
		if (checked === true && unknown.length === 0) return true;
		return [...(checked === true ? [] : checked), ...unknown];
	};
}

/**
 * A body's unknown fields, all of them, as problems; the read-only fields it carries taken out
 * (under READ_ONLY_GIVEN) when there are none.
 */
function takeReadOnly(
	body: Record<string | symbol, unknown>,
	properties: Record<string, unknown>,
	readOnly: readonly string[]
): FieldProblem[] {
	const given: string[] = [];
	const problems: FieldProblem[] = [];
	for (const field of Object.keys(body)) {
		if (Object.hasOwn(properties, field)) continue;
		if (readOnly.includes(field)) given.push(field);
		else {
			problems.push({
				type: "additionalProperties",
				field,
				message: "is not a field of this request"
			});
		}
	}
	if (problems.length > 0) {
		// the fields it takes, once, after the last
		const last = problems[problems.length - 1];
		last.message += ` (its fields: ${Object.keys(properties).join(", ")})`;
		return problems;
	}
	for (const field of given) delete body[field];
	if (given.length > 0) body[READ_ONLY_GIVEN] = given;
	return [];
}

/** Scale's parse_int: a string of digits is its number; anything else is left for the schema. */
function integerOfDigits(value: unknown): unknown {
	if (Array.isArray(value)) return value.map(integerOfDigits);
	return typeof value === "string" && /^\d{1,15}$/.test(value) ? Number(value) : value;
}

/** Formats problems as one sentence for a `{"detail": ...}` body. */
export function formatProblems(problems: FieldProblem[]): string {
	return problems.map(p => `${p.field}: ${p.message}`).join("; ");
}

/** The path of a problem under `field` (a document's place in the request; empty = the body). */
export function problemPath(field: string | undefined, p: FieldProblem): string {
	if (p.field === "body") return field || "body";
	return field ? `${field}.${p.field}` : p.field;
}

/**
 * Throws FieldError (400) for the first problem `check` finds in `value`, named by its path
 * under `field`; `message` may reword a problem (e.g. a name pattern into its rule).
 */
export function assertSchema(
	check: Checker,
	value: unknown,
	field: string | undefined,
	message: (p: FieldProblem) => string = p => p.message
): void {
	const problems = check(value);
	if (problems === true) return;
	const [p] = problems;
	throw new FieldError(problemPath(field, p), message(p));
}

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `text` cannot be stored in PostgreSQL as it is, or null: text and jsonb hold no NUL, jsonb
 * refuses an unpaired surrogate escape and text would silently turn one into U+FFFD.
 */
export function textProblem(text: string): string | null {
	if (text.includes("\0")) return "must not contain NUL characters";
	if (UNPAIRED_SURROGATE.test(text)) return "must not contain unpaired UTF-16 surrogates";
	return null;
}

/** Throws FieldError at the first string (value or key) in `value` PostgreSQL cannot store. */
export function checkStorableText(value: unknown, field: string): void {
	// the path is spelled out only for the string at fault: the documents of every new job pass
	// here, and nearly all of them are fine
	const at: (string | number)[] = [];
	const fieldAt = () =>
		at.reduce<string>(
			(path, step) =>
				typeof step === "number" ? `${path}[${step}]` : path ? `${path}.${step}` : step,
			field
		);
	const walk = (item: unknown): void => {
		if (typeof item === "string") {
			const problem = textProblem(item);
			if (problem) throw new FieldError(fieldAt(), problem);
		} else if (Array.isArray(item)) {
			for (let i = 0; i < item.length; i++) {
				at.push(i);
				walk(item[i]);
				at.pop();
			}
		} else if (item !== null && typeof item === "object") {
			for (const key in item) {
				if (!Object.prototype.hasOwnProperty.call(item, key)) continue;
				const problem = textProblem(key);
				if (problem) throw new FieldError(fieldAt(), `field names ${problem}`);
				at.push(key);
				walk((item as Record<string, unknown>)[key]);
				at.pop();
			}
		}
	};
	walk(value);
}

/** How deep a request body may nest: the documents the API takes need a handful of levels. */
export const MAX_BODY_DEPTH = 64;

/**
 * Refuses a body nested deeper than MAX_BODY_DEPTH (400), measured without recursion: the
 * validators and serialisers that walk a body recursively would exhaust the stack on one
 * thousands of levels deep and answer 500.
 */
export function checkBodyDepth(body: unknown): void {
	const stack: [unknown, number][] = [[body, 1]];
	while (stack.length > 0) {
		const [value, depth] = stack.pop()!;
		if (value === null || typeof value !== "object") continue;
		if (depth > MAX_BODY_DEPTH)
			throw new BadRequestError(`body: nested deeper than ${MAX_BODY_DEPTH} levels`);
		for (const child of Object.values(value as object)) stack.push([child, depth + 1]);
	}
}

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
