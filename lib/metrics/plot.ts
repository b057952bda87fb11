import type { Sequelize } from "sequelize";
import { select } from "../db/run";
import { FieldError } from "../errors";
import { AnswerCache, generationsOf } from "../list/answer-cache";
import { buildEnvelope } from "../list/envelope";
import { formatDatetime, Iso8601Error, parseDatetime, parseDuration } from "../validation/schema";
import { queryList } from "../list/params";
import { serializeStrikeBase } from "../records/ingest";
import { serializeJobTypeBase, type JobTypeRow } from "../records/job-type";
import type { ListRequest } from "../list/run";
import {
	serializeMetricsType,
	type ChoiceKind,
	type MetricsColumn,
	type MetricsType
} from "./types";

/**
 * The read side of Scale 3.0's metrics (scale/metrics/views.py, models.py get_plot_data): the
 * details of a type with its choices, and the plot data of its columns by day, from the daily
 * tables (metrics_job_type, metrics_ingest, metrics_error) in one grouped statement per request.
 */

const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1000;
const TIME_HINT = "use ISO-8601 with Z or an offset, or a duration such as PT3H";

/** The choice records: table, columns read, order and serializer. */
const CHOICES: Record<
	ChoiceKind,
	{ table: string; columns: string; where: string; serialize(row: any): unknown }
> = {
	"job-type": {
		table: "job_type",
		columns: `id, name, version, title, description, category, author_name, author_url,
				is_system, is_long_running, is_active, is_operational, is_paused, icon_code`,
		where: "TRUE",
		serialize: (row: JobTypeRow) => serializeJobTypeBase(row)
	},
	strike: {
		table: "strike",
		columns: "id, name, title, description, job_id",
		where: "TRUE",
		serialize: serializeStrikeBase
	},
	// Scale's ErrorBaseSerializer
	error: {
		table: "error",
		columns: "id, name, title, description, category, is_builtin",
		where: "c.is_builtin",
		serialize: (row: any) => ({
			id: row.id,
			name: row.name,
			title: row.title,
			description: row.description,
			category: row.category,
			is_builtin: row.is_builtin
		})
	}
};

/**
 * A type's details (JSON): its definition with its groups (Scale 3.0's details serializer kept
 * them; its web UI looks each column's group title up) and, as choices, every record of its kind
 * (Scale 3.0: all job types, all strikes, the built-in errors), metrics rows or not.
 */
export function getMetricsDetails(db: Sequelize, type: MetricsType): Promise<Buffer> {
	return keptAnswer(db, JSON.stringify(["details", type.name]), type, async () => {
		const choice = CHOICES[type.choice];
		const rows = await select(
			db,
			`SELECT ${choice.columns} FROM ${choice.table} c WHERE ${choice.where} ORDER BY c.id`
		);
		return { ...serializeMetricsType(type), choices: rows.map(row => choice.serialize(row)) };
	});
}

export interface PlotQuery {
	page: number;
	pageSize: number;
	/** UTC dates YYYY-MM-DD, inclusive; null = unbounded */
	started: string | null;
	ended: string | null;
	choiceIds: number[];
	columns: MetricsColumn[];
}

/** Non-empty texts of a repeatable query parameter. */
function texts(query: Record<string, unknown>, field: string): string[] {
	return queryList(query[field])
		.map(value => {
			if (typeof value === "string") return value;
			if (typeof value === "number") return String(value);
			throw new FieldError(field, "must be a plain value, not a nested object");
		})
		.filter(text => text !== "");
}

function single(query: Record<string, unknown>, field: string): string | undefined {
	const values = texts(query, field);
	if (values.length > 1) throw new FieldError(field, "must be given at most once");
	return values[0];
}

function positive(query: Record<string, unknown>, field: string, fallback: number, max: number) {
	const text = single(query, field);
	if (text === undefined) return fallback;
	const value = Number(text);
	if (!/^\d+$/.test(text) || value < 1 || value > max) {
		const range = max === Infinity ? "of at least 1" : `from 1 to ${max}`;
		throw new FieldError(field, `must be an integer ${range}`);
	}
	return value;
}

/** A datetime, or a duration meaning that long before `now`. */
function instant(query: Record<string, unknown>, field: string, now: Date): Date | null {
	const text = single(query, field);
	if (text === undefined) return null;
	let at: Date;
	try {
		at = text.startsWith("P")
			? new Date(now.getTime() - parseDuration(text))
			: parseDatetime(text);
	} catch (error) {
		if (!(error instanceof Iso8601Error)) throw error;
		throw new FieldError(field, `${error.message}; ${TIME_HINT}`);
	}
	if (Number.isNaN(at.getTime())) {
		throw new FieldError(field, `"${text}" reaches back before any representable date`);
	}
	return at;
}

/** The day (UTC) of an instant, as the `occurred` dates are kept. */
const day = (at: Date) => formatDatetime(at).slice(0, 10);

/**
 * The plot-data parameters. Columns are those named (in the order named, Scale's web UI reads
 * the results by position) and then those of the groups named, in the type's order; neither
 * means all. Unknown parameters are ignored.
 */
export function parsePlotQuery(
	type: MetricsType,
	query: Record<string, unknown>,
	now: Date = new Date()
): PlotQuery {
	const pageSize = positive(query, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
	const page = positive(query, "page", 1, Infinity);
	if (!Number.isSafeInteger((page - 1) * pageSize)) throw new FieldError("page", "is too large");

	const started = instant(query, "started", now);
	const ended = instant(query, "ended", now);
	if (started !== null && ended !== null && started > ended) {
		throw new FieldError("started", "must be before ended");
	}

	const choiceIds: number[] = [];
	for (const text of texts(query, "choice_id")) {
		if (!/^\d{1,9}$/.test(text) || Number(text) < 1) {
			throw new FieldError("choice_id", `"${text}" is not the id of a choice`);
		}
		if (!choiceIds.includes(Number(text))) choiceIds.push(Number(text));
	}

	const byName = new Map(type.columns.map(c => [c.name, c]));
	const chosen = new Set<MetricsColumn>();
	for (const text of texts(query, "column")) {
		const name = Object.hasOwn(type.aliases, text) ? type.aliases[text] : text;
		const found = byName.get(name);
		if (found === undefined) {
			const allowed = type.columns.map(c => c.name).join(", ");
			throw new FieldError("column", `unknown column "${text}" (allowed: ${allowed})`);
		}
		chosen.add(found);
	}
	const groups = texts(query, "group");
	for (const group of groups) {
		if (!type.groups.some(g => g.name === group)) {
			const allowed = type.groups.map(g => g.name).join(", ");
			throw new FieldError("group", `unknown group "${group}" (allowed: ${allowed})`);
		}
	}
	for (const c of type.columns) if (groups.includes(c.group)) chosen.add(c);
	const columns = chosen.size > 0 ? [...chosen] : [...type.columns];

	return {
		page,
		pageSize,
		started: started === null ? null : day(started),
		ended: ended === null ? null : day(ended),
		choiceIds,
		columns
	};
}

/** 400 naming choice_id unless each id is a record of the type's choice (a job type, say). */
async function checkChoices(db: Sequelize, type: MetricsType, ids: number[]): Promise<void> {
	if (ids.length === 0) return;
	const rows = await select<{ id: number }>(
		db,
		`SELECT id FROM ${CHOICES[type.choice].table} WHERE id = ANY($1::int[])`,
		[ids]
	);
	const known = new Set(rows.map(r => r.id));
	const unknown = ids.filter(id => !known.has(id));
	if (unknown.length > 0) {
		throw new FieldError(
			"choice_id",
			`${unknown.join(", ")} ${unknown.length > 1 ? "are not choices" : "is not a choice"} of ${type.name}`
		);
	}
}

/** The SQL aggregate across choices of a day: Scale's running sum, min, max or (integer) mean. */
const AGGREGATES = {
	sum: (c: string) => `SUM(${c})`,
	min: (c: string) => `MIN(${c})`,
	max: (c: string) => `MAX(${c})`,
	avg: (c: string) => `FLOOR(AVG(${c}))`
};

export interface PlotValue {
	id?: number;
	date: string;
	value: number;
}

export interface PlotData {
	column: MetricsColumn;
	min_x: string | null;
	max_x: string | null;
	min_y: number | null;
	max_y: number | null;
	values: PlotValue[];
}

/** Answers kept per database (tests hold several in one process): 16 MiB each at most. */
const ANSWER_BYTES = 16 * 1024 * 1024;
const answers = new WeakMap<Sequelize, AnswerCache>();

/**
 * The answer (JSON) under `key`, made by `make` unless kept since the type's metrics table and its
 * choices' table last changed. The metrics tables change only when a day is computed, so their
 * answers are kept until then (their generations are read at every request): the web UI's failure
 * rates (sixty job types, four columns, 90 days: ~300 KB) cost ~13 ms of the service's time to read
 * and serialize at every poll.
 */
async function keptAnswer(
	db: Sequelize,
	key: string,
	type: MetricsType,
	make: () => Promise<unknown>
): Promise<Buffer> {
	let cache = answers.get(db);
	if (cache === undefined) answers.set(db, (cache = new AnswerCache(ANSWER_BYTES)));
	// read before the data: a change after it makes the answer kept under an older version
	const version = await generationsOf(db, [type.table, CHOICES[type.choice].table]);
	const kept = cache.get(key, version);
	if (kept !== undefined) return kept;
	const json = Buffer.from(JSON.stringify(await make()));
	cache.set(key, version, json);
	return json;
}

/**
 * The plot data of the page's columns as the envelope's JSON (UTF-8), one entry per column.
 * Without choice_id the values of a day are aggregated across choices by the column's aggregate
 * (sum for the counts); with one, that choice's values; with several, each choice's values with
 * its `id`. Oldest first.
 */
export function getPlotData(
	db: Sequelize,
	type: MetricsType,
	plot: PlotQuery,
	request: ListRequest
): Promise<Buffer> {
	const key = JSON.stringify([type.name, plot, request.baseUrl, request.path, request.query]);
	return keptAnswer(db, key, type, () => plotData(db, type, plot, request));
}

async function plotData(db: Sequelize, type: MetricsType, plot: PlotQuery, request: ListRequest) {
	await checkChoices(db, type, plot.choiceIds);
	const offset = (plot.page - 1) * plot.pageSize;
	const columns = plot.columns.slice(offset, offset + plot.pageSize);

	const bind: unknown[] = [];
	const where: string[] = [];
	if (plot.started !== null) {
		bind.push(plot.started);
		where.push(`occurred >= $${bind.length}::date`);
	}
	if (plot.ended !== null) {
		bind.push(plot.ended);
		where.push(`occurred <= $${bind.length}::date`);
	}
	const grouped = plot.choiceIds.length === 0;
	if (!grouped) {
		bind.push(plot.choiceIds);
		where.push(`${type.choiceColumn} = ANY($${bind.length}::int[])`);
	}
	// the column names are the type's own, checked by parsePlotQuery
	const selected = columns.map((c, i) =>
		grouped ? `${AGGREGATES[c.aggregate](c.name)} AS c${i}` : `${c.name} AS c${i}`
	);
	const rows =
		columns.length === 0
			? []
			: await select(
					db,
					`SELECT ${grouped ? "" : `${type.choiceColumn} AS id, `}occurred::text AS date,
						${selected.join(", ")}
					 FROM ${type.table}
					 WHERE ${where.length > 0 ? where.join(" AND ") : "TRUE"}
					 ${grouped ? "GROUP BY occurred" : ""}
					 ORDER BY occurred${grouped ? "" : `, ${type.choiceColumn}`}`,
					bind
				);

	const withIds = plot.choiceIds.length > 1;
	const results = columns.map((column, i): PlotData => {
		const values: PlotValue[] = [];
		for (const row of rows) {
			const raw = row[`c${i}`];
			if (raw === null || raw === undefined) continue;
			const value = Number(raw);
			values.push(
				withIds ? { id: row.id, date: row.date, value } : { date: row.date, value }
			);
		}
		const ys = values.map(v => v.value);
		return {
			column,
			min_x: values.length > 0 ? values[0].date : null,
			max_x: values.length > 0 ? values[values.length - 1].date : null,
			min_y: ys.length > 0 ? ys.reduce((a, b) => Math.min(a, b)) : null,
			max_y: ys.length > 0 ? ys.reduce((a, b) => Math.max(a, b)) : null,
			values
		};
	});
	return buildEnvelope({
		count: plot.columns.length,
		page: plot.page,
		pageSize: plot.pageSize,
		hasMore: offset + plot.pageSize < plot.columns.length,
		results,
		baseUrl: request.baseUrl,
		path: request.path,
		query: request.query
	});
}
