import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import {
	jsonAnswer,
	LIST_PARAMS,
	listParamsSchema,
	listRequest,
	REPEATABLE
} from "../mixins/list.mixin";
import { NotFoundError } from "../lib/errors";
import { buildEnvelope } from "../lib/list/envelope";
import { computeDailyMetrics } from "../lib/metrics/compute";
import { getMetricsDetails, getPlotData, parsePlotQuery } from "../lib/metrics/plot";
import { findMetricsType, METRICS_TYPES, serializeMetricsType } from "../lib/metrics/types";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";

/**
 * Metrics (Scale 3.0's scale/metrics/views.py): the metrics types, a type's details with the
 * records its values are kept for as choices, and its plot data by day, read from the daily
 * metrics tables.
 */

const NAME = {
	type: "object",
	required: ["name"],
	properties: { name: { type: "string", minLength: 1, maxLength: 100 } }
};

type Query = Record<string, unknown>;

function typeNamed(name: string) {
	const type = findMetricsType(name);
	if (type === undefined) throw new NotFoundError("Not found.");
	return type;
}

const MetricsService: ServiceSchema = {
	name: "metrics",
	mixins: [DbMixin()],

	actions: {
		/**
		 * Computes one UTC day's metrics now (internal; from the REPL:
		 * `call metrics.compute --day 2026-11-23`); the clock's `scale-daily-metrics` rule does
		 * it for each day after midnight. Computing a day again replaces its rows.
		 */
		compute: {
			params: jsonParams({
				type: "object",
				required: ["day"],
				properties: { day: { type: "string" } }
			}),
			async handler(this: Service, ctx: Context<{ day: string }>) {
				const rows = await computeDailyMetrics(this.db, ctx.params.day);
				this.logger.info({ day: ctx.params.day, ...rows }, "daily metrics computed");
				return rows;
			}
		},

		list: {
			rest: "GET /metrics",
			params: jsonParams({
				[QUERY_SCHEMA]: true,
				type: "object",
				properties: { page: LIST_PARAMS.page, page_size: LIST_PARAMS.page_size }
			}),
			handler(this: Service, ctx: Context<Query, RequestMeta>) {
				const request = listRequest(ctx, "/api/metrics/");
				const page = Number(ctx.params.page ?? 1);
				const pageSize = Number(ctx.params.page_size ?? 100);
				const offset = (page - 1) * pageSize;
				return buildEnvelope({
					count: METRICS_TYPES.length,
					page,
					pageSize,
					hasMore: offset + pageSize < METRICS_TYPES.length,
					results: METRICS_TYPES.slice(offset, offset + pageSize).map(
						serializeMetricsType
					),
					baseUrl: request.baseUrl,
					path: request.path,
					query: request.query
				});
			}
		},

		get: {
			rest: "GET /metrics/:name",
			params: jsonParams(NAME),
			async handler(this: Service, ctx: Context<{ name: string }, RequestMeta>) {
				return jsonAnswer(
					ctx,
					await getMetricsDetails(this.db, typeNamed(ctx.params.name))
				);
			}
		},

		plotData: {
			rest: "GET /metrics/:name/plot-data",
			params: jsonParams({
				...listParamsSchema({
					choice_id: REPEATABLE,
					column: REPEATABLE,
					group: REPEATABLE
				}),
				required: ["name"],
				properties: {
					...listParamsSchema().properties,
					name: NAME.properties.name,
					choice_id: REPEATABLE,
					column: REPEATABLE,
					group: REPEATABLE
				}
			}),
			async handler(this: Service, ctx: Context<Query & { name: string }, RequestMeta>) {
				const type = typeNamed(ctx.params.name);
				const request = listRequest(ctx, `/api/metrics/${type.name}/plot-data/`);
				const plot = parsePlotQuery(type, request.query);
				return jsonAnswer(ctx, await getPlotData(this.db, type, plot, request));
			}
		}
	}
};

export default MetricsService;
