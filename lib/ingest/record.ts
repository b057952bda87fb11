import path from "path";
import type { Sequelize } from "sequelize";
import { textArray } from "../db/array-literal";
import { PIPELINED, transaction } from "../db/run";
import {
	matchFileName,
	workspaceNamesIn,
	type StrikeConfiguration
} from "../documents/strike-configuration";
import { mediaTypeOf } from "../documents/media-types";
import { Folder, isPlainName } from "./file-paths";
import { guard } from "./guard";
import { isS3StrikeConfiguration } from "../documents/strike-s3";
import { s3MonitorSetup } from "./s3-record";
import type {
	ArrivedFile,
	AsideStatus,
	Decision,
	MonitorCall,
	MonitorSetup,
	OpenIngest,
	TransferringFile
} from "./protocol";

/**
 * The `ingest` service's side of a strike's monitor (lib/ingest/protocol.ts) up to its moves: its
 * setup, files growing, and files arrived decided (what becomes of them after: lib/ingest/
 * settle.ts). Each call is one pipelined transaction (lib/db/run.ts), set-based over the batch
 * the monitor sends, and guarded by the caller being the strike job's live execution.
 */

/** An ingest's statuses while its file is not settled yet. */
export const OPEN_STATUSES = ["TRANSFERRING", "TRANSFERRED", "INGESTING"];
/** The open statuses as an SQL list, for the statements' fixed texts. */
const OPEN = `(${OPEN_STATUSES.map(s => `'${s}'`).join(", ")})`;

/** The directory a strike's monitor watches: `mount_on`, else `mount`. */
export function watchedDirectory(config: StrikeConfiguration): string {
	return config.mount_on ?? config.mount;
}

/** What a monitor needs to start: its directory and suffix, and the ingests left open. */
export async function monitorSetup(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	withCredentials = false
): Promise<MonitorSetup> {
	return transaction(db, PIPELINED, async ({ query: q }) => {
		const config = await guard(q, call, agentId);
		if (isS3StrikeConfiguration(config)) return s3MonitorSetup(q, config, withCredentials);
		const open = await q(
			`SELECT x.id, x.file_name, x.status,
				CASE WHEN x.status = 'INGESTING' THEN
					(w.json_config->'broker'->>'host_path') || '/' || x.file_path END AS target
			 FROM (
				SELECT id, file_name, status, workspace_id, file_path FROM ingest
				WHERE strike_id = $1 AND status IN ${OPEN}
				UNION ALL
				SELECT id, file_name, 'INGESTING', workspace_id, file_path FROM ingest_move
				WHERE strike_id = $1
			 ) x LEFT JOIN workspace w ON w.id = x.workspace_id
			 ORDER BY x.id`,
			[call.strikeId]
		);
		return {
			directory: watchedDirectory(config),
			transferSuffix: config.transfer_suffix,
			open: open.map((row): OpenIngest => ({
				ingestId: row.id,
				fileName: row.file_name,
				status: row.status,
				target: row.target ?? null
			}))
		};
	});
}

/**
 * Files seen with the transfer suffix: a TRANSFERRING ingest each (created the first time),
 * its bytes_transferred brought up to date.
 */
export async function recordTransferring(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	files: TransferringFile[]
): Promise<void> {
	if (files.length === 0) return;
	await transaction(db, PIPELINED, async ({ query: q }) => {
		const config = await guard(q, call, agentId);
		await q(
			`WITH r AS (
				SELECT DISTINCT ON (name) * FROM json_to_recordset($3::json)
					AS r(name text, bytes bigint, started timestamptz)
			 ), u AS (
				UPDATE ingest i SET bytes_transferred = r.bytes, last_modified = now()
				FROM r WHERE i.strike_id = $1 AND i.file_name = r.name AND i.status = 'TRANSFERRING'
				RETURNING i.id
			 )
			 INSERT INTO ingest (file_name, strike_id, status, transfer_path, bytes_transferred,
				transfer_started)
			 SELECT r.name, $1, 'TRANSFERRING', $2 || '/' || r.name, r.bytes, r.started FROM r
			 WHERE NOT EXISTS (SELECT 1 FROM ingest i
				WHERE i.strike_id = $1 AND i.file_name = r.name AND i.status IN ${OPEN})`,
			[call.strikeId, watchedDirectory(config), JSON.stringify(files)]
		);
	});
}

interface OpenRow {
	id: number;
	file_name: string;
	status: string;
	file_path: string | null;
	workspace_id: number | null;
	data_type: string[];
	/** a move under way (ingest_move), not an ingest row */
	moving: boolean;
}

interface WorkspaceFacts {
	id: number;
	name: string;
	is_active: boolean;
	host_path: string | null;
}

/**
 * `workspace_path/YYYY/MM/DD/` for files ingested at `when` (UTC), as Scale, with its trailing
 * "/" (Folder.prefix): a file's path in its workspace is this and its name.
 */
export function datedFolder(workspacePath: string, when: Date): string {
	const yyyy = String(when.getUTCFullYear());
	const mm = String(when.getUTCMonth() + 1).padStart(2, "0");
	const dd = String(when.getUTCDate()).padStart(2, "0");
	return new Folder(path.posix.join, workspacePath, yyyy, mm, dd).prefix;
}

/**
 * Files seen whole: each is TRANSFERRED and decided, in one transaction. A name a source file
 * already has (or another strike is ingesting) is a DUPLICATE, a name no rule matches is
 * DEFERRED, a rule whose workspace is gone, inactive or not on the host is ERRORED: those stay
 * TRANSFERRED until the monitor has moved the file aside (settle). The rest are INGESTING, with
 * their workspace and path recorded before the monitor moves them. An ingest left open by an
 * earlier monitor is taken up again, an INGESTING one with the place it already has.
 */
export async function recordArrivals(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	files: ArrivedFile[],
	now: Date = new Date()
): Promise<Decision[]> {
	const unique = [...new Map(files.map(f => [f.name, f])).values()];
	if (unique.length === 0) return [];
	return transaction(db, PIPELINED, async ({ query: q }) => {
		const config = await guard(q, call, agentId);
		const names = textArray(unique.map(f => f.name));
		// The open ingests and the moves under way are locked: a monitor's calls come one at a
		// time, but a settle of an earlier monitor's call may still be on its way.
		const [open, taken, workspaces] = await Promise.all([
			q(
				`WITH i AS (
					SELECT id, file_name, status, file_path, workspace_id, data_type, false AS moving
					FROM ingest
					WHERE strike_id = $1 AND file_name = ANY($2::text[]) AND status IN ${OPEN}
					ORDER BY id FOR UPDATE
				 ), m AS (
					SELECT id, file_name, 'INGESTING' AS status, file_path, workspace_id, data_type,
						true AS moving
					FROM ingest_move WHERE file_name = ANY($2::text[]) AND strike_id = $1
					ORDER BY id FOR UPDATE
				 )
				 SELECT * FROM i UNION ALL SELECT * FROM m ORDER BY id`,
				[call.strikeId, names]
			) as Promise<OpenRow[]>,
			// a source file of the name is a duplicate only at the same size (a host file moved by
			// a rename has no checksum); one in another strike's hands, whatever its size
			q(
				`SELECT file_name, file_size FROM scale_file
				 WHERE file_type = 'SOURCE' AND file_name = ANY($1::text[])
				 UNION
				 SELECT file_name, NULL FROM ingest
				 WHERE file_name = ANY($1::text[]) AND status = 'INGESTING' AND strike_id <> $2
				 UNION
				 SELECT file_name, NULL FROM ingest_move
				 WHERE file_name = ANY($1::text[]) AND strike_id <> $2`,
				[names, call.strikeId]
			) as Promise<{ file_name: string; file_size: string | null }[]>,
			q(
				`SELECT id, name, is_active, (CASE WHEN json_config->'broker'->>'type' <> 's3' THEN json_config->'broker'->>'host_path' END) AS host_path
				 FROM workspace WHERE name = ANY($1::text[])`,
				[workspaceNamesIn(config)]
			) as Promise<WorkspaceFacts[]>
		]);
		const openByName = new Map<string, OpenRow>();
		for (const row of open)
			if (!openByName.has(row.file_name)) openByName.set(row.file_name, row);
		const takenNames = new Set(
			taken.map(row =>
				row.file_size === null ? row.file_name : `${row.file_name}\0${row.file_size}`
			)
		);
		const isTaken = (name: string, size: number) =>
			takenNames.has(name) || takenNames.has(`${name}\0${size}`);
		// a source file has the name with other content: this one is stored beside it, not on it
		const reusedNames = new Set(taken.map(row => row.file_name));
		const byName = new Map(workspaces.map(w => [w.name, w]));
		// an INGESTING ingest keeps the workspace it was given, which the configuration may no
		// longer name
		const keptIds = [
			...new Set(
				open.flatMap(row =>
					row.status === "INGESTING" && row.workspace_id !== null
						? [row.workspace_id]
						: []
				)
			)
		].filter(id => !workspaces.some(w => w.id === id));
		const byId = new Map(workspaces.map(w => [w.id, w]));
		if (keptIds.length > 0) {
			const kept = (await q(
				`SELECT id, name, is_active, (CASE WHEN json_config->'broker'->>'type' <> 's3' THEN json_config->'broker'->>'host_path' END) AS host_path
				 FROM workspace WHERE id = ANY($1::int[])`,
				[keptIds]
			)) as WorkspaceFacts[];
			for (const w of kept) byId.set(w.id, w);
		}

		const directory = new Folder(path.posix.join, watchedDirectory(config));
		/** per rule's workspace path and workspace: where its files go, and their targets */
		const folders = new Map<string, { file: string; target: string }>();
		const rows = unique.map(file => {
			const existing = openByName.get(file.name);
			const where = directory.path(file.name);
			const row = {
				id: existing?.id ?? null,
				moving: existing?.moving ?? false,
				name: file.name,
				status: "TRANSFERRED",
				transfer_path: where,
				size: file.size,
				transfer_started: file.transferStarted,
				transfer_ended: file.transferEnded,
				media_type: mediaTypeOf(file.name),
				data_type: [] as string[],
				file_path: null as string | null,
				workspace_id: null as number | null,
				ingest_path: where,
				error: null as string | null,
				target: null as string | null,
				aside: null as AsideStatus | null
			};
			const asideFor = (status: AsideStatus, error: string | null = null) => {
				row.aside = status;
				row.error = error;
				return row;
			};
			if (!isPlainName(file.name))
				return asideFor("ERRORED", `"${file.name}" is not a plain file name`);
			if (existing?.status === "INGESTING" && existing.file_path && existing.workspace_id) {
				const ws = byId.get(existing.workspace_id);
				if (!ws?.host_path)
					return asideFor(
						"ERRORED",
						`its workspace ${existing.workspace_id} is not on this host any more`
					);
				row.status = "INGESTING";
				// what it was given when it was decided: its rule may have changed since
				row.data_type = existing.data_type;
				row.file_path = existing.file_path;
				row.workspace_id = existing.workspace_id;
				row.target = path.posix.join(ws.host_path, existing.file_path);
				return row;
			}
			if (isTaken(file.name, file.size)) return asideFor("DUPLICATE");
			const rule = matchFileName(config, file.name);
			if (!rule) return asideFor("DEFERRED");
			row.data_type = rule.data_types;
			const ws = byName.get(rule.workspace_name);
			if (!ws)
				return asideFor("ERRORED", `the workspace "${rule.workspace_name}" does not exist`);
			if (!ws.is_active)
				return asideFor("ERRORED", `the workspace "${rule.workspace_name}" is not active`);
			if (!ws.host_path)
				return asideFor(
					"ERRORED",
					`the workspace "${rule.workspace_name}" is not a host workspace`
				);
			row.status = "INGESTING";
			row.workspace_id = ws.id;
			const key = `${ws.id}\0${rule.workspace_path}`;
			let folder = folders.get(key);
			if (!folder) {
				const dated = datedFolder(rule.workspace_path, now);
				folder = {
					file: dated,
					target: new Folder(path.posix.join, ws.host_path, dated).prefix
				};
				folders.set(key, folder);
			}
			const under = reusedNames.has(file.name) ? `${file.size}/` : "";
			row.file_path = folder.file + under + file.name;
			row.target = folder.target + under + file.name;
			return row;
		});

		// Where each decision is written: a file to move into its workspace is a move under way
		// (ingest_move), its ingest row written once, when the monitor reports it stored; a file
		// to move aside, or one whose ingest row exists already (it was TRANSFERRING), is an
		// open ingest row. A move under way that is now to go aside becomes an ingest row.
		const toMove = rows.filter(r => r.id === null && r.aside === null);
		const kept = rows.filter(r => r.moving && r.aside === null);
		const fresh = rows.filter(r => (r.id === null || r.moving) && r.aside !== null);
		const known = rows.filter(r => r.id !== null && !r.moving);
		const recordset = (list: typeof rows) =>
			JSON.stringify(
				list.map(r => ({
					id: r.id,
					name: r.name,
					status: r.status,
					transfer_path: r.transfer_path,
					size: r.size,
					transfer_started: r.transfer_started,
					transfer_ended: r.transfer_ended,
					media_type: r.media_type,
					data_type: r.data_type,
					file_path: r.file_path,
					workspace_id: r.workspace_id,
					ingest_path: r.ingest_path,
					error: r.error
				}))
			);
		const COLUMNS = `id int, name text, status text, transfer_path text, size bigint,
			transfer_started timestamptz, transfer_ended timestamptz, media_type text,
			data_type text[], file_path text, workspace_id int, ingest_path text, error text`;
		const [moves, inserted, updated] = await Promise.all([
			toMove.length === 0
				? []
				: q(
						`INSERT INTO ingest_move (id, strike_id, file_name, transfer_path, file_size,
							transfer_started, transfer_ended, media_type, data_type, workspace_id,
							file_path, ingest_path)
						 SELECT nextval('ingest_id_seq'::regclass), $1, r.name, r.transfer_path, r.size,
							r.transfer_started, r.transfer_ended, r.media_type, r.data_type,
							r.workspace_id, r.file_path, r.ingest_path
						 FROM json_to_recordset($2::json) AS r(${COLUMNS})
						 RETURNING id, file_name`,
						[call.strikeId, recordset(toMove)]
					),
			fresh.length === 0
				? []
				: q(
						`WITH d AS (
							DELETE FROM ingest_move WHERE strike_id = $1 AND id = ANY($3::int[])
						 )
						 INSERT INTO ingest (id, file_name, strike_id, status, transfer_path,
							bytes_transferred, transfer_started, transfer_ended, media_type, file_size,
							data_type, file_path, workspace_id, ingest_path, error)
						 SELECT coalesce(r.id, nextval('ingest_id_seq'::regclass)), r.name, $1, r.status,
							r.transfer_path, r.size, r.transfer_started, r.transfer_ended, r.media_type,
							r.size, r.data_type, r.file_path, r.workspace_id, r.ingest_path, r.error
						 FROM json_to_recordset($2::json) AS r(${COLUMNS})
						 RETURNING id, file_name`,
						[
							call.strikeId,
							recordset(fresh),
							fresh.flatMap(r => (r.moving && r.id !== null ? [r.id] : []))
						]
					),
			known.length === 0
				? []
				: q(
						`UPDATE ingest i SET status = r.status, transfer_path = r.transfer_path,
							bytes_transferred = r.size,
							transfer_started = coalesce(i.transfer_started, r.transfer_started),
							transfer_ended = coalesce(i.transfer_ended, r.transfer_ended),
							media_type = r.media_type, file_size = r.size, data_type = r.data_type,
							file_path = r.file_path, workspace_id = r.workspace_id,
							ingest_path = r.ingest_path,
							ingest_started = CASE WHEN r.status = 'INGESTING'
								THEN coalesce(i.ingest_started, now()) END,
							error = r.error, last_modified = now()
						 FROM json_to_recordset($2::json) AS r(${COLUMNS})
						 WHERE i.id = r.id AND i.strike_id = $1
						 RETURNING i.id, i.file_name`,
						[call.strikeId, recordset(known)]
					)
		]);
		const ids = new Map<string, number>(kept.map(r => [r.name, r.id as number]));
		for (const row of [...moves, ...inserted, ...updated]) ids.set(row.file_name, row.id);
		return rows.map((r): Decision => {
			const ingestId = ids.get(r.name) as number;
			if (r.aside)
				return {
					name: r.name,
					ingestId,
					action: "aside",
					status: r.aside,
					...(r.error ? { reason: r.error } : {})
				};
			return { name: r.name, ingestId, action: "ingest", target: r.target as string };
		});
	});
}
