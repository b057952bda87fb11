import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { monitorSetup, recordArrivals } from "../../lib/ingest/record";
import { recordIngesting, settleIngests } from "../../lib/ingest/settle";
import type { ArrivedFile, MonitorCall } from "../../lib/ingest/protocol";

/**
 * The `ingest` service's side of a monitor (lib/ingest/record.ts, settle.ts) over real PostgreSQL: a file
 * that arrives whole is a move under way (`ingest_move`) until the monitor reports it stored,
 * and its ingest row is then written once; what a monitor that dies mid-move finds again; a
 * repeated report; a source file of the same name stored meanwhile; a file lost mid-move; a file
 * that was TRANSFERRING, whose ingest row exists, goes through INGESTING as before.
 */

let tdb: TestDatabase;
let call: MonitorCall;
const AGENT = "agent-1";
const HOST = "/data/raw";

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

const arrived = (name: string, size = 10): ArrivedFile => ({
	name,
	size,
	transferStarted: "2026-11-27T10:00:00.000Z",
	transferEnded: "2026-11-27T10:00:01.000Z"
});

const when = new Date("2026-11-27T10:00:02Z");

beforeAll(async () => {
	tdb = await createTestDatabase();
	const [ws] = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config) VALUES ('raw', $1) RETURNING id`,
		[JSON.stringify({ version: "1.0", broker: { type: "host", host_path: HOST } })]
	);
	const [type] = await query<{ id: number; rev: number }>(
		`SELECT t.id, r.id AS rev FROM job_type t JOIN job_type_rev r ON r.job_type_id = t.id
		 WHERE t.name = 'scale-strike'`
	);
	const [event] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type) VALUES ('STRIKE_CREATED') RETURNING id`
	);
	const [job] = await query<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
			timeout, max_tries, data)
		 VALUES ($1, $2, $3, 'RUNNING', 5, 1, 0, 1, '{}') RETURNING id`,
		[type.id, type.rev, event.id]
	);
	const [exe] = await query<{ id: number }>(
		`INSERT INTO job_exe (job_id, job_type_id, timeout, status, agent_id)
		 VALUES ($1, $2, 0, 'RUNNING', $3) RETURNING id`,
		[job.id, type.id, AGENT]
	);
	const configuration = {
		version: "1.0",
		mount: "/data/incoming",
		transfer_suffix: "_tmp",
		files_to_ingest: [
			// as the configuration's document stores them: data_types filled in
			{
				filename_regex: ".*\\.txt$",
				workspace_path: "t",
				workspace_name: "raw",
				data_types: []
			},
			{
				filename_regex: ".*\\.gone$",
				workspace_path: "g",
				workspace_name: "nowhere",
				data_types: []
			}
		]
	};
	const [strike] = await query<{ id: number }>(
		`INSERT INTO strike (name, configuration, job_id) VALUES ('s', $1, $2) RETURNING id`,
		[JSON.stringify(configuration), job.id]
	);
	call = { strikeId: strike.id, jobExeId: exe.id };
	expect(ws.id).toBeGreaterThan(0);
}, 60000);

afterAll(async () => {
	await tdb?.drop();
});

const ingestsOf = (name: string) =>
	query<{
		id: number;
		status: string;
		source_file_id: number | null;
		ingest_started: Date;
		created: Date;
	}>(
		`SELECT id, status, source_file_id, ingest_started, ingest_ended, file_path, created
		 FROM ingest
		 WHERE file_name = $1 ORDER BY id`,
		[name]
	);

const movesOf = (name: string) =>
	query<{ id: number; file_path: string }>(
		`SELECT id, file_path FROM ingest_move WHERE file_name = $1`,
		[name]
	);

describe("a file that arrives whole", () => {
	it("is a move under way until stored, then one INGESTED ingest with its source file and event", async () => {
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("a.txt")], when);
		expect(decision).toMatchObject({
			name: "a.txt",
			action: "ingest",
			target: `${HOST}/t/2026/11/27/a.txt`
		});
		expect(await ingestsOf("a.txt")).toEqual([]);
		expect(await movesOf("a.txt")).toEqual([
			{ id: decision.ingestId, file_path: "t/2026/11/27/a.txt" }
		]);
		// a monitor that starts now finds it, with the place it is being moved to
		const setup = await monitorSetup(tdb.db, call, AGENT);
		expect(setup.open).toContainEqual({
			ingestId: decision.ingestId,
			fileName: "a.txt",
			status: "INGESTING",
			target: `${HOST}/t/2026/11/27/a.txt`
		});

		const settled = await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decision.ingestId, status: "INGESTED", size: 12 }
		]);
		expect(settled).toEqual({
			answers: [{ ingestId: decision.ingestId, status: "INGESTED" }],
			triggered: { events: 1, jobs: 0, recipes: 0, refused: [] }
		});
		const [ingest] = await ingestsOf("a.txt");
		expect(ingest).toMatchObject({ id: decision.ingestId, status: "INGESTED" });
		expect(ingest.ingest_started).not.toBeNull();
		// created when its move was decided, as when the arrival wrote the row
		expect(ingest.created).toEqual(ingest.ingest_started);
		expect(await movesOf("a.txt")).toEqual([]);
		const [file] = await query(
			`SELECT file_name, file_path, file_size, media_type, workspace_id FROM scale_file
			 WHERE id = $1`,
			[ingest.source_file_id]
		);
		expect(file).toMatchObject({
			file_name: "a.txt",
			file_path: "t/2026/11/27/a.txt",
			file_size: "12",
			media_type: "text/plain"
		});
		// written processed (no rule matches it): no second write by the triggers service
		const events = await query(
			`SELECT description, processed IS NOT NULL AS processed, rule_id FROM trigger_event
			 WHERE type = 'INGEST' AND (description->>'ingest_id')::int = $1`,
			[decision.ingestId]
		);
		expect(events).toEqual([
			{
				processed: true,
				rule_id: null,
				description: {
					version: "1.0",
					file_id: ingest.source_file_id,
					file_name: "a.txt",
					ingest_id: decision.ingestId,
					strike_id: call.strikeId
				}
			}
		]);

		// the same report again (its answer lost) changes nothing
		const again = await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decision.ingestId, status: "INGESTED", size: 12 }
		]);
		expect(again).toEqual({
			answers: [{ ingestId: decision.ingestId, status: "INGESTED" }],
			triggered: { events: 0, jobs: 0, recipes: 0, refused: [] }
		});
		expect(await ingestsOf("a.txt")).toHaveLength(1);
	});

	it("keeps its target when it is seen again before its move is reported", async () => {
		const [first] = await recordArrivals(tdb.db, call, AGENT, [arrived("b.txt")], when);
		const later = new Date("2026-11-28T00:00:05Z");
		const [second] = await recordArrivals(tdb.db, call, AGENT, [arrived("b.txt")], later);
		expect(second).toEqual(first);
		expect(await movesOf("b.txt")).toHaveLength(1);
	});

	it("is a DUPLICATE to move aside when a source file of its name and size was stored meanwhile", async () => {
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("c.txt")], when);
		await query(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				file_size, data_type, uuid)
			 SELECT 'SOURCE', id, 'c.txt', 'elsewhere/c.txt', 'text/plain', 10, '{}', md5('c')
			 FROM workspace WHERE name = 'raw'`
		);
		const settled = await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decision.ingestId, status: "INGESTED", size: 10 }
		]);
		expect(settled).toEqual({
			answers: [
				{
					ingestId: decision.ingestId,
					status: "DUPLICATE",
					moveAside: `${HOST}/t/2026/11/27/c.txt`
				}
			],
			triggered: { events: 0, jobs: 0, recipes: 0, refused: [] }
		});
		expect(await ingestsOf("c.txt")).toMatchObject([
			{ id: decision.ingestId, status: "DUPLICATE", source_file_id: null }
		]);
		expect(await movesOf("c.txt")).toEqual([]);
	});

	it("is a new source file beside the first when its name is reused by a file of another size", async () => {
		const [first] = await recordArrivals(tdb.db, call, AGENT, [arrived("r.txt", 10)], when);
		await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: first.ingestId, status: "INGESTED", size: 10 }
		]);
		const [same] = await recordArrivals(tdb.db, call, AGENT, [arrived("r.txt", 10)], when);
		expect(same).toMatchObject({ status: "DUPLICATE" });
		const [other] = await recordArrivals(tdb.db, call, AGENT, [arrived("r.txt", 11)], when);
		expect(other).toMatchObject({ target: `${HOST}/t/2026/11/27/11/r.txt` });
		await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: other.ingestId, status: "INGESTED", size: 11 }
		]);
		const sources = await query<{ file_path: string; file_size: string }>(
			`SELECT file_path, file_size FROM scale_file
			 WHERE file_type = 'SOURCE' AND file_name = 'r.txt' ORDER BY id`
		);
		expect(sources).toEqual([
			{ file_path: "t/2026/11/27/r.txt", file_size: "10" },
			{ file_path: "t/2026/11/27/11/r.txt", file_size: "11" }
		]);
		expect((await ingestsOf("r.txt")).map(i => i.status)).toEqual(["INGESTED", "INGESTED"]);
	});

	it("is ERRORED with the reason when the monitor lost it mid-move", async () => {
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("d.txt")], when);
		const settled = await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decision.ingestId, status: "ERRORED", reason: "the file is lost" }
		]);
		expect(settled.answers).toEqual([{ ingestId: decision.ingestId, status: "ERRORED" }]);
		const [row] = await query(`SELECT status, error, ingest_ended FROM ingest WHERE id = $1`, [
			decision.ingestId
		]);
		expect(row).toMatchObject({ status: "ERRORED", error: "the file is lost" });
		expect(row.ingest_ended).not.toBeNull();
		expect(await movesOf("d.txt")).toEqual([]);
	});

	it("is an ingest row to move aside when no rule or workspace takes it", async () => {
		const decisions = await recordArrivals(
			tdb.db,
			call,
			AGENT,
			[arrived("e.bin"), arrived("e.gone")],
			when
		);
		expect(decisions).toMatchObject([
			{ name: "e.bin", action: "aside", status: "DEFERRED" },
			{ name: "e.gone", action: "aside", status: "ERRORED" }
		]);
		expect(await ingestsOf("e.bin")).toMatchObject([{ status: "TRANSFERRED" }]);
		expect(await movesOf("e.bin")).toEqual([]);
		await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decisions[0].ingestId, status: "DEFERRED" }
		]);
		expect(await ingestsOf("e.bin")).toMatchObject([{ status: "DEFERRED" }]);
	});

	it("is refused to a caller that is not the strike's running execution", async () => {
		await expect(
			recordArrivals(tdb.db, call, "another-agent", [arrived("f.txt")], when)
		).rejects.toMatchObject({ code: 409 });
		expect(await movesOf("f.txt")).toEqual([]);
	});
});

describe("a file to copy to another file system", () => {
	it("is an INGESTING ingest while it is copied, then INGESTED", async () => {
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("h.txt")], when);
		await recordIngesting(tdb.db, call, AGENT, [decision.ingestId]);
		expect(await movesOf("h.txt")).toEqual([]);
		const [ingest] = await ingestsOf("h.txt");
		expect(ingest).toMatchObject({
			id: decision.ingestId,
			status: "INGESTING",
			file_path: "t/2026/11/27/h.txt"
		});
		expect(ingest.ingest_started).not.toBeNull();
		// told twice (its answer lost): nothing more is written
		await recordIngesting(tdb.db, call, AGENT, [decision.ingestId]);
		expect(await ingestsOf("h.txt")).toHaveLength(1);
		const settled = await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: decision.ingestId, status: "INGESTED", size: 10 }
		]);
		expect(settled.answers).toEqual([{ ingestId: decision.ingestId, status: "INGESTED" }]);
		expect(await ingestsOf("h.txt")).toMatchObject([
			{ id: decision.ingestId, status: "INGESTED" }
		]);
	});

	it("is refused to a caller that is not the strike's running execution", async () => {
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("i.txt")], when);
		await expect(
			recordIngesting(tdb.db, call, "another-agent", [decision.ingestId])
		).rejects.toMatchObject({ code: 409 });
		expect(await movesOf("i.txt")).toHaveLength(1);
	});
});

describe("a file that was TRANSFERRING", () => {
	it("has its ingest row go through INGESTING to INGESTED", async () => {
		const [open] = await query<{ id: number }>(
			`INSERT INTO ingest (file_name, strike_id, status, bytes_transferred)
			 VALUES ('g.txt', $1, 'TRANSFERRING', 5) RETURNING id`,
			[call.strikeId]
		);
		const [decision] = await recordArrivals(tdb.db, call, AGENT, [arrived("g.txt")], when);
		expect(decision).toMatchObject({ ingestId: open.id, action: "ingest" });
		expect(await ingestsOf("g.txt")).toMatchObject([{ id: open.id, status: "INGESTING" }]);
		expect(await movesOf("g.txt")).toEqual([]);
		await settleIngests(tdb.db, call, AGENT, [
			{ ingestId: open.id, status: "INGESTED", size: 10 }
		]);
		expect(await ingestsOf("g.txt")).toMatchObject([{ id: open.id, status: "INGESTED" }]);
	});
});
