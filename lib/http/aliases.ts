/**
 * The REST route table: `METHOD path` → action. Nothing else is exposed; internal actions stay
 * internal. Paths are written without the trailing slash: the gateway matches both forms.
 */
import { uploadAsImport } from "./upload";

export const ALIASES: Record<string, string | unknown[]> = {
	"GET errors": "errors.list",
	"POST errors": "errors.create",
	"GET errors/:id": "errors.get",
	"PATCH errors/:id": "errors.update",

	"GET workspaces": "workspaces.list",
	"POST workspaces": "workspaces.create",
	"POST workspaces/validation": "workspaces.validate",
	"GET workspaces/:id": "workspaces.get",
	"PATCH workspaces/:id": "workspaces.update",

	"GET job-types": "job-types.list",
	"POST job-types": "job-types.create",
	"POST job-types/validation": "job-types.validate",
	"GET job-types/status": "job-type-reports.status",
	"GET job-types/running": "job-type-reports.running",
	"GET job-types/system-failures": "job-type-reports.systemFailures",
	"GET job-types/:id": "job-types.get",
	"PATCH job-types/:id": "job-types.update",

	"GET recipe-types": "recipe-types.list",
	"POST recipe-types": "recipe-types.create",
	"POST recipe-types/validation": "recipe-types.validate",
	"GET recipe-types/:id": "recipe-types.get",
	"PATCH recipe-types/:id": "recipe-types.update",

	"GET recipes": "recipes.list",
	"GET recipes/:id": "recipes.get",

	"GET configuration": "configuration.export",
	"POST configuration": "configuration.import",
	"POST configuration/validation": "configuration.validate",
	"GET configuration/download": "configuration.download",
	"POST configuration/upload": [uploadAsImport, "configuration.import"],

	"POST queue/new-job": "queue.newJob",
	"POST queue/new-recipe": "queue.newRecipe",
	"POST queue/requeue-jobs": "queue.requeueJobs",
	"GET queue/status": "queue.status",
	"GET load": "queue.load",

	"GET jobs": "jobs.list",
	"GET jobs/updates": "jobs.updates",
	"GET jobs/:id": "jobs.get",
	"PATCH jobs/:id": "jobs.update",

	"GET job-executions": "job-executions.list",
	"GET job-executions/:id": "job-executions.get",
	"GET job-executions/:id/logs": "job-executions.logs",

	"GET sources": "sources.list",
	"GET sources/updates": "sources.updates",
	// an id or, as Scale also answered, a file name (parseFileRef)
	"GET sources/:ref": "sources.get",

	"GET products": "products.list",
	"GET products/updates": "products.updates",
	"GET products/:ref": "products.get",

	"GET ingests": "ingest.list",
	"GET ingests/status": "ingest.status",
	// an id or, as Scale also answered, a file name (the ingest of that name created last)
	"GET ingests/:ref": "ingest.get",

	"POST strike/create": "ingest.createStrike",
	"GET strikes": "ingest.strikes",
	"POST strikes": "ingest.addStrike",
	"POST strikes/validation": "ingest.validateStrike",
	"GET strikes/:id": "ingest.getStrike",
	"PATCH strikes/:id": "ingest.updateStrike",

	"GET files/:id/download": "files.download",

	"GET nodes": "nodes.list",
	"GET nodes/status": "nodes.status",
	"GET nodes/:id": "nodes.get",
	"PUT nodes/:id": "nodes.replace",
	"PATCH nodes/:id": "nodes.update",

	"GET metrics": "metrics.list",
	"GET metrics/:name": "metrics.get",
	"GET metrics/:name/plot-data": "metrics.plotData",

	"GET scheduler": "scheduler.get",
	"PATCH scheduler": "scheduler.update",

	"GET status": "status.get",
	"GET version": "status.version"
};

/** Path parameters that are integer ids: anything else in their place is a 404, as in Scale. */
export const ID_PARAMS = ["id"];

/**
 * Requests whose errors the spec answers in text/plain: job update and the node details,
 * replace and update endpoints. Matched on the raw path, because a body that fails to parse
 * fails before the route's alias is resolved.
 */
export function answersInPlainText(method: string | undefined, path: string): boolean {
	const p = path.split("?")[0].replace(/\/+$/, "");
	if (method === "PATCH" && /\/api(\/v3)?\/jobs\/[^/]+$/.test(p)) return true;
	return (
		(method === "GET" || method === "PUT" || method === "PATCH") &&
		/\/api(\/v3)?\/nodes\/[^/]+$/.test(p) &&
		!/\/nodes\/status$/.test(p)
	);
}
