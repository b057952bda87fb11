import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import {
	COPY_EVENTS_SQL,
	MARK_PROCESSED_SQL,
	processFileEvents,
	recordFileEvents
} from "../../lib/triggers/process";
import { queueValidNewJobs } from "../../lib/jobs/new-job";
import { PIPELINED, transaction } from "../../lib/db/run";

/**
 * The triggers' matching over real PostgreSQL (processFileEvents): rules made through the REST
 * API as users make them, files and their events written as ingests and parses write them.
 */

let tdb: TestDatabase;
let app: TestApi;
let workspaceId: number;

async function query<T = any>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function jobType(
	name: string,
	rule: Record<string, unknown>,
	input: Record<string, unknown> = { name: "in", type: "file" }
): Promise<number> {
	const res = await request("POST", `${app.api}/job-types/`, {
		name,
		version: "1.0",
		interface: {
			command: "/bin/true",
			command_arguments: "${in}",
			input_data: [input],
			output_data: [{ name: "out", type: "file" }]
		},
		trigger_rule: rule
	});
	if (res.status !== 201) throw new Error(`${name}: ${res.status} ${res.text}`);
	return res.body.id;
}

const fileRule = (type: string, condition: Record<string, unknown>, isActive = true) => ({
	type,
	is_active: isActive,
	configuration: { condition, data: { input_data_name: "in", workspace_name: "w" } }
});

/** A source file and its (unprocessed) event of `type`; answers the event's id and the file's. */
async function fileEvent(
	name: string,
	mediaType: string,
	dataTypes: string[],
	type = "INGEST"
): Promise<{ fileId: number; eventId: number }> {
	const [file] = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			data_type, uuid)
		 VALUES ('SOURCE', $1, $2::text, $2::text, $3, $4::text[], md5($2::text)) RETURNING id`,
		[workspaceId, name, mediaType, `{${dataTypes.join(",")}}`]
	);
	const [event] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type, description)
		 VALUES ($1, jsonb_build_object('version', '1.0', 'file_id', $2::int, 'file_name', $3::text))
		 RETURNING id`,
		[type, file.id, name]
	);
	return { fileId: file.id, eventId: event.id };
}

/** Each job of the events' files: its job type, its event's rule, its input and output data. */
/** A source file written in SQL, with the columns a file event's rules match on. */
async function newSource(
	name: string,
	mediaType: string,
	dataTypes: string[] = [],
	deleted = false
) {
	const [row] = await query<{
		id: number;
		media_type: string;
		data_type: string[];
		file_size: string;
		is_deleted: boolean;
	}>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			data_type, uuid, is_deleted)
		 VALUES ('SOURCE', $1, $2::text, $2::text, $3, $4::text[], md5($2::text), $5)
		 RETURNING id, media_type, data_type, file_size, is_deleted`,
		[workspaceId, name, mediaType, `{${dataTypes.join(",")}}`, deleted]
	);
	return row;
}

async function jobsFor(fileIds: number[]) {
	return query<{
		job_type_id: number;
		status: string;
		event_type: string;
		rule_id: number | null;
		file_id: number;
		output_workspace: number;
	}>(
		`SELECT j.job_type_id, j.status, e.type AS event_type, e.rule_id,
			(j.data->'input_data'->0->>'file_id')::int AS file_id,
			(j.data->'output_data'->0->>'workspace_id')::int AS output_workspace
		 FROM job j JOIN trigger_event e ON e.id = j.event_id
		 WHERE (j.data->'input_data'->0->>'file_id')::int = ANY($1::int[])
		 ORDER BY j.id`,
		[fileIds]
	);
}

const ruleOf = async (jobTypeId: number) =>
	(
		await query<{ trigger_rule_id: number }>(
			`SELECT trigger_rule_id FROM job_type WHERE id = $1`,
			[jobTypeId]
		)
	)[0].trigger_rule_id;

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "workspaces", "job-types", "recipe-types"]);
	const ws = await request("POST", `${app.api}/workspaces/`, {
		name: "w",
		// a directory of its own: the temp folder itself may hold the service's data directory
		json_config: {
			version: "1.0",
			broker: { type: "host", host_path: fs.mkdtempSync(path.join(os.tmpdir(), "ws-")) }
		}
	});
	workspaceId = ws.body.id;
}, 30000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("processFileEvents", () => {
	let pngOnly: number;
	let tagged: number;
	let anyIngest: number;
	let paused: number;
	let parse: number;
	let textInput: number;

	beforeAll(async () => {
		pngOnly = await jobType("png-only", fileRule("INGEST", { media_type: "image/png" }));
		tagged = await jobType("tagged", fileRule("INGEST", { data_types: ["a", "b"] }));
		anyIngest = await jobType("any-ingest", fileRule("INGEST", {}));
		paused = await jobType("paused-rule", fileRule("INGEST", {}, false));
		parse = await jobType("on-parse", fileRule("PARSE", { data_types: ["parsed"] }));
		// an input that takes only text: a PNG given to it is refused, alone
		textInput = await jobType("text-input", fileRule("INGEST", { media_type: "image/png" }), {
			name: "in",
			type: "file",
			media_types: ["text/plain"]
		});
	});

	it("creates a job per matching rule, each with its event naming the rule, and processes each event once", async () => {
		const png = await fileEvent("a.png", "image/png", ["a"]);
		const tiff = await fileEvent("b.tif", "image/tiff", ["a", "b", "c"]);
		const parsed = await fileEvent("c.txt", "text/plain", ["parsed"], "PARSE");
		const done = await processFileEvents(tdb.db);
		expect(done.events).toBe(3);
		expect(done.refused).toEqual([
			expect.objectContaining({ eventId: png.eventId, ruleId: await ruleOf(textInput) })
		]);
		expect(done.refused[0].reason).toMatch(/media type/i);

		const jobs = await jobsFor([png.fileId, tiff.fileId, parsed.fileId]);
		const summary = jobs.map(j => [j.file_id, j.job_type_id]);
		expect(summary).toEqual(
			expect.arrayContaining([
				[png.fileId, pngOnly],
				[png.fileId, anyIngest],
				[tiff.fileId, tagged],
				[tiff.fileId, anyIngest],
				[parsed.fileId, parse]
			])
		);
		expect(jobs).toHaveLength(5);
		// the paused rule matched nothing; every job is QUEUED, its outputs in the rule's workspace
		expect(jobs.some(j => j.job_type_id === paused)).toBe(false);
		for (const job of jobs) {
			expect(job.status).toBe("QUEUED");
			expect(job.output_workspace).toBe(workspaceId);
			expect(job.rule_id).toBe(await ruleOf(job.job_type_id));
		}
		expect(jobs.find(j => j.file_id === parsed.fileId)!.event_type).toBe("PARSE");

		const waiting = await query(`SELECT id FROM trigger_event WHERE processed IS NULL`);
		expect(waiting).toEqual([]);
		expect(await processFileEvents(tdb.db)).toEqual({
			events: 0,
			jobs: 0,
			recipes: 0,
			refused: []
		});
		expect(await jobsFor([png.fileId, tiff.fileId, parsed.fileId])).toHaveLength(5);
	});

	it("writes a new file's events processed with their rules' jobs, in the caller's transaction (recordFileEvents)", async () => {
		const png = await newSource("new.png", "image/png");
		const plain = await newSource("new.dat", "application/octet-stream");
		const event = (f: typeof png) => ({
			type: "INGEST" as const,
			description: { version: "1.0", file_id: f.id, file_name: `file ${f.id}` },
			occurred: new Date(),
			file: f
		});
		// a transaction that fails after them leaves neither events nor jobs
		await expect(
			transaction(tdb.db, async t => {
				await recordFileEvents(tdb.db, t, [event(png)]);
				throw new Error("the ingest's transaction fails");
			})
		).rejects.toThrow("the ingest's transaction fails");
		expect(await jobsFor([png.id])).toEqual([]);

		const done = await transaction(tdb.db, t =>
			recordFileEvents(tdb.db, t, [event(png), event(plain)])
		);
		// png-only, any-ingest and text-input (refused) match the PNG; any-ingest the other
		expect(done).toMatchObject({ events: 2, jobs: 3, recipes: 0 });
		expect(done.refused).toEqual([
			expect.objectContaining({ ruleId: await ruleOf(textInput) })
		]);
		const jobs = await jobsFor([png.id, plain.id]);
		expect(jobs.map(j => [j.file_id, j.job_type_id])).toEqual(
			expect.arrayContaining([
				[png.id, pngOnly],
				[png.id, anyIngest],
				[plain.id, anyIngest]
			])
		);
		expect(jobs).toHaveLength(3);
		for (const job of jobs) {
			expect(job.status).toBe("QUEUED");
			expect(job.rule_id).toBe(await ruleOf(job.job_type_id));
		}
		// one event per file, written processed: nothing is left for processFileEvents
		const events = await query<{ file_id: number; processed: Date | null }>(
			`SELECT (description->>'file_id')::int AS file_id, processed FROM trigger_event
			 WHERE (description->>'file_id')::int = ANY($1::int[]) ORDER BY id`,
			[[png.id, plain.id]]
		);
		expect(events.map(e => e.file_id).sort()).toEqual(
			[png.id, png.id, png.id, plain.id].sort()
		);
		expect(events.every(e => e.processed !== null)).toBe(true);
		expect((await processFileEvents(tdb.db)).events).toBe(0);
	});

	it("shares the waiting events between concurrent consumers, none twice", async () => {
		const files = [];
		for (let i = 0; i < 60; i++) files.push(await fileEvent(`many-${i}.tif`, "image/tiff", []));
		const runs = await Promise.all([1, 2, 3].map(() => processFileEvents(tdb.db, 7)));
		let total = runs.reduce((n, r) => n + r.events, 0);
		while (total < 60) {
			const more = await processFileEvents(tdb.db, 7);
			expect(more.events).toBeGreaterThan(0);
			total += more.events;
		}
		expect(total).toBe(60);
		const jobs = await jobsFor(files.map(f => f.fileId));
		// one rule (any-ingest) matches a TIFF without data types: one job per file
		expect(jobs.map(j => j.file_id).sort()).toEqual(files.map(f => f.fileId).sort());
	});

	it("leaves events of other types alone", async () => {
		await query(
			`INSERT INTO trigger_event (type, description) VALUES ('SOMETHING_ELSE', '{}')`
		);
		expect((await processFileEvents(tdb.db)).events).toBe(0);
		const [left] = await query<{ n: number }>(
			`SELECT count(*)::int AS n FROM trigger_event WHERE processed IS NULL`
		);
		expect(left.n).toBe(1);
	});

	it("processes an event whose description names no file by an integer, matching nothing", async () => {
		const real = await fileEvent("d.tif", "image/tiff", []);
		const odd = await query<{ id: number }>(
			`INSERT INTO trigger_event (type, description) VALUES
				('INGEST', jsonb_build_object('file_id', $1::text)),
				('INGEST', jsonb_build_object('file_id', $1::int + 0.5)),
				('INGEST', '{}')
			 RETURNING id`,
			[real.fileId]
		);
		const done = await processFileEvents(tdb.db);
		expect(done.events).toBe(4);
		// the real one's job only (any-ingest matches it); the three others matched nothing
		expect(done.jobs).toBe(1);
		expect((await jobsFor([real.fileId])).length).toBe(1);
		const rows = await query<{ processed: Date | null; rule_id: number | null }>(
			"SELECT processed, rule_id FROM trigger_event WHERE id = ANY($1::int[])",
			[odd.map(o => o.id)]
		);
		expect(rows).toEqual([
			{ processed: expect.any(Date), rule_id: null },
			{ processed: expect.any(Date), rule_id: null },
			{ processed: expect.any(Date), rule_id: null }
		]);
	});

	it("gives each of a rule's jobs its own file, a files input its one-element list", async () => {
		const many = await jobType("files-input", fileRule("INGEST", { data_types: ["multi"] }), {
			name: "in",
			type: "files"
		});
		const first = await fileEvent("m1.dat", "application/octet-stream", ["multi"]);
		const second = await fileEvent("m2.dat", "application/octet-stream", ["multi"]);
		await processFileEvents(tdb.db);
		const data = await query<{ data: any }>(
			"SELECT data FROM job WHERE job_type_id = $1 ORDER BY id",
			[many]
		);
		expect(data.map(d => d.data)).toEqual([
			{
				version: "1.0",
				input_data: [{ name: "in", file_ids: [first.fileId] }],
				output_data: [{ name: "out", workspace_id: workspaceId }]
			},
			{
				version: "1.0",
				input_data: [{ name: "in", file_ids: [second.fileId] }],
				output_data: [{ name: "out", workspace_id: workspaceId }]
			}
		]);
	});

	it("refuses every job of a template whose document does not fit, and no other", async () => {
		const file = await fileEvent("t.tif", "image/tiff", []);
		const doc = (input: string) => ({
			version: "1.0",
			input_data: [{ name: input, file_id: file.fileId }],
			output_data: [{ name: "out", workspace_id: workspaceId }]
		});
		const answers = await transaction(tdb.db, t =>
			queueValidNewJobs(tdb.db, t, [
				{ jobTypeId: anyIngest, jobData: doc("nope"), dataTemplate: "x", dataField: "r" },
				{ jobTypeId: anyIngest, jobData: doc("in"), dataTemplate: "x", dataField: "r" },
				{ jobTypeId: anyIngest, jobData: doc("in") }
			])
		);
		expect(answers[0]).toBeInstanceOf(Error);
		expect((answers[0] as Error).message).toMatch(/"nope" is not an input/);
		// the template is its first document: the second, which fits, is refused with it
		expect(answers[1]).toBe(answers[0]);
		expect(answers[2]).toEqual(expect.objectContaining({ jobId: expect.any(Number) }));
	});

	it("makes the recipes of recipe types' rules together, a refused one alone", async () => {
		const post = async (path: string, body: unknown) => {
			const res = await request("POST", `${app.api}${path}`, body);
			if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
			return res.body;
		};
		await post("/job-types/", {
			name: "recipe-step",
			version: "1.0",
			interface: {
				command: "/bin/true",
				command_arguments: "${in}",
				input_data: [{ name: "in", type: "file" }],
				output_data: []
			}
		});
		const type = await post("/recipe-types/", {
			name: "on-ingest-together",
			version: "1.0",
			definition: {
				version: "1.0",
				input_data: [{ name: "image", type: "file" }],
				jobs: [
					{
						name: "step",
						job_type: { name: "recipe-step", version: "1.0" },
						recipe_inputs: [{ recipe_input: "image", job_input: "in" }]
					}
				]
			},
			trigger_rule: {
				type: "INGEST",
				configuration: {
					condition: { data_types: ["for-recipe"] },
					data: { input_data_name: "image", workspace_name: "w" }
				}
			}
		});
		const first = await fileEvent("together-1.png", "image/png", ["for-recipe"]);
		const gone = await fileEvent("together-gone.png", "image/png", ["for-recipe"]);
		const second = await fileEvent("together-2.png", "image/png", ["for-recipe"]);
		// deleted after its event: the recipe's data names a file that no longer exists
		await query(`UPDATE scale_file SET is_deleted = true WHERE id = $1`, [gone.fileId]);

		const done = await processFileEvents(tdb.db);
		expect(done.recipes).toBe(2);
		const [{ trigger_rule_id: ruleId }] = await query<{ trigger_rule_id: number }>(
			`SELECT trigger_rule_id FROM recipe_type WHERE id = $1`,
			[type.id]
		);
		// (the job types' rules of the tests above match these files too, and refuse the gone one)
		const refused = done.refused.filter(r => r.ruleId === ruleId);
		expect(refused).toEqual([
			{
				eventId: gone.eventId,
				ruleId,
				reason: `recipe_data.input_data[0].file_id: file ${gone.fileId} does not exist`
			}
		]);
		// each recipe's event names the rule (a copy of the file's event where another rule
		// matched it first, as Scale made one event per rule)
		const recipes = await query<{
			rule_id: number;
			event_file: number;
			file_id: number;
			jobs: number;
		}>(
			`SELECT e.rule_id, (e.description->>'file_id')::int AS event_file,
				(r.data->'input_data'->0->>'file_id')::int AS file_id,
				(SELECT count(*)::int FROM recipe_job rj WHERE rj.recipe_id = r.id) AS jobs
			 FROM recipe r JOIN trigger_event e ON e.id = r.event_id
			 WHERE r.recipe_type_id = $1 ORDER BY r.id`,
			[type.id]
		);
		expect(recipes).toEqual([
			{ rule_id: ruleId, event_file: first.fileId, file_id: first.fileId, jobs: 1 },
			{ rule_id: ruleId, event_file: second.fileId, file_id: second.fileId, jobs: 1 }
		]);
		// every event is processed, the refused one's too
		const [left] = await query<{ n: number }>(
			`SELECT count(*)::int AS n FROM trigger_event WHERE id = ANY($1::int[]) AND processed IS NULL`,
			[[first.eventId, gone.eventId, second.eventId]]
		);
		expect(left.n).toBe(0);
	});
});

describe("the events' statements at scale", () => {
	/** The tables a statement's plan scans whole. */
	async function scannedWhole(sql: string, bind: unknown[]): Promise<string[]> {
		const [[row]] = (await tdb.db.query(`EXPLAIN (FORMAT JSON) ${sql}`, { bind })) as [
			{ "QUERY PLAN": unknown }[],
			unknown
		];
		const tables: string[] = [];
		const walk = (node: any) => {
			if (node["Node Type"] === "Seq Scan") tables.push(node["Relation Name"]);
			for (const child of node.Plans ?? []) walk(child);
		};
		walk((row["QUERY PLAN"] as any)[0].Plan);
		return tables;
	}

	it("makes a recipe rule's recipes in a pipelined transaction too, a refused one alone (recordFileEvents)", async () => {
		const [{ id: typeId, trigger_rule_id: ruleId }] = await query<{
			id: number;
			trigger_rule_id: number;
		}>(`SELECT id, trigger_rule_id FROM recipe_type WHERE name = 'on-ingest-together'`);
		const kept = await newSource("piped-1.png", "image/png", ["for-recipe"]);
		const gone = await newSource("piped-gone.png", "image/png", ["for-recipe"], true);
		const done = await transaction(tdb.db, PIPELINED, t =>
			recordFileEvents(
				tdb.db,
				t,
				[kept, gone].map(f => ({
					type: "INGEST" as const,
					description: { version: "1.0", file_id: f.id },
					occurred: new Date(),
					file: f
				}))
			)
		);
		expect(done.recipes).toBe(1);
		expect(done.refused.filter(r => r.ruleId === ruleId)).toEqual([
			expect.objectContaining({
				reason: `recipe_data.input_data[0].file_id: file ${gone.id} does not exist`
			})
		]);
		const recipes = await query<{ file_id: number; rule_id: number; processed: boolean }>(
			`SELECT (r.data->'input_data'->0->>'file_id')::int AS file_id, e.rule_id,
				e.processed IS NOT NULL AS processed
			 FROM recipe r JOIN trigger_event e ON e.id = r.event_id
			 WHERE r.recipe_type_id = $1 AND (r.data->'input_data'->0->>'file_id')::int = ANY($2::int[])`,
			[typeId, [kept.id, gone.id]]
		);
		expect(recipes).toEqual([{ file_id: kept.id, rule_id: ruleId, processed: true }]);
	});

	it("reads a batch's events by key among 40,000, not by a scan of the table", async () => {
		await query(
			`INSERT INTO trigger_event (type, description, occurred, processed)
			 SELECT 'INGEST', jsonb_build_object('file_name', 'old-' || n), now(), now()
			 FROM generate_series(1, 40000) n`
		);
		await query("ANALYZE trigger_event");
		const [{ max }] = await query<{ max: number }>("SELECT max(id) AS max FROM trigger_event");
		const ids = Array.from({ length: 500 }, (_, i) => max - i);
		const rules = ids.map(() => null);
		expect(await scannedWhole(MARK_PROCESSED_SQL, [ids, rules])).toEqual([]);
		expect(await scannedWhole(COPY_EVENTS_SQL, [ids, rules])).toEqual([]);
		// the join alone, as before: the check above can fail
		expect(
			await scannedWhole(MARK_PROCESSED_SQL.replace("e.id = ANY($1::int[]) AND ", ""), [
				ids,
				rules
			])
		).toEqual(["trigger_event"]);
	});
});
