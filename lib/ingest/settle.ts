import type { Sequelize } from "sequelize";
import { intArray } from "../db/array-literal";
import { PIPELINED, transaction } from "../db/run";
import { guard } from "./guard";
import { OPEN_STATUSES } from "./record";
import { recordFileEvents, type Processed } from "../triggers/process";
import type { MonitorCall, SettleAnswer, Settled } from "./protocol";

/**
 * The `ingest` service's side of a strike's monitor once its files are moved
 * (lib/ingest/protocol.ts): copies about to run shown INGESTING, and what became of each file
 * settled, its source file, INGEST event and jobs written with it. Each call is one pipelined
 * transaction guarded, as the arrivals' (lib/ingest/record.ts), by the caller being the strike
 * job's live execution.
 */

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
