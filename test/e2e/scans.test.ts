import fs from "fs";
import os from "os";
import path from "path";
import { startE2e, until, type E2e, FAST_SETTINGS } from "../helpers/e2e";
import { createTestDatabase, sqlOn, type TestDatabase } from "../helpers/db";
import { startMoto, type Moto } from "../helpers/moto";
import { putObject, s3Client } from "../../lib/storage/s3";
import type { S3Place } from "../../lib/documents/s3-broker";

/**
 * Scans (Scale 5.0) end to end: a dry run and an ingest of 1,000 objects of an s3 workspace
 * (moto's S3), the ingest interrupted (its control plane stopped mid-walk, its lease left as a
 * crash leaves it, and its last pages' progress lost) and resumed by another, each object
 * ingested once; a scan of a host workspace; the validation.
 */

const SERVICES = ["api", "workspaces", "scans", "ingest", "sources"];
const OBJECTS = 1000;

let tdb: TestDatabase;
let moto: Moto;
let e2e: E2e;
let root: string;
let hostDir: string;
let place: S3Place;
let scanId: number;
const sql = sqlOn(() => tdb.db);

const key = (i: number) =>
	`scenes/${String(Math.floor(i / 100))}/scene-${String(i).padStart(4, "0")}.dat`;

// pages of 10 objects: a walk of 1,000 takes long enough to be caught midway and interrupted
FAST_SETTINGS.scans = { ...FAST_SETTINGS.scans, pageSize: 10 };

function start(prefix: string): Promise<E2e> {
	return startE2e(tdb.url, SERVICES, path.join(root, "agent"), prefix);
}

beforeAll(async () => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scans-"));
	hostDir = path.join(root, "host-ws");
	fs.mkdirSync(path.join(hostDir, "a", "b"), { recursive: true });
	fs.writeFileSync(path.join(hostDir, "top.csv"), "1,2");
	fs.writeFileSync(path.join(hostDir, "a", "one.csv"), "1");
	fs.writeFileSync(path.join(hostDir, "a", "b", "two.csv"), "22");
	fs.writeFileSync(path.join(hostDir, "a", "skip.txt"), "x");
	[tdb, moto] = await Promise.all([createTestDatabase(), startMoto()]);
	place = {
		bucket: "archive",
		endpoint: moto.endpoint,
		credentials: { accessKeyId: "a", secretAccessKey: "b" }
	};
	const { CreateBucketCommand } = await import("@aws-sdk/client-s3");
	await s3Client(place).send(new CreateBucketCommand({ Bucket: "archive" }));
	for (let i = 0; i < OBJECTS; i += 25)
		await Promise.all(
			Array.from({ length: Math.min(25, OBJECTS - i) }, (_, j) =>
				putObject(place, key(i + j), `scene ${i + j}`)
			)
		);
	await putObject(place, "readme.txt", "not a scene");
	e2e = await start("scan-a");
	await e2e.ok(
		"POST",
		"/workspaces/",
		{
			name: "archive",
			json_config: {
				broker: {
					type: "s3",
					bucket_name: "archive",
					credentials: { access_key_id: "a", secret_access_key: "b" },
					endpoint_url: moto.endpoint
				}
			}
		},
		201
	);
	await e2e.ok(
		"POST",
		"/workspaces/",
		{ name: "host", json_config: { broker: { type: "host", host_path: hostDir } } },
		201
	);
}, 120000);

afterAll(async () => {
	await e2e?.stop();
	await moto?.stop();
	await tdb?.drop();
	fs.rmSync(root, { recursive: true, force: true });
});

const configuration = {
	version: "1.0",
	workspace: "archive",
	scanner: { type: "s3" },
	recursive: true,
	files_to_ingest: [{ filename_regex: ".*\\.dat$", data_types: ["scene"] }]
};

describe("scans", () => {
	it("validates a configuration, naming the field at fault", async () => {
		const wrongScanner = await e2e.call("POST", "/scans/validation/", {
			name: "x",
			configuration: { ...configuration, scanner: { type: "dir" } }
		});
		expect(wrongScanner.status).toBe(400);
		expect(wrongScanner.body.detail).toMatch(
			/^configuration\.scanner\.type: a "dir" scanner walks a host/
		);
		const badRegex = await e2e.call("POST", "/scans/validation/", {
			name: "x",
			configuration: { ...configuration, files_to_ingest: [{ filename_regex: "(" }] }
		});
		expect(badRegex.status).toBe(400);
		expect(badRegex.body.detail).toMatch(
			/^configuration\.files_to_ingest\[0\]\.filename_regex: /
		);
		expect(await e2e.ok("POST", "/scans/validation/", { name: "x", configuration })).toEqual({
			is_valid: true,
			errors: [],
			warnings: []
		});
		expect((await e2e.ok("GET", "/scans/")).count).toBe(0);
	});

	it("counts the files a dry run would ingest, ingesting none", async () => {
		const scan = await e2e.ok("POST", "/scans/", { name: "archive", configuration }, 201);
		scanId = scan.id;
		expect(scan).toMatchObject({ status: "CREATED", file_count: null, job: null });
		const started = await e2e.ok("POST", `/scans/${scanId}/process/`, {}, 201);
		expect(started).toMatchObject({ status: "RUNNING", dry_run: true });
		const done = await until(
			"the dry run to complete",
			() => e2e.ok("GET", `/scans/${scanId}/`),
			s => s.status === "COMPLETED",
			60000
		);
		expect(done).toMatchObject({
			file_count: OBJECTS,
			files_scanned: OBJECTS + 1,
			files_ingested: 0
		});
		expect((await e2e.ok("GET", "/ingests/")).count).toBe(0);
	}, 90000);

	it("ingests 1,000 objects once each, resumed by another control plane after an interruption", async () => {
		await e2e.ok("POST", `/scans/${scanId}/process/`, { ingest: true }, 201);
		const midway = await until(
			"the walk to be midway",
			() => e2e.ok("GET", `/scans/${scanId}/`),
			s => s.files_scanned >= 300 || s.status !== "RUNNING",
			60000
		);
		expect(midway.status).toBe("RUNNING");
		await e2e.stop();
		// as a crash between a page's ingests and its progress would leave it: two pages back
		const [row] = await sql.query(
			"SELECT resume_after, files_scanned FROM scan WHERE id = $1",
			[scanId]
		);
		expect(row.resume_after).not.toBeNull();
		// readme.txt is listed first: the last scene done is the (files_scanned - 1)th
		const rewound = key(Number(row.files_scanned) - 2 - 200);
		await sql.query(
			`UPDATE scan SET resume_after = $2, files_scanned = files_scanned - 200,
				files_ingested = files_ingested - 200, file_count = file_count - 200 WHERE id = $1`,
			[scanId, rewound]
		);
		e2e = await start("scan-b");
		const done = await until(
			"the resumed scan to complete",
			() => e2e.ok("GET", `/scans/${scanId}/`),
			s => s.status !== "RUNNING",
			90000
		);
		expect(done).toMatchObject({
			status: "COMPLETED",
			dry_run: false,
			file_count: OBJECTS,
			files_scanned: OBJECTS + 1
		});
		const [counts] = await sql.query(
			`SELECT count(*)::int AS ingests, count(DISTINCT transfer_path)::int AS objects,
				count(*) FILTER (WHERE status = 'INGESTED')::int AS ingested
			 FROM ingest WHERE scan_id = $1`,
			[scanId]
		);
		expect(counts).toEqual({ ingests: OBJECTS, objects: OBJECTS, ingested: OBJECTS });
		const sources = await e2e.ok("GET", "/sources/?file_name=scene-0042.dat");
		expect(sources.results).toMatchObject([
			{ file_name: "scene-0042.dat", workspace: { name: "archive" }, data_type: ["scene"] }
		]);
	}, 240000);

	it("walks a host workspace, files ingested where they are", async () => {
		const scan = await e2e.ok(
			"POST",
			"/scans/",
			{
				name: "host",
				configuration: {
					workspace: "host",
					scanner: { type: "dir" },
					files_to_ingest: [{ filename_regex: ".*\\.csv$" }]
				}
			},
			201
		);
		await e2e.ok("POST", `/scans/${scan.id}/process/`, { ingest: true }, 201);
		const done = await until(
			"the host scan to complete",
			() => e2e.ok("GET", `/scans/${scan.id}/`),
			s => s.status !== "RUNNING"
		);
		expect(done).toMatchObject({
			status: "COMPLETED",
			file_count: 3,
			files_scanned: 4,
			files_ingested: 3
		});
		const paths = await sql.query(
			`SELECT f.file_path FROM ingest i JOIN scale_file f ON f.id = i.source_file_id
			 WHERE i.scan_id = $1 ORDER BY f.file_path`,
			[scan.id]
		);
		expect(paths.map(p => p.file_path)).toEqual(["a/b/two.csv", "a/one.csv", "top.csv"]);
		// a scan's ingest names its scan, not a strike
		const [ingest] = (await e2e.ok("GET", "/ingests/?file_name=top.csv")).results;
		expect(await e2e.ok("GET", `/ingests/${ingest.id}/`)).toMatchObject({
			strike: null,
			scan_id: scan.id,
			source_file: { file_name: "top.csv" },
			shares_name_with: null
		});
	});
});
