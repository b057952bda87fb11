import { promises as fs } from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";
import {
	addFileJobType,
	addNode,
	completeExecutions,
	runToCompletion,
	startJob
} from "../helpers/completion";
import { PIPELINED, transaction } from "../../lib/db/run";
import { finishExecutions } from "../../lib/executions/finish";
import { PRODUCT_LOCK_CLASS } from "../../lib/records/product";

/**
 * Products over real HTTP and PostgreSQL: made by real completions (published when their job
 * completes, unpublished when a rerun supersedes them), then listed, filtered, ordered, shown in
 * details and updates, and downloaded from their workspace through the API.
 */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const PRODUCT_FIELDS = [
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
	"is_operational",
	"is_published",
	"has_been_published",
	"published",
	"unpublished",
	"job_type",
	"job",
	"job_exe"
];
const SOURCE_FIELDS = [...PRODUCT_FIELDS.slice(0, 18), "is_parsed", "parsed"];
const JOB_TYPE_BASE = [
	"id",
	"name",
	"version",
	"title",
	"description",
	"category",
	"author_name",
	"author_url",
	"is_system",
	"is_long_running",
	"is_active",
	"is_operational",
	"is_paused",
	"icon_code"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let rawDir: string;
let outDir: string;
let outsideDir: string;
const ids = { raw: 0, out: 0, kml: 0, png: 0, node: 0, s1: 0, s2: 0 };
/** P1 (kml on s1, superseded by P4), P2 (png on s2), P3 (png on P1), P4 (kml on s1 again) */
const p = { p1: 0, p2: 0, p3: 0, p4: 0 };
const jobs = { j1: 0, j2: 0, j3: 0, j4: 0 };
const exes = { j1: 0, j2: 0, j3: 0, j4: 0 };

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

function jobSpec(jobTypeId: number, inputFileId: number) {
	return {
		api,
		jobTypeId,
		inputFileId,
		workspaceId: ids.out,
		nodeId: ids.node,
		agentId: app.broker.nodeID
	};
}

/** A file made by a job: [output, path in the workspace, media type]. */
function made([outputName, filePath, mediaType]: [string, string, string]) {
	return { outputName, filePath, fileName: path.posix.basename(filePath), mediaType, size: 5 };
}

function run(jobTypeId: number, inputFileId: number, files: [string, string, string][]) {
	return runToCompletion(tdb.db, {
		...jobSpec(jobTypeId, inputFileId),
		products: files.map(made)
	});
}

async function productOf(exeId: number): Promise<number> {
	const [row] = await query<{ id: number }>(`SELECT id FROM scale_file WHERE job_exe_id = $1`, [
		exeId
	]);
	return row.id;
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	rawDir = await fs.mkdtemp(path.join(os.tmpdir(), "products-raw-"));
	outDir = await fs.mkdtemp(path.join(os.tmpdir(), "products-out-"));
	outsideDir = await fs.mkdtemp(path.join(os.tmpdir(), "products-outside-"));
	const config = (dir: string) =>
		JSON.stringify({ version: "1.0", broker: { type: "host", host_path: dir } });
	const ws = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config, base_url) VALUES
			('raw', $1, 'https://host/raw/'), ('out', $2, NULL) RETURNING id`,
		[config(rawDir), config(outDir)]
	);
	ids.raw = ws[0].id;
	ids.out = ws[1].id;
	ids.kml = await addFileJobType(tdb.db, "kml", { category: "footprint", title: "KML" });
	ids.png = await addFileJobType(tdb.db, "png", { category: "imagery", is_operational: false });
	ids.node = await addNode(tdb.db, "n1.example");
	const sources = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, is_parsed, parsed)
		 VALUES ('SOURCE', $1, 'scene-1.tif', 'in/scene-1.tif', 'image/tiff', 10, md5('s1'), true,
				'2024-01-01T00:00:00Z'),
			('SOURCE', $1, 'scene-2.tif', 'in/scene-2.tif', 'image/tiff', 20, md5('s2'), false, NULL)
		 RETURNING id`,
		[ids.raw]
	);
	ids.s1 = sources[0].id;
	ids.s2 = sources[1].id;

	app = await startServices(tdb.url, ["api", "queue", "products", "files"]);
	api = app.api;

	const j1 = await run(ids.kml, ids.s1, [["result", "kml/1/scene-1.kml", "text/xml"]]);
	const j2 = await run(ids.png, ids.s2, [["result", "png/2/scene-2.png", "image/png"]]);
	p.p1 = await productOf(j1.exeId);
	const j3 = await run(ids.png, p.p1, [["result", "png/3/scene-1.png", "image/png"]]);
	const j4 = await run(ids.kml, ids.s1, [["result", "kml/4/scene-1.kml", "text/xml"]]);
	for (const [key, j] of Object.entries({ j1, j2, j3, j4 })) {
		jobs[key as keyof typeof jobs] = j.jobId;
		exes[key as keyof typeof exes] = j.exeId;
	}
	p.p2 = await productOf(j2.exeId);
	p.p3 = await productOf(j3.exeId);
	p.p4 = await productOf(j4.exeId);
	await fs.mkdir(path.join(outDir, "png/2"), { recursive: true });
	await fs.writeFile(path.join(outDir, "png/2/scene-2.png"), "PNG-2");
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
	for (const dir of [rawDir, outDir, outsideDir])
		if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** The four products' rows as stored, for the times the answers must repeat. */
async function stored(id: number): Promise<Record<string, any>> {
	const [row] = await query(`SELECT * FROM scale_file WHERE id = $1`, [id]);
	return row;
}

describe("GET /products/", () => {
	beforeAll(async () => {
		// Times of their own, so ranges and the default order are known by hand.
		const times: [number, string][] = [
			[p.p1, "2024-01-01T03:00:00Z"],
			[p.p2, "2024-01-01T01:00:00Z"],
			[p.p3, "2024-01-01T04:00:00Z"],
			[p.p4, "2024-01-01T02:00:00Z"]
		];
		for (const [id, t] of times)
			await query(`UPDATE scale_file SET last_modified = $2 WHERE id = $1`, [id, t]);
	});

	it("lists products by last change, oldest first as Scale, with their job type in full", async () => {
		const body = await get("/products/");
		expect(body.count).toBe(4);
		expect(body.next).toBeNull();
		expect(body.results.map((r: any) => r.id)).toEqual([p.p2, p.p4, p.p1, p.p3]);
		for (const r of body.results) {
			expect(Object.keys(r)).toEqual(PRODUCT_FIELDS);
			expect(Object.keys(r.job_type)).toEqual(JOB_TYPE_BASE);
		}
		const p2 = body.results[0];
		const row2 = await stored(p.p2);
		expect(p2).toEqual({
			id: p.p2,
			workspace: { id: ids.out, name: "out" },
			file_name: "scene-2.png",
			media_type: "image/png",
			file_size: 5,
			data_type: [],
			is_deleted: false,
			uuid: row2.uuid,
			url: `${api}/files/${p.p2}/download/`,
			created: row2.created.toISOString(),
			deleted: null,
			data_started: null,
			data_ended: null,
			geometry: null,
			center_point: null,
			meta_data: {},
			countries: [],
			last_modified: "2024-01-01T01:00:00.000Z",
			is_operational: false,
			is_published: true,
			has_been_published: true,
			published: row2.published.toISOString(),
			unpublished: null,
			job_type: {
				id: ids.png,
				name: "png",
				version: "1.0",
				title: null,
				description: null,
				category: "imagery",
				author_name: null,
				author_url: null,
				is_system: false,
				is_long_running: false,
				is_active: true,
				is_operational: false,
				is_paused: false,
				icon_code: null
			},
			job: { id: jobs.j2 },
			job_exe: { id: exes.j2 }
		});
		const p1 = body.results[2];
		const row4 = await stored(p.p4);
		expect(p1).toMatchObject({
			is_operational: true,
			is_published: false,
			has_been_published: true,
			unpublished: row4.published.toISOString(),
			job_type: { id: ids.kml, name: "kml", title: "KML", category: "footprint" }
		});
	});

	it("points download URLs at the API root the request came through", async () => {
		const body = (await request("GET", `${api}/v3/products/?file_name=scene-2.png`)).body;
		expect(body.results[0].url).toBe(`${api}/v3/files/${p.p2}/download/`);
	});

	it.each([
		["job_type_id=KML", ["p4", "p1"]],
		["job_type_id=KML&job_type_id=PNG", ["p2", "p4", "p1", "p3"]],
		["job_type_name=png", ["p2", "p3"]],
		["job_type_name=png&job_type_name=kml", ["p2", "p4", "p1", "p3"]],
		["job_type_category=footprint", ["p4", "p1"]],
		["job_type_category=footprint&job_type_category=imagery", ["p2", "p4", "p1", "p3"]],
		["job_type_category=nothing", []],
		["is_operational=true", ["p4", "p1"]],
		["is_operational=false", ["p2", "p3"]],
		["file_name=scene-1.kml", ["p4", "p1"]],
		["file_name=scene-1.kml&is_operational=false", []],
		["started=2024-01-01T01:30:00Z&ended=2024-01-01T03:30:00Z", ["p4", "p1"]],
		["started=2024-01-01T02:00:00Z", ["p4", "p1", "p3"]],
		["ended=2024-01-01T02:00:00Z", ["p2", "p4"]],
		["is_operational=false&started=2024-01-01T03:00:00Z", ["p3"]],
		["order=job_type__name", ["p1", "p4", "p2", "p3"]],
		["order=job_type__name&order=-last_modified", ["p1", "p4", "p3", "p2"]],
		["order=-file_name&order=id", ["p2", "p3", "p1", "p4"]],
		["order=-last_modified", ["p3", "p1", "p4", "p2"]],
		["order=is_published", ["p1", "p2", "p3", "p4"]],
		["order=-job__id", ["p4", "p3", "p2", "p1"]]
	])("?%s", async (q, expected) => {
		const query = q.replace("KML", String(ids.kml)).replace("PNG", String(ids.png));
		expect(await listIds(`/products/?${query}`)).toEqual(
			expected.map(k => p[k as keyof typeof p])
		);
	});

	it("pages with links that keep the filters", async () => {
		const first = await get("/products/?page_size=3&is_operational=true&is_operational=false");
		expect(first.count).toBe(4);
		expect(first.results.map((r: any) => r.id)).toEqual([p.p2, p.p4, p.p1]);
		expect(first.next).toBe(
			`${api.replace(/\/api$/, "")}/api/products/?page_size=3&is_operational=true&is_operational=false&page=2`
		);
		const second = (await request("GET", first.next)).body;
		expect(second.results.map((r: any) => r.id)).toEqual([p.p3]);
		expect(second.next).toBeNull();
		expect(second.previous).toMatch(/page=1/);
	});

	it.each([
		["is_operational=maybe", /^is_operational: /],
		["job_type_id=abc", /^job_type_id: /],
		["order=nope", /^order: unknown field "nope"/],
		["started=yesterday", /^started: /],
		["page_size=0", /page_size/]
	])("answers 400 naming the field for ?%s", async (q, detail) => {
		expectJsonError(await request("GET", `${api}/products/?${q}`), 400, detail);
	});
});

describe("GET /products/{id}/", () => {
	const DETAIL_FIELDS = [...PRODUCT_FIELDS, "sources", "ancestors", "descendants"];

	it("shows a product with the source files and products it was made from", async () => {
		const d = await get(`/products/${p.p3}/`);
		expect(Object.keys(d)).toEqual(DETAIL_FIELDS);
		expect(d).toMatchObject({ id: p.p3, file_name: "scene-1.png", job: { id: jobs.j3 } });
		// s1 reached it through P1 (an indirect link)
		expect(d.sources.map((f: any) => f.id)).toEqual([ids.s1]);
		expect(Object.keys(d.sources[0])).toEqual(SOURCE_FIELDS);
		expect(d.sources[0]).toMatchObject({
			file_name: "scene-1.tif",
			url: "https://host/raw/in/scene-1.tif",
			is_parsed: true,
			parsed: "2024-01-01T00:00:00.000Z"
		});
		expect(d.ancestors.map((f: any) => f.id)).toEqual([p.p1]);
		expect(Object.keys(d.ancestors[0])).toEqual(PRODUCT_FIELDS);
		expect(d.ancestors[0].job_type.name).toBe("kml");
		expect(d.descendants).toEqual([]);
	});

	it("shows the products made from a product", async () => {
		const d = await get(`/products/${p.p1}/`);
		expect(d.sources.map((f: any) => f.id)).toEqual([ids.s1]);
		expect(d.ancestors).toEqual([]);
		expect(d.descendants.map((f: any) => f.id)).toEqual([p.p3]);
		expect(Object.keys(d.descendants[0])).toEqual(PRODUCT_FIELDS);
		const listed = (await get(`/products/?file_name=scene-1.png`)).results[0];
		expect(d.descendants[0]).toEqual(listed);
	});

	it("finds a product by file name, the one published last", async () => {
		expect((await get(`/products/scene-2.png/`)).id).toBe(p.p2);
		expect((await get(`/products/scene-1.kml/`)).id).toBe(p.p4);
		expect((await request("GET", `${api}/v3/products/scene-1.kml`)).body.id).toBe(p.p4);
	});

	it("answers 404 for what names no product", async () => {
		for (const ref of ["987654", "0", "99999999999", "no-such.kml", String(ids.s1)])
			expectJsonError(await request("GET", `${api}/products/${ref}/`), 404);
		expectJsonError(
			await request("GET", `${api}/products/987654/`),
			404,
			/^No product with id 987654$/
		);
		expectJsonError(
			await request("GET", `${api}/products/scene-1.tif/`),
			404,
			/^No product named "scene-1.tif"$/
		);
	});
});

describe("GET /products/updates/", () => {
	it("shows each product's last update and the source files it was made from", async () => {
		const body = await get("/products/updates/");
		expect(body.count).toBe(4);
		expect(body.results.map((r: any) => r.id)).toEqual([p.p2, p.p4, p.p1, p.p3]);
		for (const r of body.results) {
			expect(Object.keys(r)).toEqual([...PRODUCT_FIELDS, "update", "source_files"]);
			for (const f of r.source_files) expect(Object.keys(f)).toEqual(SOURCE_FIELDS);
		}
		const rows = await Promise.all([p.p2, p.p4, p.p1, p.p3].map(stored));
		expect(body.results.map((r: any) => r.update)).toEqual([
			{ action: "PUBLISHED", when: rows[0].published.toISOString() },
			{ action: "PUBLISHED", when: rows[1].published.toISOString() },
			{ action: "UNPUBLISHED", when: rows[2].unpublished.toISOString() },
			{ action: "PUBLISHED", when: rows[3].published.toISOString() }
		]);
		expect(body.results.map((r: any) => r.source_files.map((f: any) => f.id))).toEqual([
			[ids.s2],
			[ids.s1],
			[ids.s1],
			[ids.s1]
		]);
		const listed = (await get("/products/")).results;
		expect(body.results.map(({ update: _u, source_files: _s, ...r }: any) => r)).toEqual(
			listed
		);
	});

	it("takes the list's filters and orders", async () => {
		expect(await listIds("/products/updates/?job_type_name=png&order=-id")).toEqual([
			p.p3,
			p.p2
		]);
		expect(await listIds("/products/updates/?ended=2024-01-01T02:30:00Z")).toEqual([
			p.p2,
			p.p4
		]);
		expectJsonError(
			await request("GET", `${api}/products/updates/?is_operational=x`),
			400,
			/^is_operational: /
		);
	});

	it("reports a deleted product as DELETED", async () => {
		const [extra] = await query<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				uuid, job_type_id, job_id, job_exe_id, has_been_published, is_published, published,
				is_deleted, deleted, last_modified)
			 VALUES ('PRODUCT', $1, 'gone.kml', 'kml/gone.kml', 'text/xml', md5('gone'), $2, $3,
				$4, true, true, '2023-06-01T00:00:00Z', true, '2023-06-02T00:00:00Z',
				'2023-06-02T00:00:00Z')
			 RETURNING id`,
			[ids.out, ids.kml, jobs.j1, exes.j1]
		);
		const body = await get("/products/updates/?ended=2023-12-31T00:00:00Z");
		expect(body.results.map((r: any) => [r.id, r.update])).toEqual([
			[extra.id, { action: "DELETED", when: "2023-06-02T00:00:00.000Z" }]
		]);
		expect(body.results[0].source_files).toEqual([]);
		await query(`DELETE FROM scale_file WHERE id = $1`, [extra.id]);
	});
});

describe("GET /files/{id}/download/", () => {
	it("streams the file from its workspace with its type, length and name", async () => {
		const url = (await get(`/products/${p.p2}/`)).url;
		expect(url).toBe(`${api}/files/${p.p2}/download/`);
		for (const u of [url, `${api}/v3/files/${p.p2}/download`]) {
			const reply = await request("GET", u);
			expect(reply.status).toBe(200);
			expect(reply.text).toBe("PNG-2");
			expect(reply.headers.get("content-type")).toBe("image/png");
			expect(reply.headers.get("content-length")).toBe("5");
			expect(reply.headers.get("content-disposition")).toBe(
				`attachment; filename="scene-2.png"; filename*=UTF-8''scene-2.png`
			);
		}
	});

	it("serves any file of a host workspace, a source file too", async () => {
		await fs.mkdir(path.join(rawDir, "in"), { recursive: true });
		await fs.writeFile(path.join(rawDir, "in", "scene-1.tif"), Buffer.alloc(3000, 7));
		const reply = await fetch(`${api}/files/${ids.s1}/download/`);
		expect(reply.status).toBe(200);
		expect(reply.headers.get("content-type")).toBe("image/tiff");
		expect(Buffer.from(await reply.arrayBuffer())).toEqual(Buffer.alloc(3000, 7));
	});

	it("serves a file of an nfs workspace from where the nodes mount it, one of an s3 workspace by a presigned link", async () => {
		const [nfs, s3] = await query<{ id: number }>(
			`INSERT INTO workspace (name, json_config) VALUES
				('nfs-ws', jsonb_build_object('version', '1.0', 'broker', jsonb_build_object(
					'type', 'nfs', 'nfs_path', 'filer:/exports/out', 'host_path', $1::text))),
				('s3-ws', '{"version": "1.0", "broker": {"type": "s3", "bucket_name": "b",
					"endpoint_url": "http://store.local:9000", "region_name": "eu-west-3",
					"credentials": {"access_key_id": "AKID", "secret_access_key": "S3CRET"}}}')
			 RETURNING id`,
			[outDir]
		);
		await fs.writeFile(path.join(outDir, "on-nfs.txt"), "nfs");
		const [nfsFile, s3File] = await query<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, uuid)
			 VALUES ('SOURCE', $1, 'on-nfs.txt', 'on-nfs.txt', 'text/plain', md5('on-nfs')),
				('SOURCE', $2, 'in-s3.txt', 'in-s3.txt', 'text/plain', md5('in-s3'))
			 RETURNING id`,
			[nfs.id, s3.id]
		);
		const reply = await request("GET", `${api}/files/${nfsFile.id}/download/`);
		expect(reply.status).toBe(200);
		expect(reply.text).toBe("nfs");
		const redirect = await fetch(`${api}/files/${s3File.id}/download/`, { redirect: "manual" });
		expect(redirect.status).toBe(302);
		const link = new URL(redirect.headers.get("location")!);
		expect(`${link.origin}${link.pathname}`).toBe("http://store.local:9000/b/in-s3.txt");
		expect(link.searchParams.get("X-Amz-Credential")).toMatch(/^AKID\/\d{8}\/eu-west-3\/s3\//);
		expect(link.searchParams.get("X-Amz-Expires")).toBe("300");
		expect(link.searchParams.get("response-content-disposition")).toBe(
			`attachment; filename="in-s3.txt"; filename*=UTF-8''in-s3.txt`
		);
		expect(link.href).not.toContain("S3CRET");
		await query("DELETE FROM scale_file WHERE id = ANY($1::int[])", [[nfsFile.id, s3File.id]]);
		await query("DELETE FROM workspace WHERE id = ANY($1::int[])", [[nfs.id, s3.id]]);
	});

	async function fileRow(filePath: string, extra = ""): Promise<number> {
		const [row] = await query<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, uuid
				${extra ? ", is_deleted, deleted" : ""})
			 VALUES ('SOURCE', $1, md5($2::text), $2::text, 'text/plain', md5($2::text)
				${extra ? ", true, now()" : ""})
			 RETURNING id`,
			[ids.out, filePath]
		);
		return row.id;
	}

	it("answers 404 for an unknown or deleted file, or one missing from its workspace", async () => {
		expectJsonError(await request("GET", `${api}/files/987654/download/`), 404, /No file/);
		expectJsonError(await request("GET", `${api}/files/abc/download/`), 404);
		// P3 is registered but its file is not on disk
		expectJsonError(
			await request("GET", `${api}/files/${p.p3}/download/`),
			404,
			/missing from its workspace/
		);
		await fs.writeFile(path.join(outDir, "deleted.txt"), "x");
		const deleted = await fileRow("deleted.txt", "deleted");
		expectJsonError(
			await request("GET", `${api}/files/${deleted}/download/`),
			404,
			/has been deleted/
		);
		await fs.mkdir(path.join(outDir, "a-directory"));
		expectJsonError(
			await request("GET", `${api}/files/${await fileRow("a-directory")}/download/`),
			404,
			/not a regular file/
		);
	});

	it("refuses a path that leads outside the workspace, by .. or by a link", async () => {
		await fs.writeFile(path.join(outsideDir, "secret.txt"), "secret");
		const climbing = await fileRow(
			path.posix.join("..", path.basename(outsideDir), "secret.txt")
		);
		await fs.symlink(path.join(outsideDir, "secret.txt"), path.join(outDir, "link.txt"));
		await fs.symlink(outsideDir, path.join(outDir, "linked-dir"));
		for (const id of [
			climbing,
			await fileRow("link.txt"),
			await fileRow("linked-dir/secret.txt")
		]) {
			const reply = await request("GET", `${api}/files/${id}/download/`);
			expectJsonError(reply, 404, /leads outside its workspace/);
			expect(reply.text).not.toContain("secret\n");
		}
	});

	it("needs a bearer token where the API takes them", async () => {
		const guarded = await startServices(tdb.url, ["api", "files", "products"], {
			API_TOKENS: "t0ken"
		});
		try {
			const url = `${guarded.api}/files/${p.p2}/download/`;
			expectJsonError(await request("GET", url), 401);
			const reply = await request("GET", url, undefined, { Authorization: "Bearer t0ken" });
			expect(reply.status).toBe(200);
			expect(reply.text).toBe("PNG-2");
			const listed = await request(
				"GET",
				`${guarded.api}/products/?file_name=scene-2.png`,
				undefined,
				{
					Authorization: "Bearer t0ken"
				}
			);
			expect(listed.body.results[0].url).toBe(url);
		} finally {
			await guarded.stop();
		}
	});
});

// Last: these make products of their own, which the lists above do not expect.
describe("publishing", () => {
	it("publishes a product when its job completes and unpublishes it when a rerun supersedes it", async () => {
		const type = await addFileJobType(tdb.db, "rerun");
		const first = await run(type, ids.s2, [
			["result", "rerun/a/out.txt", "text/plain"],
			["extras", "rerun/a/x/same.txt", "text/plain"],
			["extras", "rerun/a/y/same.txt", "text/plain"]
		]);
		const firstRows = await query(
			`SELECT id, uuid FROM scale_file WHERE job_exe_id = $1 ORDER BY id`,
			[first.exeId]
		);
		// two files of one execution with one uuid do not supersede each other
		expect(firstRows[1].uuid).toBe(firstRows[2].uuid);
		for (const { id } of firstRows) {
			const d = await get(`/products/${id}/`);
			expect(d).toMatchObject({
				is_published: true,
				has_been_published: true,
				unpublished: null
			});
			expect(d.published).toMatch(ISO_MS_Z);
		}

		const second = await run(type, ids.s2, [["result", "rerun/b/out.txt", "text/plain"]]);
		const [now] = await query(`SELECT * FROM scale_file WHERE job_exe_id = $1`, [second.exeId]);
		const [old, keptA, keptB] = await query(
			`SELECT * FROM scale_file WHERE job_exe_id = $1 ORDER BY id`,
			[first.exeId]
		);
		expect(now.uuid).toBe(old.uuid);
		expect(now).toMatchObject({ is_published: true, is_superseded: false, superseded: null });
		expect(old).toMatchObject({
			is_published: false,
			has_been_published: true,
			is_superseded: true
		});
		const when = now.published.toISOString();
		expect(old.unpublished.toISOString()).toBe(when);
		expect(old.superseded.toISOString()).toBe(when);
		expect(old.last_modified.toISOString()).toBe(when);
		// the outputs the rerun did not make again stay published
		expect([keptA.is_published, keptB.is_published]).toEqual([true, true]);

		const d = await get(`/products/${old.id}/`);
		expect(d).toMatchObject({
			is_published: false,
			has_been_published: true,
			unpublished: when
		});
		const updates = await get(
			`/products/updates/?job_type_id=${type}&started=${encodeURIComponent(when)}`
		);
		expect(updates.results.map((r: any) => [r.id, r.update])).toEqual([
			[old.id, { action: "UNPUBLISHED", when }],
			[now.id, { action: "PUBLISHED", when }]
		]);
	});

	it("leaves the last execution's product published among reruns completed together", async () => {
		const type = await addFileJobType(tdb.db, "together");
		const a = await startJob(tdb.db, jobSpec(type, ids.s1));
		const b = await startJob(tdb.db, jobSpec(type, ids.s1));
		const finish = await completeExecutions(tdb.db, app.broker.nodeID, ids.out, [
			{ exeId: a.exeId, products: [made(["result", "together/a/r.txt", "text/plain"])] },
			{ exeId: b.exeId, products: [made(["result", "together/b/r.txt", "text/plain"])] }
		]);
		expect(finish.completedJobs.sort()).toEqual([a.jobId, b.jobId].sort());
		const rows = await query(
			`SELECT job_exe_id, uuid, is_published, is_superseded, unpublished FROM scale_file
			 WHERE job_type_id = $1 ORDER BY id`,
			[type]
		);
		expect(rows[0].uuid).toBe(rows[1].uuid);
		expect(rows.map(r => [r.job_exe_id, r.is_published, r.is_superseded])).toEqual([
			[a.exeId, false, true],
			[b.exeId, true, false]
		]);
		expect(rows[0].unpublished).toBeInstanceOf(Date);
	});

	it("leaves one product of a uuid published when two transactions complete reruns at once", async () => {
		const type = await addFileJobType(tdb.db, "racing");
		const a = await startJob(tdb.db, jobSpec(type, ids.s1));
		const b = await startJob(tdb.db, jobSpec(type, ids.s1));
		let commitA!: () => void;
		const aMayCommit = new Promise<void>(resolve => (commitA = resolve));
		let aWrote!: () => void;
		const aWritten = new Promise<void>(resolve => (aWrote = resolve));
		// A stores its product and stays open until B has stored its own or waits to.
		const first = transaction(tdb.db, PIPELINED, async sql => {
			await finishExecutions(sql, { finished: [finished(a.exeId, "racing/a/r.txt")] });
			aWrote();
			await aMayCommit;
		});
		await aWritten;
		let bEnded = false;
		const second = transaction(tdb.db, PIPELINED, sql =>
			finishExecutions(sql, { finished: [finished(b.exeId, "racing/b/r.txt")] })
		).finally(() => (bEnded = true));
		// B waits for A's lock on the uuid (without it, it does not wait and ends)
		const bWaits = async () =>
			(
				await query<{ n: number }>(
					`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
					 AND classid = $1
					 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
					[PRODUCT_LOCK_CLASS]
				)
			)[0].n > 0;
		while (!bEnded && !(await bWaits())) await new Promise(r => setTimeout(r, 20));
		commitA();
		await Promise.all([first, second]);
		const rows = await query(
			`SELECT job_exe_id, uuid, is_published, is_superseded FROM scale_file
			 WHERE job_type_id = $1 ORDER BY id`,
			[type]
		);
		expect(rows[0].uuid).toBe(rows[1].uuid);
		expect(rows.map(r => [r.job_exe_id, r.is_published, r.is_superseded])).toEqual([
			[a.exeId, false, true],
			[b.exeId, true, false]
		]);
	});
});

/** An agent's report that an execution completed with one file for `result`. */
function finished(jobExeId: number, filePath: string) {
	return {
		jobExeId,
		agentId: app.broker.nodeID,
		status: "COMPLETED" as const,
		exitCode: 0,
		products: [{ ...made(["result", filePath, "text/plain"]), workspaceId: ids.out }],
		resultsManifest: null,
		parseResults: [],
		stdout: "",
		stderr: "",
		steps: {}
	};
}
