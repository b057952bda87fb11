import { FieldError } from "../errors";
import { Iso8601Error, parseDatetime, parseDuration } from "../validation/schema";
import { INT4_MAX, INT4_MIN } from "../validation/ids";

export type FilterType = "string" | "integer" | "boolean" | "enum";

export interface ListSpec {
	/** order keys the endpoint accepts, mapped to SQL expressions (already safe, trusted strings), e.g. { id: '"error"."id"', name: '"error"."name"', job_type__name: '"job_type"."name"' }. Keys may contain "__" for nested fields. */
	orderable: Record<string, string>;
	/** default order when none is given, e.g. ['-last_modified'] or ['id']; entries are keys of orderable. */
	defaultOrder: string[];
	/** SQL expression the started/ended range applies to, e.g. '"error"."last_modified"'; null = the endpoint ignores started/ended. */
	timeColumn: string | null;
	/** repeatable filters by query name */
	filters: Record<string, ListFilter>;
}

/**
 * A repeatable filter: rows whose `column` equals any of the values given. With `lookup`, the
 * values name records of another table (job type names) and `lookup` is the SQL that turns them
 * (bound as an array, `$1`) into the values of `column` (the list table's own `job_type_id`):
 * the list runs it first (lib/list/run.ts), so its statement tests an indexed column of its own
 * table with values the planner knows, for the page's plan and the count's estimate alike.
 */
export interface ListFilter {
	column: string;
	type: FilterType;
	/** the allowed values of an enum */
	values?: string[];
	lookup?: string;
	/**
	 * The table `lookup` reads, when it is one whose changes raise a generation (migration
	 * 0011): a list of kept records then keeps the lookup's answer while that generation stands.
	 */
	lookupTable?: "job_type" | "error";
}

export interface ParsedList {
	page: number;
	pageSize: number;
	offset: number;
	limit: number;
	/** SQL ORDER BY body, e.g. '"error"."name" DESC, "error"."id" ASC'; always ends with a unique tie-breaker on the first orderable key named 'id' if present, so paging is stable */
	orderBy: string;
	/** SQL WHERE conditions joined with AND (no leading WHERE), or 'TRUE' */
	where: string;
	/** bind values for $1, $2 ... used in `where` (PostgreSQL positional binds) */
	bind: unknown[];
	started: Date | null;
	ended: Date | null;
}

const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1000;
const TIME_HINT = "use ISO-8601 with Z or an offset, or a duration such as PT3H";

/**
 * The SQL of a list request. `looked` holds, for each filter with a lookup that was given, the
 * values its lookup answered (lib/list/run.ts runs them).
 */
export function parseListQuery(
	query: Record<string, unknown>,
	spec: ListSpec,
	now: Date = new Date(),
	looked: Record<string, unknown[]> = {}
): ParsedList {
	const { page, pageSize } = parsePaging(query);
	const { started, ended } = spec.timeColumn === null ? noRange() : parseRange(query, now);
	const binds = new Binds();
	const conditions = [
		...rangeConditions(spec.timeColumn, started, ended, binds),
		...filterConditions(query, spec.filters, looked, binds)
	];
	return {
		page,
		pageSize,
		offset: (page - 1) * pageSize,
		limit: pageSize,
		orderBy: parseOrder(query, spec),
		where: conditions.length > 0 ? conditions.join(" AND ") : "TRUE",
		bind: binds.values,
		started,
		ended
	};
}

/**
 * The values of a query parameter in order. qs, which moleculer-web parses queries with, turns a
 * parameter repeated more than 20 times into an object keyed "0", "1", ... instead of an array.
 */
export function queryList(value: unknown): unknown[] {
	if (value === undefined || value === null) return [];
	if (Array.isArray(value)) return value;
	if (isIndexObject(value)) {
		return Object.keys(value)
			.sort((a, b) => Number(a) - Number(b))
			.map(key => value[key]);
	}
	return [value];
}

function isIndexObject(value: unknown): value is Record<string, unknown> {
	if (typeof value !== "object" || value === null) return false;
	const keys = Object.keys(value);
	return keys.length > 0 && keys.every(key => /^\d+$/.test(key));
}

/** Non-empty values as text; an empty value means the same as an absent one. */
function texts(query: Record<string, unknown>, field: string): string[] {
	return queryList(query[field])
		.map(value => {
			if (typeof value === "string") return value;
			if (typeof value === "number" || typeof value === "boolean") return String(value);
			throw new FieldError(field, "must be a plain value, not a nested object");
		})
		.filter(text => text !== "");
}

function single(query: Record<string, unknown>, field: string): string | undefined {
	const values = texts(query, field);
	if (values.length > 1) throw new FieldError(field, "must be given at most once");
	return values[0];
}

function parsePaging(query: Record<string, unknown>): { page: number; pageSize: number } {
	const pageSize = parseBoundedInt(query, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
	const page = parseBoundedInt(query, "page", 1);
	if (!Number.isSafeInteger((page - 1) * pageSize)) {
		throw new FieldError("page", "is too large");
	}
	return { page, pageSize };
}

function parseBoundedInt(
	query: Record<string, unknown>,
	field: string,
	fallback: number,
	max = Infinity
): number {
	const text = single(query, field);
	if (text === undefined) return fallback;
	const value = Number(text);
	if (!/^\d+$/.test(text) || value < 1 || value > max) {
		const range = max === Infinity ? "of at least 1" : `from 1 to ${max}`;
		throw new FieldError(field, `must be an integer ${range}`);
	}
	return value;
}

function parseOrder(query: Record<string, unknown>, spec: ListSpec): string {
	const given = texts(query, "order");
	const keys = given.length > 0 ? given : spec.defaultOrder;
	// Later mentions of a key cannot change the order, so they are dropped.
	const byKey = new Map<string, string>();
	for (const key of keys) {
		const descending = key.startsWith("-");
		// `error.category` is `error__category`: Scale's web UI sorts by its grid's field paths
		const name = (descending ? key.slice(1) : key).replaceAll(".", "__");
		const column = Object.hasOwn(spec.orderable, name) ? spec.orderable[name] : undefined;
		if (column === undefined) {
			const allowed = Object.keys(spec.orderable).join(", ");
			throw new FieldError("order", `unknown field "${name}" (allowed: ${allowed})`);
		}
		if (!byKey.has(name)) byKey.set(name, `${column} ${descending ? "DESC" : "ASC"}`);
	}
	// Without a unique last key, rows that tie may swap between pages. It runs the way the first
	// key does, so one index on (key, id) read forwards or backwards gives the whole order.
	if (Object.hasOwn(spec.orderable, "id") && !byKey.has("id")) {
		const first = [...byKey.values()][0];
		byKey.set("id", `${spec.orderable.id} ${first?.endsWith(" DESC") ? "DESC" : "ASC"}`);
	}
	return [...byKey.values()].join(", ");
}

function noRange(): { started: null; ended: null } {
	return { started: null, ended: null };
}

function parseRange(
	query: Record<string, unknown>,
	now: Date
): { started: Date | null; ended: Date | null } {
	const startedText = single(query, "started");
	const endedText = single(query, "ended");
	const started = startedText === undefined ? null : parseInstant("started", startedText, now);
	const ended =
		endedText !== undefined
			? parseInstant("ended", endedText, now)
			: started !== null
				? now
				: null;
	if (started !== null && ended !== null && started > ended) {
		throw new FieldError("started", "must be before ended");
	}
	return { started, ended };
}

/** A datetime, or a duration meaning that long before `now`. */
function parseInstant(field: string, text: string, now: Date): Date {
	let instant: Date;
	try {
		instant = text.startsWith("P")
			? new Date(now.getTime() - parseDuration(text))
			: parseDatetime(text);
	} catch (error) {
		if (!(error instanceof Iso8601Error)) throw error;
		throw new FieldError(field, `${error.message}; ${TIME_HINT}`);
	}
	if (Number.isNaN(instant.getTime())) {
		throw new FieldError(field, `"${text}" reaches back before any representable date`);
	}
	return instant;
}

/** Hands out PostgreSQL positional placeholders for values bound in order. */
class Binds {
	readonly values: unknown[] = [];

	add(value: unknown): string {
		this.values.push(value);
		return `$${this.values.length}`;
	}
}

function rangeConditions(
	column: string | null,
	started: Date | null,
	ended: Date | null,
	binds: Binds
): string[] {
	if (column === null) return [];
	const conditions: string[] = [];
	if (started !== null) conditions.push(`${column} >= ${binds.add(started)}`);
	if (ended !== null) conditions.push(`${column} <= ${binds.add(ended)}`);
	return conditions;
}

const ARRAY_TYPES: Record<FilterType, string> = {
	string: "text[]",
	enum: "text[]",
	integer: "int[]",
	boolean: "boolean[]"
};

/** The values given to a filter, checked against its type (a 400 naming the filter if not). */
export function filterValues(
	query: Record<string, unknown>,
	field: string,
	filter: ListFilter
): (string | number | boolean)[] {
	return texts(query, field).map(text => parseFilterValue(field, filter, text));
}

function filterConditions(
	query: Record<string, unknown>,
	filters: ListSpec["filters"],
	looked: Record<string, unknown[]>,
	binds: Binds
): string[] {
	const conditions: string[] = [];
	for (const [field, filter] of Object.entries(filters)) {
		let values: unknown[] = filterValues(query, field, filter);
		if (values.length === 0) continue;
		let type: FilterType = filter.type;
		if (filter.lookup !== undefined) {
			if (!Object.hasOwn(looked, field))
				throw new Error(`the lookup of ${field} was not run`);
			values = looked[field];
			type = "integer";
		}
		if (values.length === 0) {
			// nothing of that name: no row can match
			conditions.push("FALSE");
		} else if (values.length === 1) {
			// Equality, not = ANY: the planner then knows one value, so an index on (column,
			// order column) gives the page in order instead of a sort of every match.
			conditions.push(`${filter.column} = ${binds.add(values[0])}`);
		} else {
			conditions.push(`${filter.column} = ANY(${binds.add(values)}::${ARRAY_TYPES[type]})`);
		}
	}
	return conditions;
}

function parseFilterValue(
	field: string,
	filter: ListFilter,
	text: string
): string | number | boolean {
	switch (filter.type) {
		case "integer":
			return parseIntFilter(field, text);
		case "boolean":
			return parseBooleanFilter(field, text);
		case "enum":
			return parseEnumFilter(field, filter.values ?? [], text);
		case "string":
			// PostgreSQL text cannot hold NUL, and would fail the whole query with a 500.
			if (text.includes("\0")) throw new FieldError(field, "must not contain NUL");
			return text;
	}
}

function parseIntFilter(field: string, text: string): number {
	const value = Number(text);
	if (!/^-?\d+$/.test(text) || value < INT4_MIN || value > INT4_MAX) {
		throw new FieldError(field, `"${text}" is not an integer`);
	}
	return value;
}

// A Map, not an object literal, so that "constructor" and friends are not found on the prototype.
const BOOLEANS = new Map([
	["true", true],
	["True", true],
	["1", true],
	["false", false],
	["False", false],
	["0", false]
]);

function parseBooleanFilter(field: string, text: string): boolean {
	const value = BOOLEANS.get(text);
	if (value === undefined) {
		throw new FieldError(field, `"${text}" is not a boolean (use true or false)`);
	}
	return value;
}

function parseEnumFilter(field: string, allowed: string[], text: string): string {
	if (!allowed.includes(text)) {
		throw new FieldError(field, `unknown value "${text}" (allowed: ${allowed.join(", ")})`);
	}
	return text;
}
