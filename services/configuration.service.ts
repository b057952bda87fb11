import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import {
	exportConfiguration,
	importConfiguration,
	INCLUDES,
	type ExportFilter
} from "../lib/port/configuration";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import { uploadAsImport } from "../lib/http/upload";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams } from "../lib/validation/body";
import { ID_SCHEMA } from "../lib/validation/ids";

const IDS = { type: "array", items: ID_SCHEMA };
const NAMES = { type: "array", items: { type: "string" } };

const EXPORT_PARAMS = {
	[QUERY_SCHEMA]: true,
	type: "object",
	properties: {
		include: { type: "array", items: { enum: [...INCLUDES] } },
		recipe_type_id: IDS,
		recipe_type_name: NAMES,
		job_type_id: IDS,
		job_type_name: NAMES,
		job_type_category: NAMES,
		error_id: IDS,
		error_name: NAMES
	}
};

const IMPORT_PARAMS = bodyParams({
	type: "object",
	required: ["import"],
	properties: { import: { type: "object" } }
});

type ExportParams = Record<string, any>;

function exportFilter(p: ExportParams): ExportFilter {
	return {
		include: p.include,
		recipeTypeIds: p.recipe_type_id,
		recipeTypeNames: p.recipe_type_name,
		jobTypeIds: p.job_type_id,
		jobTypeNames: p.job_type_name,
		jobTypeCategories: p.job_type_category,
		errorIds: p.error_id,
		errorNames: p.error_name
	};
}

/**
 * Configuration export and import (Scale's "port"): job types, recipe types and errors, without
 * ids, so one system's definitions can be loaded into another. Import is all or nothing.
 */
const ConfigurationService: ServiceSchema = {
	name: "configuration",
	mixins: [DbMixin()],

	actions: {
		export: {
			rest: "GET /configuration",
			params: jsonParams(EXPORT_PARAMS),
			handler(this: Service, ctx: Context<ExportParams>) {
				return exportConfiguration(this.db, exportFilter(ctx.params));
			}
		},

		download: {
			rest: "GET /configuration/download",
			params: jsonParams(EXPORT_PARAMS),
			async handler(
				this: Service,
				ctx: Context<ExportParams, RequestMeta & { $responseHeaders?: object }>
			) {
				const config = await exportConfiguration(this.db, exportFilter(ctx.params));
				ctx.meta.$responseHeaders = {
					"Content-Disposition": 'attachment; filename="configuration.json"'
				};
				return config;
			}
		},

		import: {
			rest: [
				"POST /configuration",
				{ method: "POST", path: "/configuration/upload", handler: uploadAsImport }
			],
			params: jsonParams(IMPORT_PARAMS),
			async handler(this: Service, ctx: Context<{ import: unknown }>) {
				const warnings = await importConfiguration(this.db, ctx.params.import, {
					dryRun: false
				});
				this.logger.info({ warnings: warnings.length }, "configuration imported");
				return { warnings };
			}
		},

		validate: {
			rest: "POST /configuration/validation",
			params: jsonParams(IMPORT_PARAMS),
			async handler(this: Service, ctx: Context<{ import: unknown }>) {
				return {
					warnings: await importConfiguration(this.db, ctx.params.import, {
						dryRun: true
					})
				};
			}
		}
	}
};

export default ConfigurationService;
