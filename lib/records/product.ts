import { createHash } from "crypto";
import { mediaTypeOf } from "../documents/media-types";
import type { ProducedFile } from "../documents/agent-protocol";
import type { JobInterface } from "../documents/types";
import { parseGeoJson } from "../documents/geo";
import type { Sql } from "../db/run";
import { promises as fs } from "fs";
import path from "path";

/**
 * What a completed execution writes of files: its products (Scale 3.0's product/models.py
 * ProductFileManager.upload_files and FileAncestryLinkManager.create_file_ancestry_links) become
 * PRODUCT rows of scale_file, linked to the files the job read; its parse results update the
 * SOURCE rows it read (below).
 */

/** Stable JSON: keys sorted at every level, so equal documents hash alike. */
export function canonicalJson(value: unknown): string {
	if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
	if (value && typeof value === "object") {
		const entries = Object.keys(value as object)
			.sort()
			.filter(k => (value as any)[k] !== undefined)
			.map(k => `${JSON.stringify(k)}:${canonicalJson((value as any)[k])}`);
		return `{${entries.join(",")}}`;
	}
	return JSON.stringify(value ?? null);
}

/**
 * A product's uuid: stable across runs of the same job (a retry, a requeue, or a new job of the
 * same type version on the same data), so reprocessing is recognisable. 32 hex digits (MD5).
 */
export function productUuid(
	jobType: { name: string; version: string },
	jobData: unknown,
	outputName: string,
	fileName: string
): string {
	return createHash("md5")
		.update(
			canonicalJson([jobType.name, jobType.version, jobData ?? null, outputName, fileName])
		)
		.digest("hex");
}

/** The job an execution ran, as the completion needs it for its products. */
export interface ProducingExe {
	jobExeId: number;
	jobId: number;
	jobTypeId: number;
	jobTypeName: string;
	jobTypeVersion: string;
	/** the job type's is_operational, and'ed with that of every input product */
	isOperational: boolean;
	jobData: unknown;
	iface: JobInterface;
}

export interface ProductRow {
	job_exe_id: number;
	job_id: number;
	job_type_id: number;
	workspace_id: number;
	output_name: string;
	file_name: string;
	file_path: string;
	media_type: string;
	file_size: number;
	uuid: string;
	data_started: string | null;
	data_ended: string | null;
	geometry: string | null;
	center_point: string | null;
	meta_data: Record<string, unknown>;
	is_operational: boolean;
}

/**
 * The scale_file row of one produced file. The media type is the agent's (manifest or
 * interface), else the interface output's, else from the extension. Geometry, center point and
 * meta_data come from the manifest's geo_json; a geo_json that cannot be read is left out.
 */
export function productRow(exe: ProducingExe, file: ProducedFile): ProductRow {
	const output = exe.iface.output_data.find(o => o.name === file.outputName);
	let geo = { geometry: null as string | null, centerPoint: null as string | null, props: {} };
	if (file.geoJson !== undefined && file.geoJson !== null) {
		try {
			const parsed = parseGeoJson(file.geoJson);
			geo = {
				geometry: parsed.geometry,
				centerPoint: parsed.centerPoint,
				props: parsed.properties ?? {}
			};
		} catch {
			// an unreadable footprint does not lose the product
		}
	}
	return {
		job_exe_id: exe.jobExeId,
		job_id: exe.jobId,
		job_type_id: exe.jobTypeId,
		workspace_id: file.workspaceId,
		output_name: file.outputName,
		file_name: file.fileName,
		file_path: file.filePath,
		media_type: file.mediaType || output?.media_type || mediaTypeOf(file.fileName),
		file_size: Math.max(0, Math.round(Number(file.size) || 0)),
		uuid: productUuid(
			{ name: exe.jobTypeName, version: exe.jobTypeVersion },
			exe.jobData,
			file.outputName,
			file.fileName
		),
		data_started: file.dataStarted ?? null,
		data_ended: file.dataEnded ?? null,
		geometry: geo.geometry,
		center_point: geo.centerPoint,
		meta_data: geo.props,
		is_operational: exe.isOperational
	};
}

/**
 * What is wrong with the products of a completed execution, or null: each must belong to an
 * output of the interface and go to the workspace the job data names for it; a file output takes
 * at most one file; a required output must have one (Scale's MissingRequiredOutput).
 */
export function checkProducts(
	iface: JobInterface,
	jobData: any,
	products: readonly ProducedFile[]
): string | null {
	const workspaces = new Map<string, number>(
		(jobData?.output_data ?? []).map((o: any) => [o.name, o.workspace_id])
	);
	const counts = new Map<string, number>();
	for (const product of products) {
		const output = iface.output_data.find(o => o.name === product.outputName);
		if (!output) return `"${product.outputName}" is not an output of the job interface`;
		if (workspaces.get(product.outputName) !== product.workspaceId)
			return `output "${product.outputName}" went to workspace ${product.workspaceId}, not the one its job data names`;
		if (!product.fileName || !product.filePath)
			return `a file of output "${product.outputName}" has no name or path`;
		counts.set(product.outputName, (counts.get(product.outputName) ?? 0) + 1);
	}
	for (const output of iface.output_data) {
		const n = counts.get(output.name) ?? 0;
		if (output.type === "file" && n > 1)
			return `file output "${output.name}" has ${n} files; it takes one`;
		if (output.required && n === 0) return `required output "${output.name}" was not produced`;
	}
	return null;
}

/** The first key of the transaction-level advisory locks on product uuids (the second: its hash). */
export const PRODUCT_LOCK_CLASS = 0x5ca1e002;

/**
 * Inserts product rows, published at once (Scale publishes a job's products when it completes),
 * and answers their ids in order. A product supersedes the published products with its uuid
 * (the same output of the same job type version on the same job data: a rerun), which are
 * unpublished, as in Scale's publish_products. Among rows given together, the last execution's
 * product of a uuid is the one left published; files of one execution never supersede each other.
 */
export async function insertProducts(sql: Sql, rows: readonly ProductRow[]): Promise<number[]> {
	if (rows.length === 0) return [];
	const col = <K extends keyof ProductRow>(k: K) => rows.map(r => r[k]);
	// The statement below does not see rows of its uuids that a transaction still open wrote, so
	// would leave them published: it waits for that transaction behind a lock per uuid, taken in a
	// statement of its own (in key order, so two transactions never wait on each other for them).
	const locked = sql.query(
		`SELECT pg_advisory_xact_lock($1, k)
		 FROM (SELECT DISTINCT hashtext(u) AS k FROM unnest($2::text[]) AS u ORDER BY k) AS keys`,
		[PRODUCT_LOCK_CLASS, [...new Set(col("uuid"))]]
	);
	// One statement: the UPDATE does not see the rows the INSERT adds (one snapshot for both).
	const inserting = sql.query<{ id: number; ord: number }>(
		`WITH u AS (
			SELECT *, job_exe_id <> last_value(job_exe_id) OVER (PARTITION BY uuid ORDER BY ord
					ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS superseded
			FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::text[], $6::text[],
				$7::text[], $8::bigint[], $9::text[], $10::timestamptz[], $11::timestamptz[],
				$12::text[], $13::text[], $14::jsonb[], $15::boolean[])
				WITH ORDINALITY AS u(job_exe_id, job_id, job_type_id, workspace_id, file_name,
					file_path, media_type, file_size, uuid, data_started, data_ended, geometry,
					center_point, meta_data, is_operational, ord)
		),
		earlier AS (
			UPDATE scale_file SET is_published = false, unpublished = now(), is_superseded = true,
				superseded = now(), last_modified = now()
			WHERE uuid = ANY($9::text[]) AND file_type = 'PRODUCT' AND is_published
		),
		ins AS (
			INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				file_size, uuid, data_started, data_ended, geometry, center_point, meta_data,
				job_type_id, job_id, job_exe_id, is_operational, has_been_published, is_published,
				published, unpublished, is_superseded, superseded)
			SELECT 'PRODUCT', workspace_id, file_name, file_path, media_type, file_size, uuid,
				data_started, data_ended, geometry, center_point, meta_data, job_type_id, job_id,
				job_exe_id, is_operational, true, NOT superseded, now(),
				CASE WHEN superseded THEN now() END, superseded,
				CASE WHEN superseded THEN now() END
			FROM u ORDER BY ord
			RETURNING id, job_exe_id, workspace_id, file_path, file_name
		)
		SELECT ins.id, u.ord FROM ins JOIN u ON u.job_exe_id = ins.job_exe_id
			AND u.workspace_id = ins.workspace_id AND u.file_path = ins.file_path
			AND u.file_name = ins.file_name`,
		[
			col("job_exe_id"),
			col("job_id"),
			col("job_type_id"),
			col("workspace_id"),
			col("file_name"),
			col("file_path"),
			col("media_type"),
			col("file_size"),
			col("uuid"),
			col("data_started"),
			col("data_ended"),
			col("geometry"),
			col("center_point"),
			rows.map(r => JSON.stringify(r.meta_data ?? {})),
			col("is_operational")
		]
	);
	const [, inserted] = await Promise.all([locked, inserting]);
	const ids: number[] = new Array(rows.length);
	for (const { id, ord } of inserted) ids[Number(ord) - 1] = id;
	return ids;
}

/** An execution's inputs and products, for its ancestry links. */
export interface AncestryEntry {
	jobExeId: number;
	jobId: number;
	inputFileIds: number[];
	productIds: number[];
}

/**
 * Links each execution's input files to its products (a link with no descendant when it made
 * none), and the inputs' own ancestors to the products as indirect links (ancestor_job,
 * ancestor_job_exe set), replacing the links the job's executions made before, as Scale does.
 */
export async function linkAncestry(sql: Sql, entries: readonly AncestryEntry[]): Promise<void> {
	const withInputs = entries.filter(e => e.inputFileIds.length > 0);
	if (withInputs.length === 0) return;
	await sql.query(
		`DELETE FROM file_ancestry_link
		 WHERE job_id = ANY($1::int[]) AND (descendant_id IS NULL OR job_exe_id = ANY($2::int[]))`,
		[withInputs.map(e => e.jobId), withInputs.map(e => e.jobExeId)]
	);
	// The inputs' own ancestors (the latest link of each), for the indirect links.
	const parents = [...new Set(withInputs.flatMap(e => e.inputFileIds))];
	const upstream = await sql.query<{
		descendant_id: number;
		ancestor_id: number;
		job_id: number;
		job_exe_id: number;
	}>(
		`SELECT DISTINCT ON (descendant_id, ancestor_id) descendant_id, ancestor_id, job_id,
			job_exe_id
		 FROM file_ancestry_link WHERE descendant_id = ANY($1::int[])
		 ORDER BY descendant_id, ancestor_id, id DESC`,
		[parents]
	);
	const above = new Map<number, typeof upstream>();
	for (const link of upstream) {
		const list = above.get(link.descendant_id) ?? [];
		list.push(link);
		above.set(link.descendant_id, list);
	}
	const rows: (number | null)[][] = [];
	for (const e of withInputs) {
		const inputs = [...new Set(e.inputFileIds)];
		const kids = e.productIds.length > 0 ? e.productIds : [null];
		for (const input of inputs)
			for (const kid of kids) rows.push([input, kid, e.jobId, e.jobExeId, null, null]);
		const indirect = new Map<number, (typeof upstream)[number]>();
		for (const input of inputs)
			for (const link of above.get(input) ?? [])
				if (!inputs.includes(link.ancestor_id)) indirect.set(link.ancestor_id, link);
		for (const link of indirect.values())
			for (const kid of kids)
				rows.push([
					link.ancestor_id,
					kid,
					e.jobId,
					e.jobExeId,
					link.job_id,
					link.job_exe_id
				]);
	}
	const col = (i: number) => rows.map(r => r[i]);
	await sql.query(
		`INSERT INTO file_ancestry_link (ancestor_id, descendant_id, job_id, job_exe_id, recipe_id,
			ancestor_job_id, ancestor_job_exe_id)
		 SELECT u.ancestor_id, u.descendant_id, u.job_id, u.job_exe_id, rj.recipe_id,
			u.ancestor_job_id, u.ancestor_job_exe_id
		 FROM unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::int[], $6::int[])
			AS u(ancestor_id, descendant_id, job_id, job_exe_id, ancestor_job_id,
				ancestor_job_exe_id)
			LEFT JOIN (SELECT job_id, recipe_id FROM recipe_job WHERE job_id = ANY($3::int[])) rj
				ON rj.job_id = u.job_id`,
		[col(0), col(1), col(2), col(3), col(4), col(5)]
	);
}

/**
 * parse_results of a results manifest applied to the job's input source files (Scale 3.0's
 * SourceFileManager.save_parse_results): data times, data types, footprint and meta_data, an
 * optional move inside the workspace, is_parsed/parsed, and a PARSE trigger event per file, all
 * in the completion's transaction. The trigger consumer finds the events by `processed IS NULL`.
 */

/** One parse result as the manifest gives it (1.1, or 1.0 with the times at the top level). */
export interface RawParseResult {
	filename?: unknown;
	new_workspace_path?: unknown;
	data_types?: unknown;
	geo_metadata?: { data_started?: unknown; data_ended?: unknown; geo_json?: unknown };
	data_started?: unknown;
	data_ended?: unknown;
	/** the agent may put a GeoJSON file's content here when the manifest named gis_data_path */
	geo_json?: unknown;
}

/** An input source file the parse results may apply to. */
export interface ParseTarget {
	id: number;
	file_name: string;
	file_path: string;
	workspace_host_path: string | null;
	is_move_enabled: boolean;
}

export interface ParseUpdate {
	id: number;
	data_started: string | null;
	data_ended: string | null;
	data_types: string[];
	/** WKT, or null to keep the file's footprint */
	geometry: string | null;
	center_point: string | null;
	/** JSON text, or null to keep the file's meta_data */
	meta_data: string | null;
	/** the new path in the workspace, or null to leave the file where it is */
	new_path: string | null;
}

function text(value: unknown): string | null {
	return typeof value === "string" && value !== "" ? value : null;
}

function validTime(value: unknown): string | null {
	const t = text(value);
	return t !== null && !Number.isNaN(Date.parse(t)) ? t : null;
}

/**
 * A workspace-relative path for `dir/filename`, or null when it would leave the workspace (an
 * absolute path is taken relative to the workspace root, ".." that climbs out is refused).
 */
export function movedPath(dir: string, fileName: string): string | null {
	const joined = path.posix.normalize(path.posix.join("/", dir, fileName));
	const relative = joined.replace(/^\/+/, "");
	if (relative === "" || relative.startsWith("..")) return null;
	return relative;
}

/** Matches parse results to the input source files by file name and works out each update. */
export function planParseUpdates(
	results: readonly RawParseResult[],
	sources: readonly ParseTarget[]
): ParseUpdate[] {
	const byName = new Map(sources.map(s => [s.file_name, s]));
	const updates: ParseUpdate[] = [];
	const seen = new Set<number>();
	for (const result of results) {
		const source =
			typeof result?.filename === "string" ? byName.get(result.filename) : undefined;
		if (!source || seen.has(source.id)) continue;
		seen.add(source.id);
		const geoMeta = (result.geo_metadata ?? {}) as NonNullable<RawParseResult["geo_metadata"]>;
		const geoJson = geoMeta.geo_json ?? result.geo_json;
		let geometry: string | null = null;
		let center: string | null = null;
		let meta: string | null = null;
		if (geoJson !== undefined && geoJson !== null) {
			try {
				const parsed = parseGeoJson(geoJson);
				geometry = parsed.geometry;
				center = parsed.centerPoint;
				meta = JSON.stringify(parsed.properties ?? {});
			} catch {
				// an unreadable footprint is left out; the rest of the parse still applies
			}
		}
		const types = Array.isArray(result.data_types)
			? [...new Set(result.data_types.filter((t): t is string => typeof t === "string"))]
			: [];
		const dir = text(result.new_workspace_path);
		updates.push({
			id: source.id,
			data_started: validTime(geoMeta.data_started ?? result.data_started),
			data_ended: validTime(geoMeta.data_ended ?? result.data_ended),
			data_types: types,
			geometry,
			center_point: center,
			meta_data: meta,
			new_path:
				dir !== null && source.is_move_enabled ? movedPath(dir, source.file_name) : null
		});
	}
	return updates;
}

/** A file moved on disk, so it can be moved back if the transaction does not commit. */
export interface FileMove {
	from: string;
	to: string;
}

/**
 * Moves the files of updates with a new path inside their workspace's host directory. A move
 * that fails (the directory is not reachable from this process, say) is dropped: the file keeps
 * its path, with a warning through `warn`. Answers the moves done.
 */
export async function moveSourceFiles(
	updates: ParseUpdate[],
	sources: readonly ParseTarget[],
	warn: (message: string) => void
): Promise<FileMove[]> {
	const byId = new Map(sources.map(s => [s.id, s]));
	const moves: FileMove[] = [];
	for (const update of updates) {
		const source = byId.get(update.id);
		if (!update.new_path || !source) continue;
		if (update.new_path === source.file_path) continue;
		if (!source.workspace_host_path) {
			update.new_path = null;
			continue;
		}
		const from = path.posix.join(source.workspace_host_path, source.file_path);
		const to = path.posix.join(source.workspace_host_path, update.new_path);
		try {
			await fs.mkdir(path.posix.dirname(to), { recursive: true });
			await fs.rename(from, to);
			moves.push({ from, to });
		} catch (error) {
			const already = await fs
				.stat(to)
				.then(() => true)
				.catch(() => false);
			if (already) continue;
			warn(`cannot move ${from} to ${to}: ${(error as Error).message}`);
			update.new_path = null;
		}
	}
	return moves;
}

/** Moves files back after a transaction that moved them did not commit. */
export async function undoMoves(moves: readonly FileMove[]): Promise<void> {
	for (const move of [...moves].reverse()) await fs.rename(move.to, move.from).catch(() => {});
}

/**
 * Writes the updates to the source files and records a PARSE trigger event for each (processed
 * null, for the trigger consumer). Answers the events' ids.
 */
export async function applyParseUpdates(
	sql: Sql,
	updates: readonly ParseUpdate[]
): Promise<number[]> {
	if (updates.length === 0) return [];
	const col = <K extends keyof ParseUpdate>(k: K) => updates.map(u => u[k]);
	const rows = await sql.query<{ id: number }>(
		`WITH u AS (
			SELECT * FROM unnest($1::int[], $2::timestamptz[], $3::timestamptz[], $4::jsonb[],
				$5::text[], $6::text[], $7::jsonb[], $8::text[])
				AS u(id, data_started, data_ended, data_types, geometry, center_point, meta_data,
					new_path)
		),
		f AS (
			UPDATE scale_file f SET is_parsed = true, parsed = now(),
				data_started = u.data_started, data_ended = u.data_ended,
				data_type = f.data_type || ARRAY(
					SELECT t FROM jsonb_array_elements_text(u.data_types) t
					WHERE t <> ALL(f.data_type)),
				geometry = coalesce(u.geometry, f.geometry),
				center_point = coalesce(u.center_point, f.center_point),
				meta_data = coalesce(u.meta_data, f.meta_data),
				file_path = coalesce(u.new_path, f.file_path),
				last_modified = now()
			FROM u WHERE f.id = ANY($1::int[]) AND f.id = u.id AND f.file_type = 'SOURCE'
			RETURNING f.id, f.file_name, f.parsed
		)
		INSERT INTO trigger_event (type, description, occurred)
		SELECT 'PARSE', jsonb_build_object('version', '1.0', 'file_id', f.id,
			'file_name', f.file_name, 'parse_id', f.id), f.parsed
		FROM f ORDER BY f.id RETURNING id`,
		[
			col("id"),
			col("data_started"),
			col("data_ended"),
			updates.map(u => JSON.stringify(u.data_types)),
			col("geometry"),
			col("center_point"),
			col("meta_data"),
			col("new_path")
		]
	);
	return rows.map(r => r.id);
}
