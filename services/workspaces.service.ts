import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import path from "path";
import { DbMixin } from "../mixins/db.mixin";
import { ListMixin } from "../mixins/list.mixin";
import {
	createWorkspace,
	getWorkspace,
	serializeWorkspace,
	serializeWorkspaceDetails,
	updateWorkspace,
	validateWorkspace,
	WORKSPACE_LIST,
	type NewWorkspace,
	type WorkspaceFields,
	type WorkspaceRow
} from "../lib/records/workspace";
import type { ServiceDirectories } from "../lib/documents/confined-mounts";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, readOnlyWarnings, withWarnings } from "../lib/validation/body";

/** What a workspace's record shows that no body sets. */
const READ_ONLY = ["id", "used_size", "total_size", "created", "archived", "last_modified"];
import { ID_SCHEMA } from "../lib/validation/ids";

const NAME = { type: "string", minLength: 1, maxLength: 50, pattern: "^[A-Za-z0-9_.-]+$" };
const TITLE = { type: ["string", "null"], maxLength: 50 };
const DESCRIPTION = { type: ["string", "null"], maxLength: 500 };
const BASE_URL = { type: ["string", "null"], maxLength: 1000 };
const IS_ACTIVE = { type: "boolean" };
/** The document's own checks (lib/documents/workspace-config) run in the model, naming its fields. */
const JSON_CONFIG = { type: "object" };

/** The create body; the validation endpoint takes the same one. */
const NEW_WORKSPACE = {
	type: "object",
	required: ["name", "json_config"],
	properties: {
		name: NAME,
		title: TITLE,
		description: DESCRIPTION,
		base_url: BASE_URL,
		is_active: IS_ACTIVE,
		json_config: JSON_CONFIG
	}
};

/** The fields a client may edit; as in Scale, `name` is not one of them and is ignored. */
const EDITABLE = ["title", "description", "base_url", "is_active", "json_config"] as const;

interface WorkspacesSettings extends ServiceSettingSchema, ServiceDirectories {
	/** where every node mounts NFS exports, for nfs workspaces (NFS_MOUNT_ROOT) */
	nfsMountRoot: string | null;
}

type WorkspacesThis = Service<WorkspacesSettings>;

const WorkspacesService: ServiceSchema<WorkspacesSettings> = {
	name: "workspaces",
	mixins: [
		DbMixin(),
		ListMixin<WorkspaceRow>(
			WORKSPACE_LIST,
			rows => rows.map(serializeWorkspace),
			"GET /workspaces"
		)
	],

	settings: {
		nfsMountRoot: null,
		// lib/launch/config.ts's defaults; lib/launch/services.ts sets the process's own
		dataDir: path.resolve("./data"),
		agentWorkDir: path.resolve("./data/agent")
	},

	actions: {
		create: {
			rest: "POST /workspaces",
			params: jsonParams(bodyParams(NEW_WORKSPACE, READ_ONLY)),
			async handler(this: WorkspacesThis, ctx: Context<NewWorkspace, RequestMeta>) {
				const row = await createWorkspace(this.db, ctx.params, this.settings);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/workspaces/${row.id}/`;
				return withWarnings(
					serializeWorkspaceDetails(row),
					readOnlyWarnings(ctx.params, "workspace")
				);
			}
		},

		validate: {
			rest: "POST /workspaces/validation",
			params: jsonParams(bodyParams(NEW_WORKSPACE, READ_ONLY)),
			async handler(this: WorkspacesThis, ctx: Context<NewWorkspace>) {
				return {
					warnings: [
						...readOnlyWarnings(ctx.params, "workspace"),
						...(await validateWorkspace(this.db, ctx.params, this.settings))
					]
				};
			}
		},

		get: {
			rest: "GET /workspaces/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			async handler(this: WorkspacesThis, ctx: Context<{ id: number }>) {
				return serializeWorkspaceDetails(await getWorkspace(this.db, ctx.params.id));
			}
		},

		update: {
			rest: "PATCH /workspaces/:id",
			params: jsonParams(
				bodyParams(
					{
						type: "object",
						required: ["id"],
						properties: {
							id: ID_SCHEMA,
							title: TITLE,
							description: DESCRIPTION,
							base_url: BASE_URL,
							is_active: IS_ACTIVE,
							json_config: JSON_CONFIG
						}
					},
					[...READ_ONLY, "name"]
				)
			),
			async handler(this: WorkspacesThis, ctx: Context<WorkspaceFields & { id: number }>) {
				const edit: Record<string, unknown> = {};
				for (const field of EDITABLE)
					if (field in ctx.params) edit[field] = ctx.params[field];
				return withWarnings(
					serializeWorkspaceDetails(
						await updateWorkspace(this.db, ctx.params.id, edit, this.settings)
					),
					readOnlyWarnings(ctx.params, "workspace")
				);
			}
		}
	}
};

export default WorkspacesService;
