import type { Sequelize } from "sequelize";
import { select, type Sql } from "../db/run";
import { formatDatetime } from "../validation/schema";
import { INT4_MAX } from "../validation/ids";

/**
 * File records (Scale 3.0's storage ScaleFile with its source_file and product_file children,
 * here one `scale_file` table told apart by `file_type`): how a source file or a product is
 * shown wherever a record embeds one (job inputs and outputs, job updates, source and product
 * lists).
 */

export type FileType = "SOURCE" | "PRODUCT";

/** A scale_file row read with FILE_COLUMNS (its workspace's name and base URL joined in). */
export interface ScaleFileRow {
	id: number;
	file_type: FileType;
	workspace_id: number;
	workspace_name: string;
	workspace_base_url: string | null;
	file_name: string;
	file_path: string;
	media_type: string;
	/** bigint: pg answers it as a string */
	file_size: string | number;
	data_type: string[];
	is_deleted: boolean;
	deleted: Date | null;
	uuid: string;
	data_started: Date | null;
	data_ended: Date | null;
	geometry: string | null;
	center_point: string | null;
	meta_data: Record<string, unknown>;
	countries: string[];
	is_parsed: boolean;
	parsed: Date | null;
	job_type_id: number | null;
	job_id: number | null;
	job_exe_id: number | null;
	is_operational: boolean;
	has_been_published: boolean;
	is_published: boolean;
	published: Date | null;
	unpublished: Date | null;
	is_superseded: boolean;
	superseded: Date | null;
	created: Date;
	last_modified: Date;
}

/** FROM clause for file rows: the file (`f`) and its workspace (`w`). */
export const FILE_FROM = "scale_file f JOIN workspace w ON w.id = f.workspace_id";
/** SELECT list matching ScaleFileRow over FILE_FROM. */
export const FILE_COLUMNS = "f.*, w.name AS workspace_name, w.base_url AS workspace_base_url";

/** Order keys every file list takes (over `f` and its workspace `w`), `__` for nested fields. */
export const FILE_ORDERABLE: Record<string, string> = {
	...Object.fromEntries(
		[
			"id",
			"file_name",
			"media_type",
			"file_size",
			"is_deleted",
			"uuid",
			"created",
			"deleted",
			"data_started",
			"data_ended",
			"last_modified"
		].map(f => [f, `f.${f}`])
	),
	workspace: "f.workspace_id",
	workspace__id: "f.workspace_id",
	workspace__name: "w.name"
};

/** How a details path names a file: by id, or (Scale's second URL pattern) by file name. */
export type FileRef = { id: number } | { fileName: string };

/**
 * The file a details path segment names: digits are an id (as Scale's `\d+` pattern, tried
 * first), anything else a file name. Null when it can name no file: an id beyond the id column's
 * range, or a name no file can have (empty, over 250 characters, holding "/" or NUL).
 */
export function parseFileRef(segment: string): FileRef | null {
	if (/^\d+$/.test(segment)) {
		const id = Number(segment);
		return id >= 1 && id <= INT4_MAX ? { id } : null;
	}
	if (segment.length === 0 || segment.length > 250) return null;
	if (segment.includes("/") || segment.includes("\0")) return null;
	return { fileName: segment };
}

/** The detail of a 404 for a file a path names, e.g. `No product with id 5`. */
export function notFoundDetail(kind: string, ref: FileRef | null): string {
	if (ref === null) return `No such ${kind}`;
	return "id" in ref ? `No ${kind} with id ${ref.id}` : `No ${kind} named "${ref.fileName}"`;
}

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/**
 * The download URL of a file: the workspace's base URL with the file's path (relative to the
 * workspace root) under it, or null when the workspace is not web-accessible. The base URL is
 * taken as a directory whether or not it ends in a slash.
 */
export function fileUrl(baseUrl: string | null, filePath: string): string | null {
	if (!baseUrl) return null;
	const path = filePath
		.replace(/^\/+/, "")
		.split("/")
		.map(part => encodeURIComponent(part))
		.join("/");
	return `${baseUrl.replace(/\/+$/, "")}/${path}`;
}

/** The API's own download route of a file, under the API root the request came through. */
export function downloadUrl(apiRoot: string, id: number): string {
	return `${apiRoot.replace(/\/+$/, "")}/files/${id}/download/`;
}

/**
 * The fields every file record has (Scale's ScaleFileBaseSerializer). Records that add fields
 * to it (or to any record of ~20 fields) use Object.assign on it, not a spread of it into a new
 * literal: V8 made each such spread ~40 µs a record (docs/decisions.md, "Lists at clients'
 * windows"). A file whose workspace has
 * no base URL is downloaded through this API, when the API root of the request is known.
 */
export function serializeScaleFileBase(row: ScaleFileRow, apiRoot?: string) {
	return {
		id: row.id,
		workspace: { id: row.workspace_id, name: row.workspace_name },
		file_name: row.file_name,
		media_type: row.media_type,
		file_size: Number(row.file_size),
		data_type: row.data_type,
		is_deleted: row.is_deleted,
		uuid: row.uuid,
		url:
			fileUrl(row.workspace_base_url, row.file_path) ??
			(apiRoot ? downloadUrl(apiRoot, row.id) : null),
		created: formatDatetime(row.created),
		deleted: date(row.deleted),
		data_started: date(row.data_started),
		data_ended: date(row.data_ended),
		geometry: row.geometry,
		center_point: row.center_point,
		meta_data: row.meta_data,
		countries: row.countries,
		last_modified: formatDatetime(row.last_modified)
	};
}

/** A source file record: the base fields and its parse state. */
export function serializeSourceFile(row: ScaleFileRow, apiRoot?: string) {
	return Object.assign(serializeScaleFileBase(row, apiRoot), {
		is_parsed: row.is_parsed,
		parsed: date(row.parsed)
	});
}

/** A product record (Scale's ProductFileBaseSerializer): the base fields and its origin. */
export function serializeProductFile(row: ScaleFileRow, apiRoot?: string) {
	return Object.assign(serializeScaleFileBase(row, apiRoot), {
		is_operational: row.is_operational,
		is_published: row.is_published,
		has_been_published: row.has_been_published,
		published: date(row.published),
		unpublished: date(row.unpublished),
		job_type: row.job_type_id === null ? null : { id: row.job_type_id },
		job: row.job_id === null ? null : { id: row.job_id },
		job_exe: row.job_exe_id === null ? null : { id: row.job_exe_id }
	});
}

/** A file as its kind shows it: a source file record or a product record. */
export function serializeScaleFile(row: ScaleFileRow, apiRoot?: string) {
	return row.file_type === "PRODUCT"
		? serializeProductFile(row, apiRoot)
		: serializeSourceFile(row, apiRoot);
}

/** The files with the given ids (with their workspaces), by id, in one query. */
export async function loadFiles(
	db: Sequelize,
	ids: number[],
	t?: Sql
): Promise<Map<number, ScaleFileRow>> {
	const wanted = [...new Set(ids)];
	if (wanted.length === 0) return new Map();
	const rows = await select<ScaleFileRow>(
		db,
		`SELECT ${FILE_COLUMNS} FROM ${FILE_FROM} WHERE f.id = ANY($1::int[])`,
		[wanted],
		t
	);
	return new Map(rows.map(row => [row.id, row]));
}
