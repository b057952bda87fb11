import { promises as fs } from "fs";
import path from "path";
import type { FsMoved } from "./fs-batch";
import type { FsThread } from "./fs-thread";
import type { Folder } from "./file-paths";
import { exists } from "./recovery";
import { ASIDE_FOLDERS, type AsideStatus, type Decision, type Settled } from "./protocol";

/**
 * What came of a batch's moves (lib/ingest/monitor.ts moves the files where the service decided,
 * in one request): each file's outcome for `ingest.settle`, the copies a move across file systems
 * needs, and the files put aside when they cannot be stored.
 */

/** What the outcomes need of the monitor whose batch it is. */
export interface BatchContext {
	strikeId: number;
	/** the strike's directory, and the paths of names in it */
	directory: string;
	folder: Folder;
	files: Pick<FsThread, "move">;
	/** the names the monitor is moving out of the directory (their watch events are its own) */
	leaving: Set<string>;
	/** a call to the control plane; null when it could not be made (tried again later) */
	call(action: string, params: Record<string, unknown>): Promise<unknown>;
	warn(message: string): void;
}

/** The folder of the strike's directory that files of `status` are put aside in. */
export function asideFolder(directory: string, status: AsideStatus): string {
	return path.join(directory, ASIDE_FOLDERS[status]);
}

/**
 * The files of a batch that would be copied to reach their workspace (another file system):
 * shown INGESTING (`ingest.ingesting`), then copied, their outcomes put in `moved`. Answers
 * the indexes of those left in the directory because the control plane could not be told,
 * tried again at the next rescan.
 */
export async function copyAcross(
	ctx: BatchContext,
	decisions: Decision[],
	moved: FsMoved[]
): Promise<Set<number>> {
	const copies = decisions.flatMap((d, i) => {
		const m = moved[i];
		return d.action === "ingest" && "error" in m && m.error.copyNeeded ? [i] : [];
	});
	if (copies.length === 0) return new Set();
	const shown = await ctx.call("ingest.ingesting", {
		ingestIds: copies.map(i => decisions[i].ingestId)
	});
	if (!shown) {
		for (const i of copies) ctx.leaving.delete(decisions[i].name);
		return new Set(copies);
	}
	const copied = await ctx.files.move(
		copies.map(i => {
			const d = decisions[i] as Extract<Decision, { action: "ingest" }>;
			return { from: ctx.folder.path(d.name), to: d.target };
		})
	);
	copies.forEach((i, k) => (moved[i] = copied[k]));
	return new Set();
}

/**
 * What a file's move where the service decided came to; null to try again at the next
 * rescan. A stored file's size is the one it had when it arrived (`size`): the move links the
 * same inode, and a file is whole once it is named without the transfer suffix.
 */
export async function outcomeOf(
	ctx: BatchContext,
	decision: Decision,
	moved: FsMoved,
	size: number
): Promise<Settled | null> {
	const { ingestId } = decision;
	if ("to" in moved)
		return decision.action === "ingest"
			? { ingestId, status: "INGESTED", size }
			: {
					ingestId,
					status: decision.status,
					...(decision.reason ? { reason: decision.reason } : {})
				};
	ctx.leaving.delete(decision.name);
	const from = ctx.folder.path(decision.name);
	const lost: Settled = { ingestId, status: "ERRORED", reason: "the file is lost" };
	if (decision.action === "aside") {
		if (!(await exists(from))) return lost;
		ctx.warn(
			`strike ${ctx.strikeId}: cannot move ${from} aside: ${moved.error.message}; left in place`
		);
		return null;
	}
	const stored = moved.error.targetExists ? await alreadyStored(from, decision.target) : null;
	if (stored !== null) return { ingestId, status: "INGESTED", size: stored };
	if (!(await exists(from))) return lost;
	return putAside(ctx, ingestId, from, "ERRORED", describe(moved.error, decision.target));
}

/**
 * The size of the stored file when `to` already holds this very file (a move done by an
 * earlier monitor whose report was lost: same size), removing the leftover at `from`.
 */
async function alreadyStored(from: string, to: string): Promise<number | null> {
	const [a, b] = await Promise.all([
		fs.stat(from).catch(() => null),
		fs.stat(to).catch(() => null)
	]);
	if (!b || (a && a.size !== b.size)) return null;
	if (a) await fs.unlink(from).catch(() => undefined);
	return b.size;
}

async function putAside(
	ctx: BatchContext,
	ingestId: number,
	from: string,
	status: AsideStatus,
	reason?: string
): Promise<Settled | null> {
	const [moved] = await ctx.files.move([
		{ from, folder: asideFolder(ctx.directory, status), tag: String(ingestId) }
	]);
	if (!("to" in moved)) {
		ctx.warn(
			`strike ${ctx.strikeId}: cannot move ${from} aside: ${moved.error.message}; left in place`
		);
		return null;
	}
	return { ingestId, status, ...(reason ? { reason } : {}) };
}

function describe(error: { targetExists: boolean; message: string }, target: string): string {
	if (error.targetExists) return `the workspace already holds another file at ${target}`;
	return `cannot store it at ${target}: ${error.message}`;
}
