import { promises as fs } from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";
import { addFileJobType, addNode, runToCompletion } from "../helpers/completion";

/**
 * Source files over real HTTP and PostgreSQL: the list with its filters and orders, the updates
 * view, and the details with the file's ingests and the products made from it (by real
 * completions).
 */

const SOURCE_FIELDS = [
	"id",
	"workspace",
	"file_name",
	"media_type",
	"file_size",
	"data_type",
	"is_deleted",
	"uuid",
	"url",
	"created",
	"deleted",
	"data_started",
	"data_ended",
	"geometry",
	"center_point",
	"meta_data",
	"countries",
	"last_modified",
	"is_parsed",
	"parsed"
];
const INGEST_FIELDS = [
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
	"last_modified"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let rawDir: string;
let outDir: string;
/** a.tif parsed (raw), b.tif not parsed (out, no base URL), c.tif deleted (raw) */
const s = { a: 0, b: 0, c: 0 };
const ids = { raw: 0, out: 0, kml: 0, node: 0, p1: 0, p2: 0, strike: 0 };
const ingests: number[] = [];

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

async function product(inputFileId: number, filePath: string): Promise<number> {
	const { exeId } = await runToCompletion(tdb.db, {
		api,
		jobTypeId: ids.kml,
		inputFileId,
		workspaceId: ids.out,
		nodeId: ids.node,
		agentId: app.broker.nodeID,
		products: [
			{
				outputName: "result",
				filePath,
				fileName: path.posix.basename(filePath),
				mediaType: "text/xml",
				size: 3
			}
		]
	});
	const [row] = await query<{ id: number }>(`SELECT id FROM scale_file WHERE job_exe_id = $1`, [
		exeId
	]);
	return row.id;
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	rawDir = await fs.mkdtemp(path.join(os.tmpdir(), "sources-raw-"));
	outDir = await fs.mkdtemp(path.join(os.tmpdir(), "sources-out-"));
	const config = (dir: string) =>
		JSON.stringify({ version: "1.0", broker: { type: "host", host_path: dir } });
	const ws = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config, base_url) VALUES
			('raw', $1, 'https://host/raw/'), ('out', $2, NULL) RETURNING id`,
		[config(rawDir), config(outDir)]
	);
	ids.raw = ws[0].id;
	ids.out = ws[1].id;
	const rows = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, data_type, is_parsed, parsed, is_deleted, deleted, created,
			countries)
		 VALUES
			('SOURCE', $1, 'a.tif', 'in/a.tif', 'image/tiff', 10, md5('a.tif'), '{raw,optical}',
				true, '2024-01-01T00:30:00Z', false, NULL, '2023-12-30T00:00:00Z', '{FRA}'),
			('SOURCE', $2, 'b.tif', 'in/b.tif', 'image/tiff', 20, md5('b.tif'), '{}',
				false, NULL, false, NULL, '2023-12-31T00:00:00Z', '{}'),
			('SOURCE', $1, 'c.tif', 'in/c.tif', 'image/tiff', 30, md5('c.tif'), '{}',
				false, NULL, true, '2024-01-01T02:30:00Z', '2023-12-29T00:00:00Z', '{}')
		 RETURNING id`,
		[ids.raw, ids.out]
	);
	[s.a, s.b, s.c] = rows.map(r => r.id);
	ids.kml = await addFileJobType(tdb.db, "kml", { category: "footprint" });
	ids.node = await addNode(tdb.db, "n1.example");
	const [strike] = await query<{ id: number }>(
		`INSERT INTO strike (name, configuration) VALUES ('watch', '{}') RETURNING id`
	);
	ids.strike = strike.id;
	for (const [file, created] of [
		[s.a, "2023-12-30T00:00:00Z"],
		[s.b, "2023-12-31T00:00:00Z"],
		[s.a, "2023-12-29T00:00:00Z"]
	] as const) {
		const [ingest] = await query<{ id: number }>(
			`INSERT INTO ingest (file_name, strike_id, status, bytes_transferred, transfer_started,
				transfer_ended, media_type, file_size, data_type, ingest_started, ingest_ended,
				source_file_id, created, last_modified)
			 SELECT f.file_name, $2, 'INGESTED', f.file_size, $3, $3, f.media_type, f.file_size,
				f.data_type, $3, $3, f.id, $3, $3
			 FROM scale_file f WHERE f.id = $1 RETURNING id`,
			[file, ids.strike, created]
		);
		ingests.push(ingest.id);
	}

	app = await startServices(tdb.url, ["api", "queue", "sources", "products"]);
	api = app.api;
	ids.p1 = await product(s.a, "kml/1/a.kml");
	ids.p2 = await product(ids.p1, "kml/2/a2.kml");

	const times: [number, string][] = [
		[s.a, "2024-01-01T02:00:00Z"],
		[s.b, "2024-01-01T01:00:00Z"],
		[s.c, "2024-01-01T03:00:00Z"]
	];
	for (const [id, t] of times)
		await query(`UPDATE scale_file SET last_modified = $2 WHERE id = $1`, [id, t]);
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
	for (const dir of [rawDir, outDir]) if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe("GET /sources/", () => {
	it("lists source files by last change, oldest first as Scale, and no products", async () => {
		const body = await get("/sources/");
		expect(body.count).toBe(3);
		expect(body.results.map((r: any) => r.id)).toEqual([s.b, s.a, s.c]);
		for (const r of body.results) expect(Object.keys(r)).toEqual(SOURCE_FIELDS);
		const [row] = await query(`SELECT uuid FROM scale_file WHERE id = $1`, [s.a]);
		expect(body.results[1]).toEqual({
			id: s.a,
			workspace: { id: ids.raw, name: "raw" },
			file_name: "a.tif",
			media_type: "image/tiff",
			file_size: 10,
			data_type: ["raw", "optical"],
			is_deleted: false,
			uuid: row.uuid,
			url: "https://host/raw/in/a.tif",
			created: "2023-12-30T00:00:00.000Z",
			deleted: null,
			data_started: null,
			data_ended: null,
			geometry: null,
			center_point: null,
			meta_data: {},
			countries: ["FRA"],
			last_modified: "2024-01-01T02:00:00.000Z",
			is_parsed: true,
			parsed: "2024-01-01T00:30:00.000Z"
		});
		// no base URL: the API's download route, under the root the request came through
		expect(body.results[0].url).toBe(`${api}/files/${s.b}/download/`);
		const v3 = (await request("GET", `${api}/v3/sources/?file_name=b.tif`)).body;
		expect(v3.results[0].url).toBe(`${api}/v3/files/${s.b}/download/`);
		expect(body.results[2]).toMatchObject({
			is_deleted: true,
			deleted: "2024-01-01T02:30:00.000Z"
		});
	});

	it.each([
		["is_parsed=true", ["a"]],
		["is_parsed=false", ["b", "c"]],
		["is_parsed=true&is_parsed=false", ["b", "a", "c"]],
		["file_name=b.tif", ["b"]],
		["file_name=a.tif&file_name=c.tif", ["a", "c"]],
		["file_name=a.kml", []],
		["started=2024-01-01T01:30:00Z", ["a", "c"]],
		["started=2024-01-01T01:30:00Z&ended=2024-01-01T02:30:00Z", ["a"]],
		["is_parsed=false&ended=2024-01-01T02:00:00Z", ["b"]],
		["order=-file_name", ["c", "b", "a"]],
		["order=workspace__name&order=file_name", ["b", "a", "c"]],
		["order=parsed&order=id", ["a", "b", "c"]],
		["order=is_parsed&order=file_name", ["b", "c", "a"]],
		["order=-created", ["b", "a", "c"]],
		["order=-last_modified", ["c", "a", "b"]]
	])("?%s", async (q, expected) => {
		expect(await listIds(`/sources/?${q}`)).toEqual(expected.map(k => s[k as keyof typeof s]));
	});

	it.each([
		["is_parsed=maybe", /^is_parsed: /],
		["order=job_type__name", /^order: unknown field "job_type__name"/],
		["ended=2024-13-01T00:00:00Z", /^ended: /],
		["page=0", /page/]
	])("answers 400 naming the field for ?%s", async (q, detail) => {
		expectJsonError(await request("GET", `${api}/sources/?${q}`), 400, detail);
	});
});

describe("GET /sources/updates/", () => {
	it("shows what last happened to each source file", async () => {
		const body = await get("/sources/updates/");
		expect(body.results.map((r: any) => r.id)).toEqual([s.b, s.a, s.c]);
		for (const r of body.results) expect(Object.keys(r)).toEqual([...SOURCE_FIELDS, "update"]);
		expect(body.results.map((r: any) => r.update)).toEqual([
			{ action: "CREATED", when: "2023-12-31T00:00:00.000Z" },
			{ action: "PARSED", when: "2024-01-01T00:30:00.000Z" },
			{ action: "DELETED", when: "2024-01-01T02:30:00.000Z" }
		]);
		const listed = (await get("/sources/")).results;
		expect(body.results.map(({ update: _u, ...r }: any) => r)).toEqual(listed);
	});

	it("takes the list's filters", async () => {
		expect(await listIds("/sources/updates/?is_parsed=false&order=-last_modified")).toEqual([
			s.c,
			s.b
		]);
		expectJsonError(
			await request("GET", `${api}/sources/updates/?is_parsed=2`),
			400,
			/^is_parsed: /
		);
	});
});

describe("GET /sources/{id}/", () => {
	it("shows a source file with its ingests and the products made from it", async () => {
		const d = await get(`/sources/${s.a}/`);
		expect(Object.keys(d)).toEqual([...SOURCE_FIELDS, "ingests", "products"]);
		const listed = (await get("/sources/?file_name=a.tif")).results[0];
		const { ingests: ingestList, products, ...own } = d;
		expect(own).toEqual(listed);
		// oldest first
		expect(ingestList.map((i: any) => i.id)).toEqual([ingests[2], ingests[0]]);
		expect(Object.keys(ingestList[0])).toEqual(INGEST_FIELDS);
		expect(ingestList[1]).toEqual({
			id: ingests[0],
			file_name: "a.tif",
			strike: { id: ids.strike },
			status: "INGESTED",
			bytes_transferred: 10,
			transfer_started: "2023-12-30T00:00:00.000Z",
			transfer_ended: "2023-12-30T00:00:00.000Z",
			media_type: "image/tiff",
			file_size: 10,
			data_type: ["raw", "optical"],
			ingest_started: "2023-12-30T00:00:00.000Z",
			ingest_ended: "2023-12-30T00:00:00.000Z",
			source_file: { id: s.a },
			created: "2023-12-30T00:00:00.000Z",
			last_modified: "2023-12-30T00:00:00.000Z"
		});
		// P2 was made from P1, so from a.tif too
		expect(products.map((p: any) => p.id)).toEqual([ids.p1, ids.p2]);
		const p1 = (await get(`/products/?file_name=a.kml`)).results[0];
		expect(products[0]).toEqual(p1);
		expect(products[0].job_type).toMatchObject({ id: ids.kml, name: "kml" });
	});

	it("shows a source file no job has read with no products", async () => {
		const d = await get(`/sources/${s.b}/`);
		expect(d.ingests.map((i: any) => i.id)).toEqual([ingests[1]]);
		expect(d.products).toEqual([]);
		expect((await get(`/sources/${s.c}/`)).ingests).toEqual([]);
	});

	it("finds a source file by its name", async () => {
		expect((await get("/sources/b.tif/")).id).toBe(s.b);
		expect((await request("GET", `${api}/v3/sources/a.tif`)).body.id).toBe(s.a);
	});

	it("answers 404 for what names no source file", async () => {
		for (const ref of ["987654", "0", "99999999999", "nothing.tif", String(ids.p1), "a.kml"])
			expectJsonError(await request("GET", `${api}/sources/${ref}/`), 404);
		expectJsonError(
			await request("GET", `${api}/sources/${ids.p1}/`),
			404,
			new RegExp(`^No source file with id ${ids.p1}$`)
		);
	});
});
