/**
 * What a strike's monitor (on the node agent that runs the strike's job) and the `ingest`
 * service say to each other. The monitor holds no database credentials: it reports what it sees
 * in the strike's directory and moves files where the service tells it; the service decides and
 * writes. Every call names the strike and the execution the monitor serves; the service answers
 * only the strike job's live (RUNNING) execution on the agent that asks, so a strike has one
 * monitor however many agents once ran it.
 *
 *   ingest.monitorSetup    MonitorCall                → MonitorSetup
 *   ingest.transferring    MonitorCall & {files: TransferringFile[]} → {ok}
 *   ingest.arrived         MonitorCall & {files: ArrivedFile[]}      → {decisions: Decision[]}
 *   ingest.ingesting       MonitorCall & {ingestIds: number[]}       → {ok}
 *   ingest.settle          MonitorCall & {results: Settled[]}        → {answers: SettleAnswer[]}
 *   ingest.s3Objects       MonitorCall & {objects: CreatedObject[]}  → S3Recorded (a 2.0 strike's
 *                          monitor, lib/ingest/s3-record.ts; it deletes the messages after)
 *
 * A file's life: seen with the transfer suffix, TRANSFERRING (`transferring`, its size as it
 * grows); seen without it, `arrived`: the service decides. To ingest, the file's place in the
 * workspace is recorded before the monitor moves it there, so a monitor that dies mid-move finds
 * it again (`open` in MonitorSetup, as INGESTING): as a move under way (`ingest_move`, its
 * ingest's id drawn) for a file that arrived whole, or on its ingest row, then INGESTING, for one
 * that was TRANSFERRING. A move that would be a copy (to another file system) is made an
 * INGESTING ingest (`ingesting`) before the monitor copies the file, so that it shows while it
 * runs; a link is instant. A file not to ingest is recorded TRANSFERRED until the monitor has moved
 * it aside, then `settle` records DEFERRED, DUPLICATE or ERRORED. `settle` of an ingested file
 * writes the source file, the ingest INGESTED (its one write, for a move under way) and the
 * INGEST trigger event in one transaction.
 */

import type { SqsPlace } from "../storage/sqs";

export interface MonitorCall {
	strikeId: number;
	jobExeId: number;
}

/** Folders of the strike's directory that files not ingested are moved into, by outcome. */
export const ASIDE_FOLDERS = {
	DEFERRED: "deferred",
	DUPLICATE: "duplicate",
	ERRORED: "errored"
} as const;
export type AsideStatus = keyof typeof ASIDE_FOLDERS;

export interface MonitorSetup {
	/** the directory to watch: the configuration's mount_on, else its mount */
	directory: string;
	transferSuffix: string;
	/** ingests of this strike not finished (a previous monitor's), for the monitor to settle */
	open: OpenIngest[];
	/** a 2.0 strike's queue of its bucket's notifications: the monitor reads it, not a directory */
	sqs?: SqsPlace;
}

export interface OpenIngest {
	ingestId: number;
	fileName: string;
	status: "TRANSFERRING" | "TRANSFERRED" | "INGESTING";
	/** INGESTING: the absolute path the file is (being) moved to */
	target: string | null;
}

export interface TransferringFile {
	/** the name without the transfer suffix */
	name: string;
	bytes: number;
	/** ISO-8601: when the monitor first saw it */
	started: string;
}

export interface ArrivedFile {
	name: string;
	size: number;
	/** ISO-8601: when the monitor first saw it (with the suffix, or whole) */
	transferStarted: string;
	/** ISO-8601: when the monitor saw it whole */
	transferEnded: string;
}

export type Decision =
	| { name: string; ingestId: number; action: "ingest"; target: string }
	| { name: string; ingestId: number; action: "aside"; status: AsideStatus; reason?: string };

export interface Settled {
	ingestId: number;
	status: "INGESTED" | AsideStatus;
	/** INGESTED: the stored file's size */
	size?: number;
	/** ERRORED: what went wrong */
	reason?: string;
}

export interface SettleAnswer {
	ingestId: number;
	/** what the ingest is now */
	status: string;
	/**
	 * INGESTED reported, but a source file of that name was stored meanwhile (by another strike,
	 * say): the ingest is DUPLICATE and the file just stored is to be moved aside from `target`.
	 */
	moveAside?: string;
}

/** The control plane says a monitor's execution is not the strike's live one: it stops. */
export function isRefusal(error: any): boolean {
	return error?.type === "CONFLICT" || error?.code === 409;
}
