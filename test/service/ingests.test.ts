import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/**
 * Ingests over real HTTP and PostgreSQL: the list with every filter and order, the details by id
 * and by file name, and the status per strike in hour slots, on rows inserted here with the
 * answers worked out by hand.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;
const ids = { raw: 0, out: 0, a: 0, b: 0, c: 0, strikeType: 0, job: 0, alpha: 0, beta: 0 };
/** i[1] .. i[6], in insertion (id) order; i[0] unused */
const i: number[] = [0];

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function get(pathAndQuery: string): Promise<any> {
	const reply = await request("GET", `${api}${pathAndQuery}`);
	if (reply.status !== 200) throw new Error(`GET ${pathAndQuery}: ${reply.status} ${reply.text}`);
	return reply.body;
}

async function listIds(pathAndQuery: string): Promise<number[]> {
	return (await get(pathAndQuery)).results.map((r: any) => r.id);
}

const CONFIGURATION = {
	version: "1.0",
	mount: "host:/transfer",
	mount_on: "/mounts/transfer",
	transfer_suffix: "_tmp",
	files_to_ingest: [
		{ filename_regex: ".*", workspace_path: "in", workspace_name: "raw", data_types: [] }
	]
};

beforeAll(async () => {
	tdb = await createTestDatabase();
	const ws = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config, base_url) VALUES
			('raw', '{}', 'https://host/raw/'), ('out', '{}', NULL) RETURNING id`
	);
	[ids.raw, ids.out] = ws.map(w => w.id);
	const files = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, data_started, data_ended, is_parsed, parsed, created, last_modified)
		 VALUES
			('SOURCE', $1, 'a.tif', 'in/a.tif', 'image/tiff', 10, md5('a'),
				'2024-01-01T01:15:00Z', '2024-01-01T01:20:00Z', true, '2024-01-01T02:20:00Z',
				'2024-01-01T02:10:00Z', '2024-01-01T02:20:00Z'),
			('SOURCE', $2, 'b.tif', 'in/b.tif', 'image/tiff', 20, md5('b'),
				'2024-01-01T03:40:00Z', NULL, false, NULL,
				'2024-01-01T04:05:00Z', '2024-01-01T04:05:00Z'),
			('SOURCE', $1, 'c.tif', 'in/c.tif', 'image/tiff', 30, md5('c'),
				NULL, NULL, false, NULL, '2024-01-01T02:50:00Z', '2024-01-01T02:50:00Z')
		 RETURNING id`,
		[ids.raw, ids.out]
	);
	[ids.a, ids.b, ids.c] = files.map(f => f.id);

	// the system job type migration 0007 made
	[{ id: ids.strikeType }] = await query<{ id: number }>(
		`SELECT id FROM job_type WHERE name = 'scale-strike'`
	);
	const [rev] = await query<{ id: number }>(
		`SELECT id FROM job_type_rev WHERE job_type_id = $1`,
		[ids.strikeType]
	);
	const [event] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type) VALUES ('STRIKE_CREATED') RETURNING id`
	);
	const [job] = await query<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
			timeout, max_tries, data)
		 VALUES ($1, $2, $3, 'RUNNING', 5, 3, 0, 1, '{}') RETURNING id`,
		[ids.strikeType, rev.id, event.id]
	);
	ids.job = job.id;
	const strikes = await query<{ id: number }>(
		`INSERT INTO strike (name, title, description, configuration, job_id, created,
			last_modified)
		 VALUES ('alpha', 'Alpha', 'The first feed', $1, $2, '2023-12-01T00:00:00Z',
				'2023-12-02T00:00:00Z'),
			('beta', NULL, NULL, '{}', NULL, '2023-12-03T00:00:00Z', '2023-12-03T00:00:00Z')
		 RETURNING id`,
		[JSON.stringify(CONFIGURATION), ids.job]
	);
	[ids.alpha, ids.beta] = strikes.map(s => s.id);

	// file, strike, status, size, ingest started, ingest ended, source, created, last modified
	const rows: [string, number, string, number, ...(string | number | null)[]][] = [
		["a.tif", ids.alpha, "INGESTED", 10, "02:00", "02:10", ids.a, "01:00", "02:10"],
		["b.tif", ids.alpha, "INGESTED", 20, "04:00", "04:05", ids.b, "03:00", "04:05"],
		["c.tif", ids.beta, "INGESTED", 30, "02:30", "02:50", ids.c, "02:00", "02:50"],
		["d.tif", ids.beta, "ERRORED", 40, "05:00", null, null, "04:30", "05:00"],
		["a.tif", ids.beta, "DUPLICATE", 10, null, null, null, "05:30", "05:30"],
		["e.tif", ids.alpha, "TRANSFERRING", 50, null, null, null, "00:30", "00:40"]
	];
	const at = (t: string | number | null) => (t === null ? null : `2024-01-01T${t}:00Z`);
	for (const [name, strike, status, size, started, ended, source, created, modified] of rows) {
		const [row] = await query<{ id: number }>(
			`INSERT INTO ingest (file_name, strike_id, status, bytes_transferred, transfer_started,
				transfer_ended, media_type, file_size, data_type, transfer_path, file_path,
				ingest_path, workspace_id, ingest_started, ingest_ended, source_file_id, created,
				last_modified)
			 VALUES ($1::text, $2, $3, $4, $5, $5, 'image/tiff', $4, '{raw}',
				'/mounts/transfer/' || $1::text, 'in/' || $1::text,
				'/mounts/transfer/ingesting/' || $1::text, $6,
				$7, $8, $9, $10, $11) RETURNING id`,
			[
				name,
				strike,
				status,
				size,
				at(created),
				ids.raw,
				at(started),
				at(ended),
				source,
				at(created),
				at(modified)
			]
		);
		i.push(row.id);
	}
	app = await startServices(tdb.url, ["api", "ingest"]);
	api = app.api;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("GET /ingests/", () => {
	it("lists ingests by last change, oldest first as Scale, with strike and source file", async () => {
		const body = await get("/ingests/");
		expect(body.count).toBe(6);
		expect(body.results.map((r: any) => r.id)).toEqual([i[6], i[1], i[3], i[2], i[4], i[5]]);
		const [a] = await query(`SELECT uuid FROM scale_file WHERE id = $1`, [ids.a]);
		expect(body.results[1]).toEqual({
			id: i[1],
			file_name: "a.tif",
			strike: {
				id: ids.alpha,
				name: "alpha",
				title: "Alpha",
				description: "The first feed",
				job: { id: ids.job }
			},
			status: "INGESTED",
			bytes_transferred: 10,
			transfer_started: "2024-01-01T01:00:00.000Z",
			transfer_ended: "2024-01-01T01:00:00.000Z",
			media_type: "image/tiff",
			file_size: 10,
			data_type: ["raw"],
			ingest_started: "2024-01-01T02:00:00.000Z",
			ingest_ended: "2024-01-01T02:10:00.000Z",
			source_file: {
				id: ids.a,
				workspace: { id: ids.raw, name: "raw" },
				file_name: "a.tif",
				media_type: "image/tiff",
				file_size: 10,
				data_type: [],
				is_deleted: false,
				uuid: a.uuid,
				url: "https://host/raw/in/a.tif",
				created: "2024-01-01T02:10:00.000Z",
				deleted: null,
				data_started: "2024-01-01T01:15:00.000Z",
				data_ended: "2024-01-01T01:20:00.000Z",
				geometry: null,
				center_point: null,
				meta_data: {},
				countries: [],
				last_modified: "2024-01-01T02:20:00.000Z",
				is_parsed: true,
				parsed: "2024-01-01T02:20:00.000Z"
			},
			created: "2024-01-01T01:00:00.000Z",
			last_modified: "2024-01-01T02:10:00.000Z"
		});
		// no job, no source file
		const e = body.results[0];
		expect(e.strike).toEqual({
			id: ids.alpha,
			name: "alpha",
			title: "Alpha",
			description: "The first feed",
			job: { id: ids.job }
		});
		expect(e.source_file).toBeNull();
		expect(body.results[4].strike).toEqual({
			id: ids.beta,
			name: "beta",
			title: null,
			description: null,
			job: null
		});
		// a workspace without a base URL: the API's download route, under the request's root
		const b = body.results[3].source_file;
		expect(b.url).toBe(`${api}/files/${ids.b}/download/`);
		const v3 = await request("GET", `${api}/v3/ingests/?file_name=b.tif`);
		expect(v3.body.results[0].source_file.url).toBe(`${api}/v3/files/${ids.b}/download/`);
	});

	it("filters on status, strike_id and file_name, each repeatable", async () => {
		expect(await listIds("/ingests/?status=INGESTED")).toEqual([i[1], i[3], i[2]]);
		expect(await listIds("/ingests/?status=INGESTED&status=ERRORED")).toEqual([
			i[1],
			i[3],
			i[2],
			i[4]
		]);
		expect(await listIds(`/ingests/?strike_id=${ids.beta}`)).toEqual([i[3], i[4], i[5]]);
		expect(await listIds(`/ingests/?strike_id=${ids.alpha}&strike_id=${ids.beta}`)).toEqual([
			i[6],
			i[1],
			i[3],
			i[2],
			i[4],
			i[5]
		]);
		expect(await listIds("/ingests/?file_name=a.tif")).toEqual([i[1], i[5]]);
		expect(await listIds("/ingests/?file_name=a.tif&file_name=d.tif")).toEqual([
			i[1],
			i[4],
			i[5]
		]);
		expect(await listIds(`/ingests/?status=INGESTED&strike_id=${ids.beta}`)).toEqual([i[3]]);
		expect(await listIds("/ingests/?strike_id=999999")).toEqual([]);
	});

	it("filters started/ended on last_modified, as Scale", async () => {
		// created 01:00 and ingest_started 02:00 of the first lie outside; its change does not
		expect(
			await listIds("/ingests/?started=2024-01-01T02:10:00Z&ended=2024-01-01T04:05:00Z")
		).toEqual([i[1], i[3], i[2]]);
		expect(await listIds("/ingests/?started=2024-01-01T05:00:01Z")).toEqual([i[5]]);
		expect(await listIds("/ingests/?started=2024-01-01T06:00:00Z")).toEqual([]);
		expect(await listIds("/ingests/?ended=2024-01-01T00:40:00Z")).toEqual([i[6]]);
	});

	it("orders by fields, nested ones with __, ties by id", async () => {
		// descending puts ingests never started first, as PostgreSQL (and so Scale) does
		expect(await listIds("/ingests/?order=-ingest_started")).toEqual([
			i[6],
			i[5],
			i[4],
			i[2],
			i[3],
			i[1]
		]);
		expect(await listIds("/ingests/?order=strike__name&order=-file_name")).toEqual([
			i[6],
			i[2],
			i[1],
			i[4],
			i[3],
			i[5]
		]);
		expect(await listIds("/ingests/?order=source_file__data_started")).toEqual([
			i[1],
			i[2],
			i[3],
			i[4],
			i[5],
			i[6]
		]);
		expect(await listIds("/ingests/?order=-file_size")).toEqual([
			i[6],
			i[4],
			i[3],
			i[2],
			i[5],
			i[1]
		]);
		expect(await listIds("/ingests/?order=status&order=-id")).toEqual([
			i[5],
			i[4],
			i[3],
			i[2],
			i[1],
			i[6]
		]);
		expect(await listIds("/ingests/?order=-strike__id&order=created")).toEqual([
			i[3],
			i[4],
			i[5],
			i[6],
			i[1],
			i[2]
		]);
	});

	it("answers the web UI's request", async () => {
		const body = await get(
			"/ingests/?started=2024-01-01T00:00:00Z&ended=2024-01-01T05:10:00Z" +
				"&order=-ingest_started&page=1&page_size=25"
		);
		expect(body.count).toBe(5);
		expect(body.next).toBeNull();
		expect(body.results.map((r: any) => r.id)).toEqual([i[6], i[4], i[2], i[3], i[1]]);
	});

	it("pages", async () => {
		const body = await get("/ingests/?page=2&page_size=2");
		expect(body.count).toBe(6);
		expect(body.results.map((r: any) => r.id)).toEqual([i[3], i[2]]);
		expect(body.next).toMatch(/\/ingests\/\?page=3&page_size=2$/);
		expect(body.previous).toMatch(/\/ingests\/\?page=1&page_size=2$/);
	});

	it.each([
		["status=DONE", "status"],
		["strike_id=x", "strike_id"],
		["strike_id=1.5", "strike_id"],
		["order=nope", "order"],
		["order=strike__configuration", "order"],
		["started=yesterday", "started"],
		["ended=2024-01-01T00:00:00", "ended"],
		["page_size=0", "page_size"],
		["page=x", "page"]
	])("answers 400 naming the field for %s", async (q, field) => {
		expectJsonError(await request("GET", `${api}/ingests/?${q}`), 400, new RegExp(field));
	});
});

describe("GET /ingests/{id}/", () => {
	it("answers the details with paths, the strike with its job and configuration", async () => {
		const body = await get(`/ingests/${i[1]}/`);
		expect(Object.keys(body)).toEqual([
			"id",
			"file_name",
			"strike",
			"status",
			"bytes_transferred",
			"transfer_started",
			"transfer_ended",
			"media_type",
			"file_size",
			"data_type",
			"ingest_started",
			"ingest_ended",
			"source_file",
			"created",
			"last_modified",
			"scan_id",
			"shares_name_with",
			"transfer_path",
			"file_path",
			"ingest_path",
			"error"
		]);
		expect(body).toMatchObject({
			id: i[1],
			file_name: "a.tif",
			status: "INGESTED",
			transfer_path: "/mounts/transfer/a.tif",
			file_path: "in/a.tif",
			ingest_path: "/mounts/transfer/ingesting/a.tif",
			error: null
		});
		const [rev] = await query<{ id: number }>(
			`SELECT job_type_rev_id AS id FROM job WHERE id = $1`,
			[ids.job]
		);
		const [event] = await query<{ id: number }>(
			`SELECT event_id AS id FROM job WHERE id = $1`,
			[ids.job]
		);
		expect(body.strike).toEqual({
			id: ids.alpha,
			name: "alpha",
			title: "Alpha",
			description: "The first feed",
			job: {
				id: ids.job,
				job_type: {
					id: ids.strikeType,
					name: "scale-strike",
					version: "1.0",
					title: "Scale Strike",
					description: "Monitors a directory for incoming source files to ingest",
					category: "system",
					author_name: null,
					author_url: null,
					is_system: true,
					is_long_running: true,
					is_active: true,
					is_operational: true,
					is_paused: false,
					icon_code: "f0e7"
				},
				job_type_rev: { id: rev.id },
				event: { id: event.id },
				error: null,
				status: "RUNNING",
				priority: 5,
				num_exes: 3
			},
			created: "2023-12-01T00:00:00.000Z",
			last_modified: "2023-12-02T00:00:00.000Z",
			configuration: CONFIGURATION
		});
		const list = await get(`/ingests/?file_name=a.tif&status=INGESTED`);
		expect(body.source_file).toEqual(list.results[0].source_file);
	});

	it("shows a strike without a job, and an ingest without a source file", async () => {
		const body = await get(`/ingests/${i[4]}/`);
		expect(body.strike).toMatchObject({ id: ids.beta, job: null, configuration: {} });
		expect(body.source_file).toBeNull();
		expect(body.ingest_started).toBe("2024-01-01T05:00:00.000Z");
	});

	it("takes a file name: the ingest of that name created last, as Scale's view", async () => {
		expect((await get("/ingests/a.tif/")).id).toBe(i[5]);
		expect((await get("/ingests/d.tif/")).id).toBe(i[4]);
		expect((await request("GET", `${api}/v3/ingests/c.tif/`)).body.id).toBe(i[3]);
	});

	it.each(["999999", "99999999999", "nope.tif"])("answers 404 {detail} for %s", async ref => {
		expectJsonError(await request("GET", `${api}/ingests/${ref}/`), 404);
	});
});

/** An hour's slot of the status with its counts. */
function slot(hour: number, files = 0, size = 0) {
	return { time: `2024-01-01T${String(hour).padStart(2, "0")}:00:00.000Z`, files, size };
}

describe("GET /ingests/status/", () => {
	const range = "started=2024-01-01T00:00:00Z&ended=2024-01-01T05:59:59Z";

	it("groups INGESTED files by their data time in hour slots, zeros included", async () => {
		const body = await get(`/ingests/status/?${range}&page_size=1000&use_ingest_time=false`);
		expect(body.count).toBe(2);
		expect(body.next).toBeNull();
		const [alpha, beta] = body.results;
		expect(Object.keys(alpha)).toEqual(["strike", "most_recent", "files", "size", "values"]);
		expect(alpha.strike).toMatchObject({
			id: ids.alpha,
			name: "alpha",
			job: { id: ids.job, status: "RUNNING", job_type: { name: "scale-strike" } },
			created: "2023-12-01T00:00:00.000Z"
		});
		expect(alpha.strike.configuration).toBeUndefined();
		// a.tif's data began 01:15, b.tif's 03:40; c.tif has no data time
		expect(alpha).toMatchObject({
			most_recent: "2024-01-01T03:40:00.000Z",
			files: 2,
			size: 30
		});
		expect(alpha.values).toEqual([
			slot(0),
			slot(1, 1, 10),
			slot(2),
			slot(3, 1, 20),
			slot(4),
			slot(5)
		]);
		expect(beta.strike).toMatchObject({ id: ids.beta, job: null });
		expect(beta).toMatchObject({ most_recent: null, files: 0, size: 0 });
		expect(beta.values).toEqual([0, 1, 2, 3, 4, 5].map(h => slot(h)));
		// data time is the default
		expect((await get(`/ingests/status/?${range}`)).results).toEqual(body.results);
	});

	it("groups by ingest time with use_ingest_time=true", async () => {
		const body = await get(`/ingests/status/?${range}&use_ingest_time=true`);
		const [alpha, beta] = body.results;
		expect(alpha).toMatchObject({
			most_recent: "2024-01-01T04:05:00.000Z",
			files: 2,
			size: 30
		});
		expect(alpha.values).toEqual([
			slot(0),
			slot(1),
			slot(2, 1, 10),
			slot(3),
			slot(4, 1, 20),
			slot(5)
		]);
		expect(beta).toMatchObject({ most_recent: "2024-01-01T02:50:00.000Z", files: 1, size: 30 });
		expect(beta.values).toEqual([slot(0), slot(1), slot(2, 1, 30), slot(3), slot(4), slot(5)]);
	});

	it("covers every hour the range touches and counts only what lies within it", async () => {
		const body = await get(
			"/ingests/status/?started=2024-01-01T02:30:00Z&ended=2024-01-01T04:04:00Z&use_ingest_time=1"
		);
		const [alpha, beta] = body.results;
		// a.tif ended 02:10 and b.tif 04:05, both outside; c.tif 02:50 inside
		expect(alpha).toMatchObject({ most_recent: null, files: 0, size: 0 });
		expect(alpha.values).toEqual([slot(2), slot(3), slot(4)]);
		expect(beta.values).toEqual([slot(2, 1, 30), slot(3), slot(4)]);
	});

	it("pages over strikes", async () => {
		const body = await get(`/ingests/status/?${range}&page_size=1&page=2`);
		expect(body.count).toBe(2);
		expect(body.results.map((r: any) => r.strike.id)).toEqual([ids.beta]);
		expect(body.previous).toMatch(/page=1/);
		expect(body.next).toBeNull();
		const past = await get(`/ingests/status/?${range}&page_size=1&page=3`);
		expect(past).toMatchObject({ count: 2, results: [] });
	});

	it("defaults to the past week up to now", async () => {
		const before = Date.now();
		const body = await get("/ingests/status/");
		const values = body.results[0].values;
		// the hours of now - 7 days to now, both ends included
		expect(values).toHaveLength(7 * 24 + 1);
		const first = Date.parse(values[0].time);
		const last = Date.parse(values[values.length - 1].time);
		expect(last - first).toBe(7 * 24 * 3600 * 1000);
		expect(last).toBeLessThanOrEqual(Date.now());
		expect(last).toBeGreaterThan(before - 3600 * 1000);
	});

	it("takes a range of 31 days, not more", async () => {
		const ok = await get(
			"/ingests/status/?started=2024-01-01T00:00:00Z&ended=2024-02-01T00:00:00Z"
		);
		expect(ok.results[0].values).toHaveLength(31 * 24 + 1);
		expectJsonError(
			await request(
				"GET",
				`${api}/ingests/status/?started=2024-01-01T00:00:00Z&ended=2024-02-01T00:00:01Z`
			),
			400,
			/^started: .*31 days/
		);
		// ended defaults to now, so a start long ago is too far back
		expectJsonError(
			await request("GET", `${api}/ingests/status/?started=2024-01-01T00:00:00Z`),
			400,
			/^started/
		);
	});

	it.each([
		["use_ingest_time=maybe", "use_ingest_time"],
		["started=soon", "started"],
		["ended=2024-01-01T00:00:00Z&started=2024-01-02T00:00:00Z", "started"],
		["page_size=1001", "page_size"]
	])("answers 400 naming the field for %s", async (q, field) => {
		expectJsonError(
			await request("GET", `${api}/ingests/status/?${q}`),
			400,
			new RegExp(`^${field}`)
		);
	});
});
