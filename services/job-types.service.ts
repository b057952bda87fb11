import { type Sql, transaction } from "../lib/db/run";
import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { ListMixin } from "../mixins/list.mixin";
import {
	getJobTypeDetails,
	JOB_TYPE_LIST,
	serializeJobType,
	type JobTypeRow
} from "../lib/records/job-type";
import {
	JOB_TYPE_FIELDS,
	NEW_JOB_TYPE_SCHEMA,
	saveJobType,
	validateJobType,
	type JobTypeSpec
} from "../lib/records/job-type-save";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, readOnlyWarnings, withWarnings } from "../lib/validation/body";
import { JOB_TYPE_READ_ONLY } from "../lib/documents/configuration";
import { ID_SCHEMA } from "../lib/validation/ids";

/**
 * Job types: list, create, details, edit (including the trigger rule, pause and archive) and
 * validation. The work is in lib/records/job-type; documents are checked there, naming the path
 * of the field at fault.
 */
const JobTypesService: ServiceSchema = {
	name: "job-types",
	mixins: [
		DbMixin(),
		ListMixin<JobTypeRow>(JOB_TYPE_LIST, rows => rows.map(serializeJobType), "GET /job-types")
	],

	actions: {
		create: {
			rest: "POST /job-types",
			params: jsonParams(bodyParams(NEW_JOB_TYPE_SCHEMA, JOB_TYPE_READ_ONLY)),
			async handler(this: Service, ctx: Context<JobTypeSpec, RequestMeta>) {
				const { id } = await transaction(this.db, (t: Sql) =>
					saveJobType(this.db, ctx.params, t)
				);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/job-types/${id}/`;
				return withWarnings(
					await getJobTypeDetails(this.db, id),
					readOnlyWarnings(ctx.params, "job type")
				);
			}
		},

		validate: {
			rest: "POST /job-types/validation",
			params: jsonParams(bodyParams(NEW_JOB_TYPE_SCHEMA, JOB_TYPE_READ_ONLY)),
			async handler(this: Service, ctx: Context<JobTypeSpec>) {
				return {
					warnings: [
						...readOnlyWarnings(ctx.params, "job type"),
						...(await validateJobType(this.db, ctx.params))
					]
				};
			}
		},

		get: {
			rest: "GET /job-types/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: Service, ctx: Context<{ id: number }>) {
				return getJobTypeDetails(this.db, ctx.params.id);
			}
		},

		update: {
			rest: "PATCH /job-types/:id",
			// name and version cannot change: read-only here
			params: jsonParams(
				bodyParams(
					{
						type: "object",
						required: ["id"],
						properties: { id: ID_SCHEMA, ...JOB_TYPE_FIELDS }
					},
					[...JOB_TYPE_READ_ONLY, "name", "version"]
				)
			),
			async handler(this: Service, ctx: Context<JobTypeSpec & { id: number }>) {
				const { id, ...spec } = ctx.params;
				await transaction(this.db, (t: Sql) =>
					saveJobType(this.db, spec, t, { existingId: id })
				);
				return withWarnings(
					await getJobTypeDetails(this.db, id),
					readOnlyWarnings(ctx.params, "job type")
				);
			}
		}
	}
};

export default JobTypesService;
