import type { Sequelize } from "sequelize";
import { select, write } from "../db/run";
import { FieldError, NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import {
	checkWorkspaceConfig,
	type ValidationWarning,
	type WorkspaceConfig,
	type WorkspaceMountOptions
} from "../documents/workspace-config";
import { textProblem } from "../validation/schema";
import { keepMaskedSecret, maskBrokerSecrets } from "../documents/s3-broker";

export interface WorkspaceRow {
	id: number;
	name: string;
	title: string | null;
	description: string | null;
	base_url: string | null;
	is_active: boolean;
	/** only in rows read for details */
	json_config?: WorkspaceConfig;
	is_move_enabled?: boolean;
	/** bigint: pg answers these as strings */
	used_size: string | number | null;
	total_size: string | number | null;
	created: Date;
	archived: Date | null;
	last_modified: Date;
}

function toNumber(value: string | number | null): number | null {
	return value === null ? null : Number(value);
}

/** A workspace as listed. */
export function serializeWorkspace(row: WorkspaceRow) {
	return {
		id: row.id,
		name: row.name,
		title: row.title,
		description: row.description,
		base_url: row.base_url,
		is_active: row.is_active,
		used_size: toNumber(row.used_size),
		total_size: toNumber(row.total_size),
		created: formatDatetime(row.created),
		archived: row.archived ? formatDatetime(row.archived) : null,
		last_modified: formatDatetime(row.last_modified)
	};
}

/** A workspace's details: the list fields and its configuration, its secrets masked. */
export function serializeWorkspaceDetails(row: WorkspaceRow) {
	return { ...serializeWorkspace(row), json_config: maskBrokerSecrets(row.json_config) };
}

const LIST_FIELDS = [
	"id",
	"name",
	"title",
	"description",
	"base_url",
	"is_active",
	"used_size",
	"total_size",
	"created",
	"archived",
	"last_modified"
];

export const WORKSPACE_LIST: ListSource = {
	from: "workspace",
	// The configuration is not listed, so it is not read either.
	columns: LIST_FIELDS.join(", "),
	orderable: Object.fromEntries(LIST_FIELDS.map(f => [f, f])),
	defaultOrder: ["name"],
	timeColumn: "last_modified",
	filters: {
		name: { column: "name", type: "string" }
	}
};

export async function getWorkspace(db: Sequelize, id: number): Promise<WorkspaceRow> {
	const [row] = await select<WorkspaceRow>(db, "SELECT * FROM workspace WHERE id = $1", [id]);
	if (!row) throw new NotFoundError(`No workspace with id ${id}`);
	return row;
}

/** The fields a client may set, on create and (all but name) on edit. */
export interface WorkspaceFields {
	title?: string | null;
	description?: string | null;
	base_url?: string | null;
	is_active?: boolean;
	json_config?: unknown;
}

export interface NewWorkspace extends WorkspaceFields {
	name: string;
	json_config: unknown;
}

/**
 * Checks what JSON Schema cannot: text PostgreSQL can store, and base_url an http(s) URL.
 * Throws FieldError naming the field.
 */
function checkFields(fields: WorkspaceFields): void {
	for (const field of ["title", "description", "base_url"] as const) {
		const value = fields[field];
		if (typeof value !== "string") continue;
		const problem = textProblem(value);
		if (problem) throw new FieldError(field, problem);
	}
	if (typeof fields.base_url === "string") {
		let url: URL | null = null;
		try {
			url = new URL(fields.base_url);
		} catch {
			url = null;
		}
		if (!url || (url.protocol !== "http:" && url.protocol !== "https:"))
			throw new FieldError(
				"base_url",
				`must be an absolute http or https URL (or null), got "${fields.base_url}"`
			);
	}
}

/** The checks of a create body beyond its JSON Schema; answers the configuration to store. */
async function checkNewWorkspace(
	w: NewWorkspace,
	mounts: WorkspaceMountOptions
): Promise<{ config: WorkspaceConfig; warnings: ValidationWarning[] }> {
	checkFields(w);
	return checkWorkspaceConfig(w.json_config, "json_config", mounts);
}

export async function createWorkspace(
	db: Sequelize,
	w: NewWorkspace,
	mounts: WorkspaceMountOptions
): Promise<WorkspaceRow> {
	const { config } = await checkNewWorkspace(w, mounts);
	const isActive = w.is_active ?? true;
	// ON CONFLICT instead of a prior SELECT: two concurrent creates of one name cannot both pass.
	const [row] = await write<WorkspaceRow>(
		db,
		`INSERT INTO workspace (name, title, description, base_url, is_active, json_config, archived)
		 VALUES ($1, $2, $3, $4, $5, $6::jsonb, CASE WHEN $5::boolean THEN NULL ELSE now() END)
		 ON CONFLICT (name) DO NOTHING RETURNING *`,
		[
			w.name,
			w.title ?? null,
			w.description ?? null,
			w.base_url ?? null,
			isActive,
			JSON.stringify(config)
		]
	);
	if (!row) throw new FieldError("name", `a workspace named "${w.name}" already exists`);
	return row;
}

/**
 * Checks a workspace about to be created (or a new configuration for the workspace of that
 * name) and saves nothing. Answers Scale's warnings: the broker's, and `broker_type` when a
 * workspace of that name exists with another broker type.
 */
export async function validateWorkspace(
	db: Sequelize,
	w: NewWorkspace,
	mounts: WorkspaceMountOptions
): Promise<ValidationWarning[]> {
	const { config, warnings } = await checkNewWorkspace(w, mounts);
	const [existing] = await select<{ type: string | null }>(
		db,
		"SELECT json_config->'broker'->>'type' AS type FROM workspace WHERE name = $1",
		[w.name]
	);
	if (existing && existing.type && existing.type !== config.broker.type)
		warnings.unshift({
			id: "broker_type",
			details: "Changing the broker type may disrupt queued/running jobs."
		});
	return warnings;
}

/**
 * Edits the fields present in `edit` (null clears title, description and base_url). Setting
 * is_active false archives the workspace (an earlier archive time is kept); true unarchives it.
 */
export async function updateWorkspace(
	db: Sequelize,
	id: number,
	edit: WorkspaceFields,
	mounts: WorkspaceMountOptions
): Promise<WorkspaceRow> {
	checkFields(edit);
	let config: WorkspaceConfig | null = null;
	if (edit.json_config !== undefined) {
		// As in Scale, an unknown workspace is a 404 whatever its new configuration.
		const stored = await getWorkspace(db, id);
		config = (await checkWorkspaceConfig(edit.json_config, "json_config", mounts)).config;
		config.broker = keepMaskedSecret(
			config.broker,
			stored.json_config?.broker
		) as WorkspaceConfig["broker"];
	}
	const [row] = await write<WorkspaceRow>(
		db,
		`UPDATE workspace SET
			title = CASE WHEN $2::boolean THEN $3 ELSE title END,
			description = CASE WHEN $4::boolean THEN $5 ELSE description END,
			base_url = CASE WHEN $6::boolean THEN $7 ELSE base_url END,
			is_active = COALESCE($8::boolean, is_active),
			archived = CASE
				WHEN $8::boolean IS NULL THEN archived
				WHEN $8::boolean THEN NULL
				ELSE COALESCE(archived, now())
			END,
			json_config = COALESCE($9::jsonb, json_config),
			last_modified = now()
		 WHERE id = $1 RETURNING *`,
		[
			id,
			"title" in edit,
			edit.title ?? null,
			"description" in edit,
			edit.description ?? null,
			"base_url" in edit,
			edit.base_url ?? null,
			edit.is_active ?? null,
			config === null ? null : JSON.stringify(config)
		]
	);
	if (!row) throw new NotFoundError(`No workspace with id ${id}`);
	return row;
}
