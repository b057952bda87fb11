import { constants as fsConstants, promises as fs, type ReadStream } from "fs";
import type { FileHandle } from "fs/promises";
import path from "path";
import type { Sequelize } from "sequelize";
import { isInside } from "../paths";
import { select } from "../db/run";
import { NotFoundError } from "../errors";
import { s3PlaceOf } from "../documents/s3-broker";
import { presignedGet } from "./s3";

/**
 * Downloads through the API (GET /files/{id}/download/), for files whose workspace has no base
 * URL: the file is streamed from its workspace's host directory, never from outside it; a file in
 * an s3 workspace is answered with a redirect to a presigned link (docs/decisions.md, "An S3
 * file's download is a presigned redirect").
 */

/** How long a download's presigned link works. */
export const PRESIGNED_LINK_S = 300;

export type OpenedFile = { stream: ReadStream; size: number } | { refused: string };

/**
 * Opens `filePath` (relative to the workspace root, as scale_file stores it) for reading. The
 * path is resolved, symbolic links included, and must stay inside the root, itself resolved; the
 * file is then opened without following a link in its last part, so what was checked is what is
 * read. Answers the stream and the size of the file opened, or why it is refused.
 */
export async function openWorkspaceFile(hostPath: string, filePath: string): Promise<OpenedFile> {
	if (filePath.includes("\0")) return { refused: "its path holds a NUL character" };
	let root: string;
	try {
		root = await fs.realpath(hostPath);
	} catch {
		return { refused: "its workspace directory is not reachable" };
	}
	const lexical = path.join(root, filePath);
	if (!isInside(root, lexical)) return { refused: "its path leads outside its workspace" };
	let real: string;
	try {
		real = await fs.realpath(lexical);
	} catch {
		return { refused: "it is missing from its workspace" };
	}
	if (!isInside(root, real)) return { refused: "its path leads outside its workspace" };
	let handle: FileHandle;
	try {
		handle = await fs.open(real, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
	} catch {
		return { refused: "it is missing from its workspace" };
	}
	const stats = await handle.stat().catch(() => null);
	if (!stats?.isFile()) {
		await handle.close();
		return { refused: "it is not a regular file in its workspace" };
	}
	return { stream: handle.createReadStream(), size: stats.size };
}

/** A Content-Disposition header naming the file: a plain ASCII fallback and the UTF-8 name. */
export function contentDisposition(fileName: string): string {
	const fallback = fileName.replace(/[^\x20-\x7e]|["\\]/g, "_");
	const encoded = encodeURIComponent(fileName).replace(
		/['()*]/g,
		c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`
	);
	return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

export interface Download {
	stream: ReadStream;
	size: number;
	mediaType: string;
	fileName: string;
}

/**
 * The file with this id opened for download, or the link to it in S3; a 404 when it is unknown,
 * deleted or not on disk.
 */
export async function openDownload(
	db: Sequelize,
	id: number
): Promise<Download | { redirect: string }> {
	const [row] = await select<{
		file_name: string;
		file_path: string;
		media_type: string;
		is_deleted: boolean;
		host_path: string | null;
		broker: Record<string, unknown>;
	}>(
		db,
		`SELECT f.file_name, f.file_path, f.media_type, f.is_deleted,
			w.json_config->'broker'->>'host_path' AS host_path, w.json_config->'broker' AS broker
		 FROM scale_file f JOIN workspace w ON w.id = f.workspace_id WHERE f.id = $1`,
		[id]
	);
	if (!row) throw new NotFoundError(`No file with id ${id}`);
	if (row.is_deleted) throw new NotFoundError(`File ${id} has been deleted`);
	if (row.broker?.type === "s3") {
		const disposition = contentDisposition(row.file_name);
		const place = s3PlaceOf(row.broker, true);
		const link = await presignedGet(
			place,
			row.file_path,
			disposition,
			row.media_type,
			PRESIGNED_LINK_S
		);
		return { redirect: link };
	}
	if (!row.host_path)
		throw new NotFoundError(`File ${id} is not in a workspace on the host's file system`);
	const opened = await openWorkspaceFile(row.host_path, row.file_path);
	if ("refused" in opened)
		throw new NotFoundError(`File ${id} cannot be downloaded: ${opened.refused}`);
	return { ...opened, mediaType: row.media_type, fileName: row.file_name };
}
