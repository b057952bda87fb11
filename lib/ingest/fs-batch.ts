import fs from "fs";
import { CopyNeeded, moveAside, moveNoClobber, TargetExists } from "./move";

/**
 * The file-system work a strike monitor asks for in batches (lib/ingest/fs-thread.ts): what it
 * asks, what it is answered, and the synchronous doing of it.
 */

/**
 * A move: into the workspace, never replacing a file (`to`; with `linkOnly`, a file that would
 * be copied is left where it is, answered `copyNeeded`), or aside into `folder`.
 */
export type FsMove =
	| { from: string; to: string; linkOnly?: boolean }
	| { from: string; folder: string; tag: string };

export type FsRequest = { kind: "lstat"; paths: string[] } | { kind: "move"; moves: FsMove[] };

/** A path's size and whether it is a regular file; null when there is nothing there. */
export type FsStat = { size: number; isFile: boolean } | null;

/**
 * What a move did: where the file went, or the error (its code, whether the name was taken,
 * whether the move was left undone because it would be a copy).
 */
export type FsMoved =
	| { to: string }
	| {
			error: {
				code: string | undefined;
				message: string;
				targetExists: boolean;
				copyNeeded?: boolean;
			};
	  };

export type FsReply = { stats: FsStat[] } | { moved: FsMoved[] };

export function runFsRequest(request: FsRequest): FsReply {
	if (request.kind === "lstat")
		return {
			stats: request.paths.map(p => {
				try {
					const stat = fs.lstatSync(p, { throwIfNoEntry: false });
					return stat ? { size: stat.size, isFile: stat.isFile() } : null;
				} catch {
					return null;
				}
			})
		};
	return { moved: request.moves.map(moveOne) };
}

function moveOne(move: FsMove): FsMoved {
	try {
		if ("to" in move) {
			moveNoClobber(move.from, move.to, !move.linkOnly);
			return { to: move.to };
		}
		return { to: moveAside(move.from, move.folder, move.tag) };
	} catch (error) {
		const e = error as NodeJS.ErrnoException;
		return {
			error: {
				code: e.code,
				message: e.message,
				targetExists: error instanceof TargetExists,
				...(error instanceof CopyNeeded ? { copyNeeded: true } : {})
			}
		};
	}
}
