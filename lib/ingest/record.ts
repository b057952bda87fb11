import path from "path";
import type { Sequelize } from "sequelize";
import { intArray, textArray } from "../db/array-literal";
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
import { recordFileEvents, type Processed } from "../triggers/process";
import type {
	ArrivedFile,
	AsideStatus,
	Decision,
	MonitorCall,
	MonitorSetup,
	OpenIngest,
	SettleAnswer,
	Settled,
	TransferringFile
} from "./protocol";

/**
 * The `ingest` service's side of a strike's monitor (lib/ingest/protocol.ts): each call is one
 * pipelined transaction (lib/db/run.ts), set-based over the batch the monitor sends,
 * and guarded by the caller being the strike job's live execution.
 */

const OPEN_STATUSES = ["TRANSFERRING", "TRANSFERRED", "INGESTING"];
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

/**
 * Moves under way that the monitor is about to make as copies (to another file system): each
 * becomes its ingest row, INGESTING, shown while the copy runs, as an ingest that was
 * TRANSFERRING is. A move already written (a repeated call) is left as it is.
 */
export async function recordIngesting(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	ingestIds: number[]
): Promise<void> {
	if (ingestIds.length === 0) return;
	await transaction(db, PIPELINED, async ({ query: q }) => {
		await guard(q, call, agentId);
		await q(
			`WITH m AS (
				DELETE FROM ingest_move WHERE strike_id = $1 AND id = ANY($2::int[]) RETURNING *
			 )
			 INSERT INTO ingest (id, file_name, strike_id, status, transfer_path, bytes_transferred,
				transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
				workspace_id, ingest_path, ingest_started, created)
			 SELECT id, file_name, strike_id, 'INGESTING', transfer_path, file_size,
				transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
				workspace_id, ingest_path, ingest_started, ingest_started
			 FROM m`,
			[call.strikeId, ingestIds]
		);
	});
}

/** What the settle's statements answer of each ingest they write. */
const STORED_COLUMNS = `i.id, i.status, i.file_name, i.source_file_id, i.ingest_ended, i.media_type,
	i.data_type, i.file_size`;

interface StoredRow {
	id: number;
	status: string;
	file_name: string;
	source_file_id: number;
	ingest_ended: Date;
	media_type: string;
	data_type: string[];
	file_size: string;
}

/**
 * The ingest rows of moves under way that the monitor reports done ($1: id, status, file_size of
 * a stored file, error), each written once from its move's row, which is deleted: a file stored
 * is INGESTED with its source file (its INGEST event written after, by settleIngests), unless a
 * source file of its name exists (DUPLICATE); a file moved aside or lost has the status reported. The ingest was created
 * when its move was decided (`created`, as when the arrival wrote its row). Each move is read by
 * key beside its result, as the settle below reads its ingests, so that `r` is planned as many
 * rows as the recordset (see there). `OFFSET 0` keeps that lookup a lookup: a table of moves
 * under way is often empty when autovacuum counts it, and PostgreSQL, joining it whole to the
 * recordset as a table of one row, then joined `f` to `r` by comparing every name with every
 * other (90 of a 500-file batch's 130 ms). The moves are deleted by their ids given (`$3`), not
 * by a join to `r`, for the same reason: planned for a table of one row, `id IN (SELECT id FROM
 * r)` became a scan of the moves under way (thousands in a burst) each compared with every row of
 * `r`, 290–380 ms a statement in the run where it happened (`auto_explain`); an array of ids is
 * looked up by key or hashed, whatever the table's statistics say.
 */
const WRITE_MOVED_SQL = `
	WITH r AS (
		SELECT s.id, s.status, s.error, coalesce(s.file_size, g.file_size) AS file_size,
			g.strike_id, g.file_name, g.transfer_path, g.transfer_started, g.transfer_ended,
			g.media_type, g.data_type, g.workspace_id, g.file_path, g.ingest_path, g.ingest_started
		FROM json_to_recordset($1::json) AS s(id int, status text, file_size bigint, error text)
		CROSS JOIN LATERAL (
			SELECT * FROM ingest_move WHERE id = s.id AND strike_id = $2 OFFSET 0
		) g
	 ), d AS (
		DELETE FROM ingest_move WHERE id = ANY($3::int[]) AND strike_id = $2
	 ), f AS (
		INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, data_type, uuid)
		SELECT 'SOURCE', r.workspace_id, r.file_name, r.file_path, r.media_type, r.file_size,
			r.data_type, md5(r.file_name)
		FROM r WHERE r.status = 'INGESTED'
		ON CONFLICT (file_name, file_size, (COALESCE(checksum, '')))
			WHERE file_type = 'SOURCE' DO NOTHING
		RETURNING id, file_name
	 ), i AS (
		INSERT INTO ingest (id, file_name, strike_id, status, transfer_path, bytes_transferred,
			transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
			workspace_id, ingest_path, ingest_started, ingest_ended, source_file_id, error, created)
		SELECT r.id, r.file_name, r.strike_id,
			CASE WHEN r.status <> 'INGESTED' THEN r.status
				WHEN f.id IS NULL THEN 'DUPLICATE' ELSE 'INGESTED' END,
			r.transfer_path, r.file_size, r.transfer_started, r.transfer_ended, r.media_type,
			r.file_size, r.data_type, r.file_path, r.workspace_id, r.ingest_path, r.ingest_started,
			now(), f.id, r.error, r.ingest_started
		FROM r LEFT JOIN f ON f.file_name = r.file_name
		RETURNING id, file_name, status, source_file_id, ingest_ended, media_type, data_type,
			file_size
	 )
	 SELECT ${STORED_COLUMNS} FROM i`;

/**
 * What the monitor did with the files: stored (INGESTED: the source file, the ingest, its INGEST
 * trigger event written processed and the jobs and recipes of the rules it matches, in this one
 * transaction: lib/triggers/process.ts recordFileEvents) or moved aside (DEFERRED, DUPLICATE,
 * ERRORED with its reason). Guarded on the ingest being open, so a repeat
 * changes nothing and answers the status it has. A file stored while a source file of its name
 * appeared meanwhile is a DUPLICATE, to be moved aside from the workspace. Answers, per result,
 * the ingest's status, and what the events' rules made.
 */
export async function settleIngests(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	results: Settled[]
): Promise<{ answers: SettleAnswer[]; triggered: Processed }> {
	if (results.length === 0)
		return { answers: [], triggered: { events: 0, jobs: 0, recipes: 0, refused: [] } };
	return transaction(db, PIPELINED, async sql => {
		const q = sql.query;
		await guard(q, call, agentId);
		const ids = intArray(results.map(r => r.ingestId));
		// what the monitor's results are checked against; the stored files' columns are read by
		// the statement that stores them, not sent back and forth
		const rows = (await q(
			`WITH i AS (
				SELECT id, status, workspace_id, file_path, false AS moving FROM ingest
				WHERE id = ANY($1::int[]) AND strike_id = $2 ORDER BY id FOR UPDATE
			 ), m AS (
				SELECT id, 'INGESTING' AS status, workspace_id, file_path, true AS moving
				FROM ingest_move WHERE id = ANY($1::int[]) AND strike_id = $2 ORDER BY id FOR UPDATE
			 )
			 SELECT x.id, x.status, x.moving,
				(w.json_config->'broker'->>'host_path') || '/' || x.file_path AS target
			 FROM (SELECT * FROM i UNION ALL SELECT * FROM m) x
			 LEFT JOIN workspace w ON w.id = x.workspace_id`,
			[ids, call.strikeId]
		)) as { id: number; status: string; moving: boolean; target: string | null }[];
		const byId = new Map(rows.map(r => [r.id, r]));
		const moved = results.filter(r => byId.get(r.ingestId)?.moving === true);
		const toStore = results.filter(r => {
			const row = byId.get(r.ingestId);
			return r.status === "INGESTED" && row?.status === "INGESTING" && !row.moving;
		});
		const asides = results.filter(r => {
			const row = byId.get(r.ingestId);
			return (
				r.status !== "INGESTED" &&
				row !== undefined &&
				!row.moving &&
				OPEN_STATUSES.includes(row.status)
			);
		});
		const stored = new Set<number>();
		const storedRows: StoredRow[] = [];
		/** moves under way that ended as another status than the one reported: duplicates */
		const movedAs = new Map<number, string>();
		if (moved.length > 0) {
			const recordset = moved.map(r => ({
				id: r.ingestId,
				status: r.status,
				file_size: r.status === "INGESTED" ? (r.size ?? 0) : null,
				error: r.status === "ERRORED" ? (r.reason ?? "unknown") : null
			}));
			const done = (await q(WRITE_MOVED_SQL, [
				JSON.stringify(recordset),
				call.strikeId,
				intArray(moved.map(r => r.ingestId))
			])) as StoredRow[];
			for (const row of done) {
				movedAs.set(row.id, row.status);
				if (row.status === "INGESTED") {
					stored.add(row.id);
					storedRows.push(row);
				}
			}
		}
		if (toStore.length > 0) {
			const recordset = toStore.map(r => ({ ingest_id: r.ingestId, file_size: r.size ?? 0 }));
			// Each ingest (locked above) is read by key beside its size, so that `r` is planned as
			// many rows as the recordset: joined with a filter on the ids, PostgreSQL expected a
			// few and joined `f` to `r` by a nested loop comparing every name with every other.
			const done = (await q(
				`WITH r AS (
					SELECT s.ingest_id, g.workspace_id, g.file_name, g.file_path, g.media_type,
						s.file_size, g.data_type
					FROM json_to_recordset($1::json) AS s(ingest_id int, file_size bigint)
					CROSS JOIN LATERAL (SELECT * FROM ingest WHERE id = s.ingest_id) g
				 ), f AS (
					INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
						file_size, data_type, uuid)
					SELECT 'SOURCE', r.workspace_id, r.file_name, r.file_path, r.media_type,
						r.file_size, r.data_type, md5(r.file_name) FROM r
					ON CONFLICT (file_name, file_size, (COALESCE(checksum, '')))
						WHERE file_type = 'SOURCE' DO NOTHING
					RETURNING id, file_name, file_size
				 ), i AS (
					UPDATE ingest SET status = 'INGESTED', file_size = f.file_size,
						bytes_transferred = f.file_size, ingest_ended = now(), source_file_id = f.id,
						last_modified = now()
					FROM r JOIN f ON f.file_name = r.file_name
					WHERE ingest.id = r.ingest_id
					RETURNING ingest.id, 'INGESTED' AS status, ingest.file_name,
						ingest.source_file_id, ingest.ingest_ended, ingest.media_type,
						ingest.data_type, ingest.file_size
				 )
				 SELECT ${STORED_COLUMNS} FROM i`,
				[JSON.stringify(recordset)]
			)) as StoredRow[];
			for (const row of done) {
				stored.add(row.id);
				storedRows.push(row);
			}
		}
		const lateDuplicates = toStore.filter(r => !stored.has(r.ingestId));
		const finals = [
			...asides.map(r => ({
				id: r.ingestId,
				status: r.status,
				error: r.status === "ERRORED" ? (r.reason ?? "unknown") : null
			})),
			...lateDuplicates.map(r => ({ id: r.ingestId, status: "DUPLICATE", error: null }))
		];
		if (finals.length > 0)
			await q(
				`UPDATE ingest i SET status = r.status, error = r.error, last_modified = now(),
					ingest_ended = CASE WHEN i.status = 'INGESTING' THEN now() END
				 FROM json_to_recordset($1::json) AS r(id int, status text, error text)
				 WHERE i.id = r.id`,
				[JSON.stringify(finals)]
			);
		const late = new Set(lateDuplicates.map(r => r.ingestId));
		for (const r of moved)
			if (r.status === "INGESTED" && movedAs.get(r.ingestId) === "DUPLICATE")
				late.add(r.ingestId);
		const finalById = new Map([...movedAs, ...finals.map(f => [f.id, f.status] as const)]);
		const answers = results.map((r): SettleAnswer => {
			const row = byId.get(r.ingestId);
			if (stored.has(r.ingestId)) return { ingestId: r.ingestId, status: "INGESTED" };
			if (late.has(r.ingestId))
				return {
					ingestId: r.ingestId,
					status: "DUPLICATE",
					...(row?.target ? { moveAside: row.target } : {})
				};
			return {
				ingestId: r.ingestId,
				status: finalById.get(r.ingestId) ?? row?.status ?? "UNKNOWN"
			};
		});
		// the INGEST events, written processed with the jobs their rules make (lib/triggers)
		const triggered = await recordFileEvents(
			db,
			sql,
			storedRows
				.sort((a, b) => a.id - b.id)
				.map(row => ({
					type: "INGEST" as const,
					description: {
						version: "1.0",
						file_id: row.source_file_id,
						file_name: row.file_name,
						ingest_id: row.id,
						strike_id: call.strikeId
					},
					occurred: row.ingest_ended,
					file: {
						id: row.source_file_id,
						media_type: row.media_type,
						data_type: row.data_type,
						file_size: row.file_size,
						is_deleted: false
					}
				}))
		);
		return { answers, triggered };
	});
}
