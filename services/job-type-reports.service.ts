import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { jsonAnswer, LIST_PARAMS, listRequest } from "../mixins/list.mixin";
import {
	getJobTypeStatus,
	getRunningJobTypes,
	getSystemFailures
} from "../lib/records/job-type-reports";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import { jsonParams } from "../lib/validation/params";
import type { RequestMeta } from "../types/meta";

/**
 * Job type reports (Scale 3.0's JobTypesStatusView, JobTypesRunningView and
 * JobTypesSystemFailuresView): job counts by status over a time range, running jobs, and
 * SYSTEM failures, each per job type in the list envelope (lib/records/job-type-reports.ts).
 * Parameters other than these are ignored, as Scale ignored them (the web UI sends its own
 * `pageNumber` and `pageSize`).
 */

type ReportContext = Context<Record<string, unknown>, RequestMeta>;

/** A query-string params schema of paging, and started/ended where the report takes a range. */
function reportParams(withRange: boolean) {
	return jsonParams({
		[QUERY_SCHEMA]: true,
		type: "object",
		properties: {
			page: LIST_PARAMS.page,
			page_size: LIST_PARAMS.page_size,
			...(withRange ? { started: LIST_PARAMS.started, ended: LIST_PARAMS.ended } : {})
		}
	});
}

const JobTypeReportsService: ServiceSchema = {
	name: "job-type-reports",
	mixins: [DbMixin()],

	actions: {
		status: {
			rest: "GET /job-types/status",
			params: reportParams(true),
			async handler(this: Service, ctx: ReportContext) {
				const request = listRequest(ctx, "/api/job-types/status/");
				return jsonAnswer(ctx, await getJobTypeStatus(this.db, request));
			}
		},

		running: {
			rest: "GET /job-types/running",
			params: reportParams(false),
			handler(this: Service, ctx: ReportContext) {
				return getRunningJobTypes(this.db, listRequest(ctx, "/api/job-types/running/"));
			}
		},

		systemFailures: {
			rest: "GET /job-types/system-failures",
			params: reportParams(false),
			async handler(this: Service, ctx: ReportContext) {
				const request = listRequest(ctx, "/api/job-types/system-failures/");
				return jsonAnswer(ctx, await getSystemFailures(this.db, request));
			}
		}
	}
};

export default JobTypeReportsService;
