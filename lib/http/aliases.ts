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
	"GET job-types/:id": "job-types.get",
	"PATCH job-types/:id": "job-types.update",

	"GET recipe-types": "recipe-types.list",
	"POST recipe-types": "recipe-types.create",
	"POST recipe-types/validation": "recipe-types.validate",
	"GET recipe-types/:id": "recipe-types.get",
	"PATCH recipe-types/:id": "recipe-types.update",

	"GET configuration": "configuration.export",
	"POST configuration": "configuration.import",
	"POST configuration/validation": "configuration.validate",
	"GET configuration/download": "configuration.download",
	"POST configuration/upload": [uploadAsImport, "configuration.import"],

	"GET status": "status.get",
	"GET version": "status.version"
};

/** Path parameters that are integer ids: anything else in their place is a 404, as in Scale. */
export const ID_PARAMS = ["id"];
