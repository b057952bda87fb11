import { promises as fs } from "fs";
import { Client } from "pg";
import type { Transaction } from "sequelize";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { addFileJobType, addNode, runToCompletion } from "../helpers/completion";
import { runCachedList } from "../../lib/list/cached-list";
import { INPUT_FILES } from "../../lib/records/file-records";
import { JOB_UPDATES_LIST, JOB_UPDATE_RECORD } from "../../lib/records/job";

/**
 * The lists answer records kept by version (lib/list/cached-list.ts): a record is answered from
 * the cache only while every row it shows is unchanged. Each change here is made in SQL, as any
 * writer might, without touching `last_modified`; the next request must show it.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let rawDir: string;
let outDir: string;
const ids = { raw: 0, out: 0, kml: 0, node: 0, source: 0, job: 0, exe: 0, product: 0 };

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function get(pathAndQuery: string, root = api): Promise<any> {
	const reply = await request("GET", `${root}${pathAndQuery}`);
	if (reply.status !== 200) throw new Error(`GET ${pathAndQuery}: ${reply.status} ${reply.text}`);
	return reply.body;
}

/** A source file in the raw workspace, unparsed; answers its id. */
async function addSource(name: string, size: number): Promise<number> {
	const [source] = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, is_parsed)
		 VALUES ('SOURCE', $1, $2::text, 'in/' || $2::text, 'image/tiff', $3, md5($2::text), false)
		 RETURNING id`,
		[ids.raw, name, size]
	);
	return source.id;
}

/** The one record of a list (each list here has one). */
async function only(pathAndQuery: string): Promise<any> {
	const body = await get(pathAndQuery);
	expect(body.count).toBe(1);
	return body.results[0];
}

const LISTS = [
	"/jobs/",
	"/jobs/updates/",
	"/job-executions/",
	"/products/",
	"/products/updates/",
	"/sources/",
	"/sources/updates/"
];

beforeAll(async () => {
	tdb = await createTestDatabase();
	rawDir = await fs.mkdtemp(path.join(os.tmpdir(), "list-cache-raw-"));
	outDir = await fs.mkdtemp(path.join(os.tmpdir(), "list-cache-out-"));
	const config = (dir: string) =>
		JSON.stringify({ version: "1.0", broker: { type: "host", host_path: dir } });
	const ws = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config) VALUES ('raw', $1), ('out', $2) RETURNING id`,
		[config(rawDir), config(outDir)]
	);
	ids.raw = ws[0].id;
	ids.out = ws[1].id;
	ids.kml = await addFileJobType(tdb.db, "kml", { title: "KML" });
	ids.node = await addNode(tdb.db, "n1.example");
	ids.source = await addSource("scene.tif", 10);
	app = await startServices(tdb.url, [
		"api",
		"queue",
		"jobs",
		"job-executions",
		"products",
		"sources",
		"files"
	]);
	api = app.api;
	const run = await runToCompletion(tdb.db, {
		api,
		jobTypeId: ids.kml,
		inputFileId: ids.source,
		workspaceId: ids.out,
		nodeId: ids.node,
		agentId: app.broker.nodeID,
		products: [
			{
				outputName: "result",
				filePath: "kml/scene.kml",
				fileName: "scene.kml",
				mediaType: "text/xml",
				size: 5
			}
		]
	});
	ids.job = run.jobId;
	ids.exe = run.exeId;
	const [product] = await query<{ id: number }>(
		`SELECT id FROM scale_file WHERE job_exe_id = $1`,
		[ids.exe]
	);
	ids.product = product.id;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
	for (const dir of [rawDir, outDir]) if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe("lists of cached records", () => {
	it("answer the same JSON again, and the same envelope to callers other than the gateway", async () => {
		for (const list of LISTS) {
			const first = await request("GET", `${api}${list}`);
			expect(first.status).toBe(200);
			expect(first.headers.get("content-type")).toBe("application/json; charset=utf-8");
			expect(first.body.results).toHaveLength(1);
			const again = await request("GET", `${api}${list}`);
			expect(again.text).toBe(first.text);
		}
		const called = await app.broker.call("jobs.list", {});
		expect(called).toEqual(await get("/jobs/"));
		const updates: any = await app.broker.call("jobs.updates", {});
		expect(updates.results[0].input_files.map((f: any) => f.id)).toEqual([ids.source]);
	});

	it("answer a page past the end with the list's count, and a full page with its next", async () => {
		for (const list of LISTS) {
			const past = await get(`${list}?page=3&page_size=1`);
			expect({ list, count: past.count, results: past.results, next: past.next }).toEqual({
				list,
				count: 1,
				results: [],
				next: null
			});
			expect(past.previous).toMatch(/[?&]page=2&page_size=1$/);
		}
		// two jobs: the first page of one is full and has a next page
		const [job] = await query<{ id: number }>(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, timeout,
				max_tries, data, last_status_change, last_modified)
			 SELECT job_type_id, job_type_rev_id, event_id, 'CANCELED', priority, timeout,
				max_tries, data, now(), now() + interval '1 second'
			 FROM job WHERE id = $1 RETURNING id`,
			[ids.job]
		);
		try {
			const first = await get("/jobs/?page_size=1");
			expect(first.count).toBe(2);
			expect(first.results.map((r: any) => r.id)).toEqual([ids.job]);
			expect(first.next).toMatch(/[?&]page_size=1&page=2$/);
			const second = await get("/jobs/?page_size=1&page=2");
			expect(second.results.map((r: any) => r.id)).toEqual([job.id]);
			expect(second.next).toBeNull();
		} finally {
			await query("DELETE FROM job WHERE id = $1", [job.id]);
		}
	});

	it("keep a filter's lookup only while the looked-up table is unchanged", async () => {
		const [{ category }] = await query<{ category: string | null }>(
			"SELECT category FROM job_type WHERE id = $1",
			[ids.kml]
		);
		try {
			await query("UPDATE job_type SET category = 'before' WHERE id = $1", [ids.kml]);
			for (const list of ["/jobs/", "/job-executions/", "/jobs/updates/"]) {
				expect((await get(`${list}?job_type_category=before`)).count).toBe(1);
				expect((await get(`${list}?job_type_name=kml`)).count).toBe(1);
			}
			// asked again: from the kept lookup, then after a change in SQL
			expect((await get("/jobs/?job_type_category=before")).count).toBe(1);
			await query("UPDATE job_type SET category = 'after' WHERE id = $1", [ids.kml]);
			for (const list of ["/jobs/", "/job-executions/", "/jobs/updates/"]) {
				expect((await get(`${list}?job_type_category=before`)).count).toBe(0);
				expect((await get(`${list}?job_type_category=after`)).count).toBe(1);
			}
			await query("UPDATE job_type SET name = 'kml-renamed' WHERE id = $1", [ids.kml]);
			expect((await get("/jobs/?job_type_name=kml")).count).toBe(0);
			expect((await get("/jobs/?job_type_name=kml-renamed")).count).toBe(1);
		} finally {
			await query("UPDATE job_type SET category = $2, name = 'kml' WHERE id = $1", [
				ids.kml,
				category
			]);
		}
		expect((await get("/jobs/?job_type_name=kml")).count).toBe(1);
	});

	it("check a kept lookup against the generations of its own list's tables", async () => {
		// The products' records read the job type and workspace generations, the jobs' the error
		// and job type ones: set so that each list's text of them is "905.907" in turn.
		const generations = async (values: Record<string, number>) => {
			for (const [name, generation] of Object.entries(values))
				await query("UPDATE list_generation SET generation = $2 WHERE name = $1", [
					name,
					generation
				]);
		};
		await generations({ job_type: 905, workspace: 907 });
		expect((await get("/products/?job_type_name=kml")).count).toBe(1);
		try {
			await query("UPDATE job_type SET name = 'kml-other' WHERE id = $1", [ids.kml]);
			await generations({ error: 905, job_type: 907 });
			// the products' kept lookup (kml's id at "905.907") is not the jobs' to use
			expect((await get("/jobs/?job_type_name=kml")).count).toBe(0);
			expect((await get("/jobs/?job_type_name=kml-other")).count).toBe(1);
		} finally {
			await query("UPDATE job_type SET name = 'kml' WHERE id = $1", [ids.kml]);
		}
		expect((await get("/jobs/?job_type_name=kml")).count).toBe(1);
	});

	it("keep an error category's lookup only while the errors are unchanged", async () => {
		const [job] = await query<{ error_id: number | null }>(
			"SELECT error_id FROM job WHERE id = $1",
			[ids.job]
		);
		const [error] = await query<{ id: number }>(
			"INSERT INTO error (name, category) VALUES ('lookup-probe', 'DATA') RETURNING id"
		);
		try {
			await query("UPDATE job SET error_id = $2 WHERE id = $1", [ids.job, error.id]);
			expect((await get("/jobs/?error_category=DATA")).count).toBe(1);
			expect((await get("/jobs/?error_category=DATA")).count).toBe(1);
			await query("UPDATE error SET category = 'ALGORITHM' WHERE id = $1", [error.id]);
			expect((await get("/jobs/?error_category=DATA")).count).toBe(0);
			expect((await get("/jobs/?error_category=ALGORITHM")).count).toBe(1);
		} finally {
			await query("UPDATE job SET error_id = $2 WHERE id = $1", [ids.job, job.error_id]);
			await query("DELETE FROM error WHERE id = $1", [error.id]);
		}
	});

	it("give each API root its own download URLs", async () => {
		const root = api.replace(/\/api$/, "");
		expect((await only("/sources/")).url).toBe(`${root}/api/files/${ids.source}/download/`);
		const v3 = await get("/sources/", `${root}/api/v3`);
		expect(v3.results[0].url).toBe(`${root}/api/v3/files/${ids.source}/download/`);
		expect((await only("/sources/")).url).toBe(`${root}/api/files/${ids.source}/download/`);
	});

	it("show a change of the job's own row", async () => {
		expect((await only("/jobs/")).priority).not.toBe(7);
		await query(`UPDATE job SET priority = 7 WHERE id = $1`, [ids.job]);
		expect((await only("/jobs/")).priority).toBe(7);
		expect((await only("/jobs/updates/")).priority).toBe(7);
		expect((await only("/job-executions/")).job.priority).toBe(7);
	});

	it("show a change of the job type", async () => {
		expect((await only("/products/")).job_type.title).toBe("KML");
		await query(`UPDATE job_type SET title = 'Footprints', is_paused = true WHERE id = $1`, [
			ids.kml
		]);
		const job = await only("/jobs/");
		expect(job.job_type).toMatchObject({ title: "Footprints", is_paused: true });
		expect((await only("/job-executions/")).job.job_type.title).toBe("Footprints");
		expect((await only("/products/")).job_type.title).toBe("Footprints");
		expect((await only("/products/updates/")).job_type.title).toBe("Footprints");
	});

	it("show a change of the error", async () => {
		const [error] = await query<{ id: number; title: string }>(
			`SELECT id, title FROM error ORDER BY id LIMIT 1`
		);
		await query(`UPDATE job SET error_id = $2 WHERE id = $1`, [ids.job, error.id]);
		expect((await only("/jobs/")).error).toMatchObject({ id: error.id, title: error.title });
		await query(`UPDATE error SET title = 'Renamed error' WHERE id = $1`, [error.id]);
		expect((await only("/jobs/")).error.title).toBe("Renamed error");
	});

	it("show a change of the node's hostname, not of its heartbeat", async () => {
		expect((await only("/job-executions/")).node.hostname).toBe("n1.example");
		await query(`UPDATE node SET last_heartbeat = now() WHERE id = $1`, [ids.node]);
		expect((await only("/job-executions/")).node.hostname).toBe("n1.example");
		await query(`UPDATE node SET hostname = 'n9.example' WHERE id = $1`, [ids.node]);
		expect((await only("/job-executions/")).node.hostname).toBe("n9.example");
	});

	it("raise the nodes' generation when what records show of a node changes, not at a heartbeat", async () => {
		const generation = async () =>
			(
				await query<{ generation: string }>(
					`SELECT generation FROM list_generation WHERE name = 'node'`
				)
			)[0].generation;
		const before = await generation();
		await query(
			`UPDATE node SET last_heartbeat = now(), cpus_total = 7, last_modified = now() WHERE id = $1`,
			[ids.node]
		);
		expect(await generation()).toBe(before);
		await query(`UPDATE node SET port = 5052 WHERE id = $1`, [ids.node]);
		expect((await only("/job-executions/")).node.port).toBe(5052);
		await query(`UPDATE node SET slave_id = 'agent-renamed' WHERE id = $1`, [ids.node]);
		expect((await only("/job-executions/")).node.slave_id).toBe("agent-renamed");
		const changed = await generation();
		expect(Number(changed)).toBe(Number(before) + 2);
		await query(`INSERT INTO node (hostname, slave_id) VALUES ('n2.example', 'agent-2')`);
		await query(`DELETE FROM node WHERE slave_id = 'agent-2'`);
		expect(Number(await generation())).toBe(Number(changed) + 2);
	});

	it("show a change of a workspace in the files' URLs, embedded files included", async () => {
		await query(`UPDATE workspace SET base_url = 'https://cdn.example/raw/' WHERE id = $1`, [
			ids.raw
		]);
		const url = "https://cdn.example/raw/in/scene.tif";
		expect((await only("/sources/")).url).toBe(url);
		expect((await only("/sources/updates/")).url).toBe(url);
		expect((await only("/jobs/updates/")).input_files[0].url).toBe(url);
		expect((await only("/products/updates/")).source_files[0].url).toBe(url);
	});

	it("show a change of a source file, embedded in other records too", async () => {
		expect((await only("/sources/updates/")).update.action).toBe("CREATED");
		await query(
			`UPDATE scale_file SET is_parsed = true, parsed = '2024-05-01T00:00:00Z' WHERE id = $1`,
			[ids.source]
		);
		expect((await only("/sources/updates/")).update).toEqual({
			action: "PARSED",
			when: "2024-05-01T00:00:00.000Z"
		});
		expect((await only("/sources/?is_parsed=true")).is_parsed).toBe(true);
		const product = await only("/products/updates/");
		expect(product.source_files[0]).toMatchObject({ id: ids.source, is_parsed: true });
		expect((await only("/jobs/updates/")).input_files[0].is_parsed).toBe(true);
	});

	it("show a change of the execution's own row", async () => {
		expect((await only("/job-executions/")).timeout).not.toBe(4321);
		await query(`UPDATE job_exe SET timeout = 4321 WHERE id = $1`, [ids.exe]);
		expect((await only("/job-executions/")).timeout).toBe(4321);
	});

	it("show a change whose UPDATE sets last_modified to the value it had", async () => {
		await only("/jobs/");
		await query(`UPDATE job SET priority = 11, last_modified = last_modified WHERE id = $1`, [
			ids.job
		]);
		expect((await only("/jobs/")).priority).toBe(11);
	});

	it("show a change of a product and leave out one no longer listed", async () => {
		await query(`UPDATE scale_file SET is_operational = false WHERE id = $1`, [ids.product]);
		expect((await only("/products/")).is_operational).toBe(false);
		await query(
			`UPDATE scale_file SET is_deleted = true, deleted = '2024-06-01T00:00:00Z' WHERE id = $1`,
			[ids.product]
		);
		expect((await only("/products/updates/")).update.action).toBe("DELETED");
	});
});

/**
 * A page of records with embedded records (a job update's input files) reads the versions of the
 * embedded records the same page named last time with the page itself, and only those it names
 * beyond them in a second statement.
 */
describe("embedded records read with their page", () => {
	/** The job updates page (as JSON) and the statements its call ran. */
	const jobUpdates = async (params: Record<string, string>) => {
		const spy = jest.spyOn(Client.prototype, "query");
		try {
			const json = await runCachedList(
				tdb.db,
				JOB_UPDATES_LIST,
				JOB_UPDATE_RECORD,
				{ query: params, baseUrl: "http://127.0.0.1", path: "/api/jobs/updates/" },
				"http://127.0.0.1/api",
				INPUT_FILES
			);
			return { page: JSON.parse(json.toString()), statements: spy.mock.calls.length };
		} finally {
			spy.mockRestore();
		}
	};

	/**
	 * Gives the job's first input the source file and `otherId` for `run`, then its data back;
	 * answers what `run` answers.
	 */
	const withSecondInput = async <T>(otherId: number, run: () => Promise<T>): Promise<T> => {
		const [{ data }] = await query<{ data: any }>(`SELECT data FROM job WHERE id = $1`, [
			ids.job
		]);
		const input = data.input_data[0];
		const both = {
			...data,
			input_data: [
				{ name: input.name, file_ids: [ids.source, otherId] },
				...data.input_data.slice(1)
			]
		};
		try {
			await query(`UPDATE job SET data = $1 WHERE id = $2`, [both, ids.job]);
			return await run();
		} finally {
			await query(`UPDATE job SET data = $1 WHERE id = $2`, [data, ids.job]);
		}
	};

	it("answer a page asked again, unchanged, in one statement", async () => {
		const params = { page_size: "7" };
		await jobUpdates(params);
		const again = await jobUpdates(params);
		expect(again.statements).toBe(1);
		expect(again.page.results.map((r: any) => r.input_files.map((f: any) => f.id))).toEqual([
			[ids.source]
		]);
	});

	it("read the embedded records a page names beyond the last time's, and a change of those", async () => {
		const params = { page_size: "8" };
		await jobUpdates(params);
		const other = { id: await addSource("other.tif", 20) };
		await withSecondInput(other.id, async () => {
			// the page statement, the job's record read again, the new file's version, its record
			const named = await jobUpdates(params);
			expect(named.statements).toBe(4);
			expect(named.page.results[0].input_files.map((f: any) => f.id)).toEqual([
				ids.source,
				other.id
			]);
			expect((await jobUpdates(params)).statements).toBe(1);
			// a guessed file's change is read with the page
			await query(`UPDATE scale_file SET file_size = 21 WHERE id = $1`, [other.id]);
			const after = await jobUpdates(params);
			expect(after.page.results[0].input_files[1]).toMatchObject({
				id: other.id,
				file_size: 21
			});
			expect(after.statements).toBe(2);
		});
	});

	it("leave out a file the page no longer names, though read with the page", async () => {
		const params = { page_size: "9" };
		const other = { id: await addSource("dropped.tif", 30) };
		const filesOf = (page: any) => page.results[0].input_files.map((f: any) => f.id);
		await withSecondInput(other.id, async () => {
			await jobUpdates(params);
			expect(filesOf((await jobUpdates(params)).page)).toEqual([ids.source, other.id]);
		});
		// the page statement still reads the dropped file's version; the job's record is new
		const after = await jobUpdates(params);
		expect(after.statements).toBe(2);
		expect(filesOf(after.page)).toEqual([ids.source]);
		const again = await jobUpdates(params);
		expect(again.statements).toBe(1);
		expect(again.page).toEqual(after.page);
	});
});

/**
 * A kept record's version is its row's last_modified, read from the list's index: migration 0016
 * makes every UPDATE of a job, execution or file change it, as every UPDATE changed the row's
 * xmin, and keeps a value an UPDATE sets.
 */
describe("last_modified of jobs, executions and files", () => {
	const TABLES: [string, () => number][] = [
		["job", () => ids.job],
		["job_exe", () => ids.exe],
		["scale_file", () => ids.product]
	];
	/** Runs `UPDATE table SET sets` on the row; answers its last_modified after, in microseconds. */
	const update = async (table: string, id: number, sets: string, transaction?: Transaction) => {
		const [rows] = await tdb.db.query(
			`UPDATE ${table} SET ${sets} WHERE id = $1
			 RETURNING (extract(epoch FROM last_modified) * 1000000)::bigint AS at`,
			{ bind: [id], transaction }
		);
		return Number((rows as { at: string }[])[0].at);
	};

	it.each(TABLES)("%s: moves on at an UPDATE that leaves it as it was", async (table, id) => {
		const before = await update(table, id(), "last_modified = now()");
		expect(await update(table, id(), "last_modified = last_modified")).toBeGreaterThan(before);
		// now() is the transaction's: the second update sets the value the first did
		await tdb.db.transaction(async transaction => {
			const first = await update(table, id(), "last_modified = now()", transaction);
			expect(await update(table, id(), "last_modified = now()", transaction)).toBeGreaterThan(
				first
			);
		});
	});

	it.each(TABLES)("%s: keeps a value an UPDATE sets", async (table, id) => {
		const at = Date.parse("2020-01-02T03:04:05Z") * 1000;
		expect(await update(table, id(), "last_modified = '2020-01-02T03:04:05Z'")).toBe(at);
		await update(table, id(), "last_modified = now()");
	});
});
