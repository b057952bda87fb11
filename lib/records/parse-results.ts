import { promises as fs } from "fs";
import path from "path";
import { parseGeoJson } from "../documents/geo";
import type { Sql } from "../db/run";

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
