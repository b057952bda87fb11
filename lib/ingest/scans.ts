import type { Sequelize } from "sequelize";
import { select, write } from "../db/run";
import { parseScanConfiguration, type ScanConfiguration } from "../documents/scan-configuration";
import { ConflictError, FieldError, NotFoundError } from "../errors";
import type { ListSource } from "../list/types";
import { assertSchema, compileChecker } from "../validation/schema";
import { checkStorableText } from "../validation/schema";
import { formatDatetime } from "../validation/schema";

/**
 * Scans (Scale 5.0's docs/rest/scan.rst): saved configurations, launched as a dry run (files
 * counted) or an ingest by `POST /scans/{id}/process/`, walked by a control plane
 * (lib/ingest/scan-walk.ts) with their progress on the row.
 */

export interface ScanRow {
	id: number;
	name: string;
	title: string | null;
	description: string | null;
	configuration: ScanConfiguration;
	status: string;
	dry_run: boolean;
	file_count: string | number | null;
	files_scanned: string | number;
	files_ingested: string | number;
	resume_after: string | null;
	started: Date | null;
	ended: Date | null;
	error: string | null;
	created: Date;
	last_modified: Date;
}

const BODY_SCHEMA = {
	type: "object",
	required: ["name", "configuration"],
	properties: {
		name: { type: "string", minLength: 1, maxLength: 50 },
		title: { type: ["string", "null"], maxLength: 50 },
		description: { type: ["string", "null"], maxLength: 500 },
		configuration: { type: "object" }
	}
};
const EDIT_SCHEMA = {
	type: "object",
	properties: {
		title: BODY_SCHEMA.properties.title,
		description: BODY_SCHEMA.properties.description,
		configuration: { type: "object" }
	}
};
const checkBody = compileChecker(BODY_SCHEMA);
const checkEdit = compileChecker(EDIT_SCHEMA);

const date = (d: Date | null) => (d ? formatDatetime(d) : null);
const num = (v: string | number | null) => (v === null ? null : Number(v));

/**
 * A scan as listed: Scale's fields (its walk is not a job here: `job` and `dry_run_job` are null,
 * docs/decisions.md) and its progress: `status`, `dry_run`, `files_scanned`, `files_ingested`.
 */
export function serializeScan(row: ScanRow) {
	return {
		id: row.id,
		name: row.name,
		title: row.title,
		description: row.description,
		file_count: num(row.file_count),
		job: null,
		dry_run_job: null,
		status: row.status,
		dry_run: row.dry_run,
		files_scanned: Number(row.files_scanned),
		files_ingested: Number(row.files_ingested),
		started: date(row.started),
		ended: date(row.ended),
		error: row.error,
		created: formatDatetime(row.created),
		last_modified: formatDatetime(row.last_modified)
	};
}

export function serializeScanDetails(row: ScanRow) {
	return { ...serializeScan(row), configuration: row.configuration };
}

const FIELDS = ["id", "name", "title", "description", "status", "created", "last_modified"];

export const SCAN_LIST: ListSource = {
	from: "scan",
	columns:
		"id, name, title, description, status, dry_run, file_count, files_scanned, files_ingested, started, ended, error, created, last_modified",
	orderable: Object.fromEntries(FIELDS.map(f => [f, f])),
	defaultOrder: ["name"],
	timeColumn: "last_modified",
	filters: { name: { column: "name", type: "string" } }
};

interface ScanBody {
	name: string;
	title: string | null;
	description: string | null;
	configuration: ScanConfiguration;
}

/** A scan's workspaces: each exists, is active, and fits the scanner (dir: host, s3: s3). */
async function checkScanWorkspaces(db: Sequelize, config: ScanConfiguration): Promise<void> {
	const rows = await select<{ name: string; is_active: boolean; type: string }>(
		db,
		`SELECT name, is_active, json_config->'broker'->>'type' AS type
		 FROM workspace WHERE name = ANY($1::text[])`,
		[[config.workspace, ...config.files_to_ingest.flatMap(r => r.new_workspace ?? [])]]
	);
	const byName = new Map(rows.map(r => [r.name, r]));
	const home = byName.get(config.workspace);
	if (!home)
		throw new FieldError(
			"configuration.workspace",
			`"${config.workspace}" is not the name of a workspace`
		);
	if (!home.is_active)
		throw new FieldError(
			"configuration.workspace",
			`the workspace "${home.name}" is not active`
		);
	const wanted = config.scanner.type === "s3" ? "s3" : "host";
	if ((home.type === "s3" ? "s3" : "host") !== wanted)
		throw new FieldError(
			"configuration.scanner.type",
			`a "${config.scanner.type}" scanner walks ${wanted === "s3" ? "an s3" : "a host (or nfs)"} workspace; "${home.name}" is ${home.type}`
		);
	config.files_to_ingest.forEach((rule, i) => {
		const at = `configuration.files_to_ingest[${i}]`;
		if (config.scanner.type === "dir" && (rule.new_workspace || rule.new_file_path))
			throw new FieldError(
				`${at}.${rule.new_workspace ? "new_workspace" : "new_file_path"}`,
				"a dir scan ingests files where they are (moves are for s3 scans)"
			);
		if (!rule.new_workspace) return;
		const target = byName.get(rule.new_workspace);
		if (!target || !target.is_active || target.type !== "s3")
			throw new FieldError(
				`${at}.new_workspace`,
				`"${rule.new_workspace}" is not an active s3 workspace`
			);
	});
}

async function parseBody(db: Sequelize, body: unknown): Promise<ScanBody> {
	assertSchema(checkBody, body, "");
	const given = body as Record<string, unknown>;
	checkStorableText({ name: given.name, title: given.title, description: given.description }, "");
	const configuration = parseScanConfiguration(given.configuration);
	await checkScanWorkspaces(db, configuration);
	return {
		name: given.name as string,
		title: (given.title as string | null | undefined) ?? null,
		description: (given.description as string | null | undefined) ?? null,
		configuration
	};
}

export async function getScan(db: Sequelize, id: number): Promise<ScanRow> {
	const [row] = await select<ScanRow>(db, "SELECT * FROM scan WHERE id = $1", [id]);
	if (!row) throw new NotFoundError(`No scan with id ${id}`);
	return row;
}

export async function createScan(db: Sequelize, body: unknown): Promise<ScanRow> {
	const scan = await parseBody(db, body);
	const [row] = await write<ScanRow>(
		db,
		`INSERT INTO scan (name, title, description, configuration) VALUES ($1, $2, $3, $4::jsonb)
		 ON CONFLICT (name) DO NOTHING RETURNING *`,
		[scan.name, scan.title, scan.description, JSON.stringify(scan.configuration)]
	);
	if (!row) throw new FieldError("name", `a scan named "${scan.name}" already exists`);
	return row;
}

/** POST /scans/validation/: the create body checked, nothing saved. */
export async function validateScan(db: Sequelize, body: unknown) {
	await parseBody(db, body);
	return { is_valid: true, errors: [], warnings: [] };
}

/** PATCH /scans/{id}/: title, description or configuration; not while it runs (409). */
export async function updateScan(db: Sequelize, id: number, body: unknown): Promise<ScanRow> {
	assertSchema(checkEdit, body, "");
	const given = body as Record<string, unknown>;
	checkStorableText({ title: given.title, description: given.description }, "");
	const scan = await getScan(db, id);
	let configuration: ScanConfiguration | null = null;
	if (given.configuration !== undefined) {
		configuration = parseScanConfiguration(given.configuration);
		await checkScanWorkspaces(db, configuration);
	}
	const [row] = await write<ScanRow>(
		db,
		`UPDATE scan SET
			title = CASE WHEN $2::boolean THEN $3 ELSE title END,
			description = CASE WHEN $4::boolean THEN $5 ELSE description END,
			configuration = COALESCE($6::jsonb, configuration), last_modified = now()
		 WHERE id = $1 AND status <> 'RUNNING' RETURNING *`,
		[
			id,
			"title" in given,
			given.title ?? null,
			"description" in given,
			given.description ?? null,
			configuration && JSON.stringify(configuration)
		]
	);
	if (!row) throw new ConflictError(`scan ${scan.id} is running: edit it once it has ended`);
	return row;
}

/**
 * POST /scans/{id}/process/: starts a dry run (`ingest` false: files counted) or an ingest, from
 * the start of the workspace; a scan that runs is a 409.
 */
export async function startScan(db: Sequelize, id: number, ingest: boolean): Promise<ScanRow> {
	const scan = await getScan(db, id);
	const [row] = await write<ScanRow>(
		db,
		`UPDATE scan SET status = 'RUNNING', dry_run = $2, file_count = 0, files_scanned = 0,
			files_ingested = 0, resume_after = NULL, owner = NULL, lease_until = NULL,
			started = now(), ended = NULL, error = NULL, last_modified = now()
		 WHERE id = $1 AND status <> 'RUNNING' RETURNING *`,
		[id, !ingest]
	);
	if (!row) throw new ConflictError(`scan ${scan.id} is running already`);
	return row;
}
