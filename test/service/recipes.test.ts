import { getRecipeDetails, getRecipeDetailsOf } from "../../lib/records/recipe";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/**
 * Recipes over real HTTP and PostgreSQL, the read side: the list with each filter and order,
 * Scale's web UI's request and paging, and the details with every field, on rows inserted here
 * (nothing creates recipes yet) with the answers worked out by hand.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;
const ids = {
	raw: 0,
	out: 0,
	a: 0,
	b: 0,
	rule: 0,
	parse: 0,
	clock: 0,
	main: 0,
	other: 0,
	rev1: 0,
	rev2: 0,
	otherRev: 0,
	kmlType: 0,
	kmlRev: 0,
	kml: 0,
	csv: 0
};
/** r[1] .. r[5], in insertion (id) order; r[0] unused */
const r: number[] = [0];

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
	return (await get(pathAndQuery)).results.map((x: any) => x.id);
}

/** 2024-01-01 at `hh:mm` UTC, as the database is given it and as the API answers it. */
const at = (t: string) => `2024-01-01T${t}:00Z`;
const iso = (t: string) => `2024-01-01T${t}:00.000Z`;

const INTERFACE = {
	version: "1.0",
	command: "kml",
	command_arguments: "${image} ${job_output_dir}",
	input_data: [{ name: "image", type: "file", required: true, media_types: ["image/png"] }],
	output_data: [{ name: "kml", type: "file", required: true, media_type: "text/xml" }]
};

const definition = (jobName: string) => ({
	version: "1.0",
	input_data: [
		{ name: "image", type: "file", required: true, media_types: ["image/png"] },
		{ name: "extras", type: "files", required: false, media_types: [] },
		{ name: "level", type: "property", required: false }
	],
	jobs: [
		{
			name: jobName,
			job_type: { name: "kml-footprint", version: "1.2.3" },
			recipe_inputs: [{ recipe_input: "image", job_input: "image" }],
			dependencies: []
		}
	]
});
const DEF1 = definition("kml");
const DEF2 = definition("footprint");
const OTHER_DEF = { version: "1.0", input_data: [], jobs: [] };

const RULE_CONFIGURATION = {
	version: "1.0",
	condition: { media_type: "image/png", data_types: [] },
	data: { input_data_name: "image", workspace_name: "out" }
};
const PARSE_DESCRIPTION = { version: "1.0", file_name: "b.png", parse_id: 1 };

beforeAll(async () => {
	tdb = await createTestDatabase();
	[{ id: ids.raw }, { id: ids.out }] = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config, base_url) VALUES
			('raw', '{}', 'https://host/raw/'), ('out', '{}', NULL) RETURNING id`
	);
	[{ id: ids.a }, { id: ids.b }] = await query<{ id: number }>(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
			file_size, uuid, data_started, data_ended, is_parsed, parsed, created, last_modified)
		 VALUES
			('SOURCE', $1, 'a.png', 'in/a.png', 'image/png', 10, md5('a'),
				'2023-12-31T22:00:00Z', '2023-12-31T22:05:00Z', true, '2023-12-31T23:30:00Z',
				'2023-12-31T23:00:00Z', '2023-12-31T23:30:00Z'),
			('SOURCE', $2, 'b.png', 'in/b.png', 'image/png', 20, md5('b'),
				NULL, NULL, false, NULL, '2023-12-31T23:10:00Z', '2023-12-31T23:10:00Z')
		 RETURNING id`,
		[ids.raw, ids.out]
	);

	[{ id: ids.rule }] = await query<{ id: number }>(
		`INSERT INTO trigger_rule (type, name, is_active, configuration)
		 VALUES ('PARSE', 'parse-png', true, $1) RETURNING id`,
		[JSON.stringify(RULE_CONFIGURATION)]
	);
	[{ id: ids.parse }, { id: ids.clock }] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type, rule_id, description, occurred) VALUES
			('PARSE', $1, $2, '2023-12-31T23:40:00Z'), ('CLOCK', NULL, '{}', '2023-12-31T23:50:00Z')
		 RETURNING id`,
		[ids.rule, JSON.stringify(PARSE_DESCRIPTION)]
	);

	[{ id: ids.main }, { id: ids.other }] = await query<{ id: number }>(
		`INSERT INTO recipe_type (name, version, title, description, definition, revision_num,
			trigger_rule_id, created, last_modified)
		 VALUES ('rt-main', '1.0', 'Main', 'The main recipe', $1, 2, $2, '2023-12-01T00:00:00Z',
				'2023-12-02T00:00:00Z'),
			('rt-other', '2.0', 'Other', NULL, $3, 1, NULL, '2023-12-03T00:00:00Z',
				'2023-12-03T00:00:00Z')
		 RETURNING id`,
		[JSON.stringify(DEF2), ids.rule, JSON.stringify(OTHER_DEF)]
	);
	[{ id: ids.rev1 }, { id: ids.rev2 }, { id: ids.otherRev }] = await query<{ id: number }>(
		`INSERT INTO recipe_type_rev (recipe_type_id, revision_num, definition, created) VALUES
			($1, 1, $2, '2023-12-01T00:00:00Z'), ($1, 2, $3, '2023-12-02T00:00:00Z'),
			($4, 1, $5, '2023-12-03T00:00:00Z')
		 RETURNING id`,
		[ids.main, JSON.stringify(DEF1), JSON.stringify(DEF2), ids.other, JSON.stringify(OTHER_DEF)]
	);

	// recipe type, revision, event, created, completed, last modified
	const rows: [number, number, number, string, string | null, string][] = [
		[ids.main, ids.rev1, ids.parse, "01:00", "03:00", "03:00"],
		[ids.other, ids.otherRev, ids.clock, "02:00", null, "02:30"],
		[ids.main, ids.rev2, ids.parse, "00:30", null, "04:00"],
		[ids.other, ids.otherRev, ids.clock, "03:30", "05:00", "05:00"],
		[ids.main, ids.rev2, ids.clock, "00:10", "00:50", "01:00"]
	];
	for (const [type, rev, event, created, completed, modified] of rows) {
		const [row] = await query<{ id: number }>(
			`INSERT INTO recipe (recipe_type_id, recipe_type_rev_id, event_id, data, completed,
				created, last_modified)
			 VALUES ($1, $2, $3, '{"version": "1.0", "input_data": []}', $4, $5, $6)
			 RETURNING id`,
			[type, rev, event, completed && at(completed), at(created), at(modified)]
		);
		r.push(row.id);
	}
	// The first recipe's data gives b, then a and b again, and a file that no longer exists.
	await query(`UPDATE recipe SET data = $2 WHERE id = $1`, [
		r[1],
		JSON.stringify({
			version: "1.0",
			input_data: [
				{ name: "image", file_id: ids.b },
				{ name: "extras", file_ids: [ids.a, ids.b, 999999] },
				{ name: "level", value: "3" }
			],
			workspace_id: ids.out
		})
	]);

	[{ id: ids.kmlType }] = await query<{ id: number }>(
		`INSERT INTO job_type (name, version, title, description, category, icon_code, interface)
		 VALUES ('kml-footprint', '1.2.3', 'KML Footprint', 'Creates a KML footprint',
			'footprint', 'f0ac', $1) RETURNING id`,
		[JSON.stringify(INTERFACE)]
	);
	[{ id: ids.kmlRev }] = await query<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface, created)
		 VALUES ($1, 1, $2, '2023-11-06T21:30:34.622Z') RETURNING id`,
		[ids.kmlType, JSON.stringify(INTERFACE)]
	);
	// inserted kml first: the details list the jobs by name, csv first
	for (const [name, status] of [
		["kml", "COMPLETED"],
		["csv", "QUEUED"]
	]) {
		const [job] = await query<{ id: number }>(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, created, queued, started, ended, last_status_change,
				last_modified)
			 VALUES ($1, $2, $3, $4, 210, 1, 1800, 3, 1.0, 15360.0, 2.0, 16.0, '{}',
				$5, $6, $7, $8, $9, $9) RETURNING id`,
			[
				ids.kmlType,
				ids.kmlRev,
				ids.parse,
				status,
				at("01:00"),
				at("01:01"),
				status === "COMPLETED" ? at("01:02") : null,
				status === "COMPLETED" ? at("03:00") : null,
				status === "COMPLETED" ? at("03:00") : at("01:01")
			]
		);
		ids[name as "kml" | "csv"] = job.id;
		await query(`INSERT INTO recipe_job (recipe_id, job_name, job_id) VALUES ($1, $2, $3)`, [
			r[1],
			name,
			job.id
		]);
	}
	app = await startServices(tdb.url, ["api", "recipes"]);
	api = app.api;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("GET /recipes/", () => {
	it("lists recipes by last change, oldest first as Scale, each with its type, revision and event", async () => {
		const body = await get("/recipes/");
		expect(body.count).toBe(5);
		expect(body.next).toBeNull();
		expect(body.previous).toBeNull();
		expect(body.results.map((x: any) => x.id)).toEqual([r[5], r[2], r[1], r[3], r[4]]);
		expect(body.results[2]).toEqual({
			id: r[1],
			recipe_type: {
				id: ids.main,
				name: "rt-main",
				version: "1.0",
				title: "Main",
				description: "The main recipe"
			},
			recipe_type_rev: { id: ids.rev1, recipe_type: { id: ids.main }, revision_num: 1 },
			event: {
				id: ids.parse,
				type: "PARSE",
				rule: { id: ids.rule },
				occurred: "2023-12-31T23:40:00.000Z"
			},
			created: iso("01:00"),
			completed: iso("03:00"),
			last_modified: iso("03:00")
		});
		// not completed, an event without a rule, a type without a description
		expect(body.results[1]).toEqual({
			id: r[2],
			recipe_type: {
				id: ids.other,
				name: "rt-other",
				version: "2.0",
				title: "Other",
				description: null
			},
			recipe_type_rev: { id: ids.otherRev, recipe_type: { id: ids.other }, revision_num: 1 },
			event: {
				id: ids.clock,
				type: "CLOCK",
				rule: null,
				occurred: "2023-12-31T23:50:00.000Z"
			},
			created: iso("02:00"),
			completed: null,
			last_modified: iso("02:30")
		});
		// the type as it is now; the revision the recipe was scheduled with
		expect(body.results[3].recipe_type_rev).toEqual({
			id: ids.rev2,
			recipe_type: { id: ids.main },
			revision_num: 2
		});
		expect((await get("/v3/recipes/")).results).toEqual(body.results);
	});

	it("filters on type_id and type_name, each repeatable", async () => {
		expect(await listIds(`/recipes/?type_id=${ids.main}`)).toEqual([r[5], r[1], r[3]]);
		expect(await listIds(`/recipes/?type_id=${ids.other}`)).toEqual([r[2], r[4]]);
		expect(await listIds(`/recipes/?type_id=${ids.main}&type_id=${ids.other}`)).toEqual([
			r[5],
			r[2],
			r[1],
			r[3],
			r[4]
		]);
		expect(await listIds("/recipes/?type_name=rt-main")).toEqual([r[5], r[1], r[3]]);
		expect(await listIds("/recipes/?type_name=rt-other&type_name=rt-main")).toEqual([
			r[5],
			r[2],
			r[1],
			r[3],
			r[4]
		]);
		expect(await get("/recipes/?type_name=nope")).toMatchObject({ count: 0, results: [] });
		expect(await get("/recipes/?type_id=999999")).toMatchObject({ count: 0, results: [] });
		// both given: both must match
		expect(await listIds(`/recipes/?type_id=${ids.main}&type_name=rt-other`)).toEqual([]);
		expect(await listIds(`/recipes/?type_id=${ids.main}&type_name=rt-main`)).toEqual([
			r[5],
			r[1],
			r[3]
		]);
		const body = await get(`/recipes/?type_id=${ids.other}`);
		expect(body.count).toBe(2);
	});

	it("filters started/ended on last_modified, as Scale", async () => {
		// the third was created 00:30 and the first completed 03:00: their changes count
		expect(await listIds(`/recipes/?started=${at("02:30")}&ended=${at("04:00")}`)).toEqual([
			r[2],
			r[1],
			r[3]
		]);
		expect(await listIds("/recipes/?started=2024-01-01T04:00:01Z")).toEqual([r[4]]);
		expect(await listIds(`/recipes/?ended=${at("01:00")}`)).toEqual([r[5]]);
		expect(await listIds("/recipes/?started=2024-01-01T06:00:00Z")).toEqual([]);
		expect(
			await listIds(`/recipes/?started=${at("00:00")}&ended=${at("03:00")}&type_name=rt-main`)
		).toEqual([r[5], r[1]]);
	});

	it.each([
		["id", [1, 2, 3, 4, 5]],
		["-id", [5, 4, 3, 2, 1]],
		["last_modified", [5, 2, 1, 3, 4]],
		["-last_modified", [4, 3, 1, 2, 5]],
		["created", [5, 3, 1, 2, 4]],
		["-created", [4, 2, 1, 3, 5]],
		// never completed last going up and first going down, as PostgreSQL (and so Scale) sorts
		["completed", [5, 1, 4, 2, 3]],
		["-completed", [3, 2, 4, 1, 5]],
		// the web UI's "Recipe Type" column: by the type's id, ties by id
		["recipe_type", [1, 3, 5, 2, 4]],
		["-recipe_type", [4, 2, 5, 3, 1]],
		["recipe_type__id", [1, 3, 5, 2, 4]],
		["recipe_type__name&order=-last_modified", [3, 1, 5, 4, 2]],
		["-recipe_type__name&order=created", [2, 4, 5, 3, 1]],
		["recipe_type__version&order=id", [1, 3, 5, 2, 4]],
		["-recipe_type__title", [4, 2, 5, 3, 1]],
		["recipe_type_rev__revision_num&order=id", [1, 2, 4, 3, 5]],
		["recipe_type_rev&order=-id", [1, 5, 3, 4, 2]],
		["event__occurred", [1, 3, 2, 4, 5]],
		["-event&order=created", [5, 2, 4, 3, 1]]
	])("orders by %s", async (order, expected) => {
		expect(await listIds(`/recipes/?order=${order}`)).toEqual(expected.map(n => r[n]));
	});

	it("answers the web UI's request", async () => {
		const body = await get(
			"/recipes/?started=2024-01-01T00:00:00.000Z&ended=2024-01-01T04:30:00.000Z" +
				"&order=-last_modified&page=1&page_size=25"
		);
		expect(body.count).toBe(4);
		expect(body.next).toBeNull();
		expect(body.previous).toBeNull();
		expect(body.results.map((x: any) => x.id)).toEqual([r[3], r[1], r[2], r[5]]);
		// its recipe type filter and its column sorts
		expect(
			await listIds(
				`/recipes/?started=${at("00:00")}&ended=${at("06:00")}&order=-completed` +
					`&page=1&page_size=25&type_id=${ids.main}`
			)
		).toEqual([r[3], r[1], r[5]]);
		expect(
			await listIds(
				`/recipes/?started=${at("00:00")}&ended=${at("06:00")}&order=recipe_type` +
					`&order=-created&page=1&page_size=25`
			)
		).toEqual([r[1], r[3], r[5], r[4], r[2]]);
	});

	it("pages", async () => {
		const body = await get("/recipes/?page=2&page_size=2");
		expect(body.count).toBe(5);
		expect(body.results.map((x: any) => x.id)).toEqual([r[1], r[3]]);
		expect(body.next).toMatch(/\/api\/recipes\/\?page=3&page_size=2$/);
		expect(body.previous).toMatch(/\/api\/recipes\/\?page=1&page_size=2$/);
		const last = await get("/recipes/?page=3&page_size=2");
		expect(last).toMatchObject({ count: 5, next: null });
		expect(last.results.map((x: any) => x.id)).toEqual([r[4]]);
		expect(await get("/recipes/?page=4&page_size=2")).toMatchObject({
			count: 5,
			next: null,
			results: []
		});
		const v3 = await get(`/v3/recipes/?type_id=${ids.main}&page_size=1`);
		expect(v3.count).toBe(3);
		expect(v3.next).toMatch(/\/api\/v3\/recipes\/\?.*page=2/);
	});

	it("ignores query parameters it does not know (the web UI's completed, recipe_type_id...)", async () => {
		const all = await get("/recipes/");
		const body = await get(
			`/recipes/?completed=true&recipe_type_id=${ids.other}&recipe_type_name=rt-other` +
				"&url=x&foo=bar&foo=baz&nested[a]=1"
		);
		expect(body.results).toEqual(all.results);
		expect(body.count).toBe(5);
	});

	it.each([
		["type_id=x", "type_id"],
		["type_id=1.5", "type_id"],
		["type_name[a]=1", "type_name"],
		["order=nope", "order"],
		["order=recipe_type__definition", "order"],
		["order=data", "order"],
		["started=yesterday", "started"],
		["ended=2024-01-01T00:00:00", "ended"],
		[`started=${at("05:00")}&ended=${at("04:00")}`, "started"],
		["page_size=0", "page_size"],
		["page_size=1001", "page_size"],
		["page=x", "page"]
	])("answers 400 naming the field for %s", async (q, field) => {
		expectJsonError(await request("GET", `${api}/recipes/?${q}`), 400, new RegExp(field));
	});
});

describe("GET /recipes/{id}/", () => {
	it("answers the details: type, revision, event with its rule, data, input files, jobs", async () => {
		const body = await get(`/recipes/${r[1]}/`);
		expect(Object.keys(body)).toEqual([
			"id",
			"recipe_type",
			"recipe_type_rev",
			"event",
			"created",
			"completed",
			"last_modified",
			"data",
			"input_files",
			"jobs"
		]);
		const [a, b] = await query<{ uuid: string }>(
			`SELECT uuid FROM scale_file WHERE id = ANY($1::int[]) ORDER BY id`,
			[[ids.a, ids.b]]
		);
		const jobType = {
			id: ids.kmlType,
			name: "kml-footprint",
			version: "1.2.3",
			title: "KML Footprint",
			description: "Creates a KML footprint",
			category: "footprint",
			author_name: null,
			author_url: null,
			is_system: false,
			is_long_running: false,
			is_active: true,
			is_operational: true,
			is_paused: false,
			icon_code: "f0ac"
		};
		const job = (id: number, status: string, ended: string | null, changed: string) => ({
			id,
			job_type: jobType,
			job_type_rev: {
				id: ids.kmlRev,
				job_type: { id: ids.kmlType },
				revision_num: 1,
				interface: INTERFACE,
				created: "2023-11-06T21:30:34.622Z"
			},
			event: {
				id: ids.parse,
				type: "PARSE",
				rule: { id: ids.rule },
				occurred: "2023-12-31T23:40:00.000Z"
			},
			error: null,
			status,
			priority: 210,
			num_exes: 1,
			timeout: 1800,
			max_tries: 3,
			cpus_required: 1,
			mem_required: 15360,
			disk_in_required: 2,
			disk_out_required: 16,
			created: iso("01:00"),
			queued: iso("01:01"),
			started: ended === null ? null : iso("01:02"),
			ended,
			last_status_change: changed,
			last_modified: changed
		});
		expect(body).toEqual({
			id: r[1],
			recipe_type: {
				id: ids.main,
				name: "rt-main",
				version: "1.0",
				title: "Main",
				description: "The main recipe",
				is_active: true,
				definition: DEF2,
				revision_num: 2,
				created: "2023-12-01T00:00:00.000Z",
				last_modified: "2023-12-02T00:00:00.000Z",
				archived: null,
				trigger_rule: { id: ids.rule }
			},
			recipe_type_rev: {
				id: ids.rev1,
				recipe_type: { id: ids.main },
				revision_num: 1,
				definition: DEF1,
				created: "2023-12-01T00:00:00.000Z"
			},
			event: {
				id: ids.parse,
				type: "PARSE",
				rule: {
					id: ids.rule,
					type: "PARSE",
					name: "parse-png",
					is_active: true,
					configuration: RULE_CONFIGURATION
				},
				occurred: "2023-12-31T23:40:00.000Z",
				description: PARSE_DESCRIPTION
			},
			created: iso("01:00"),
			completed: iso("03:00"),
			last_modified: iso("03:00"),
			data: {
				version: "1.0",
				input_data: [
					{ name: "image", file_id: ids.b },
					{ name: "extras", file_ids: [ids.a, ids.b, 999999] },
					{ name: "level", value: "3" }
				],
				workspace_id: ids.out
			},
			// by id, each once; the file that no longer exists is left out
			input_files: [
				{
					id: ids.a,
					workspace: { id: ids.raw, name: "raw" },
					file_name: "a.png",
					media_type: "image/png",
					file_size: 10,
					data_type: [],
					is_deleted: false,
					uuid: a.uuid,
					url: "https://host/raw/in/a.png",
					created: "2023-12-31T23:00:00.000Z",
					deleted: null,
					data_started: "2023-12-31T22:00:00.000Z",
					data_ended: "2023-12-31T22:05:00.000Z",
					geometry: null,
					center_point: null,
					meta_data: {},
					countries: [],
					last_modified: "2023-12-31T23:30:00.000Z",
					is_parsed: true,
					parsed: "2023-12-31T23:30:00.000Z"
				},
				{
					id: ids.b,
					workspace: { id: ids.out, name: "out" },
					file_name: "b.png",
					media_type: "image/png",
					file_size: 20,
					data_type: [],
					is_deleted: false,
					uuid: b.uuid,
					// a workspace without a base URL: the API's download route
					url: `${api}/files/${ids.b}/download/`,
					created: "2023-12-31T23:10:00.000Z",
					deleted: null,
					data_started: null,
					data_ended: null,
					geometry: null,
					center_point: null,
					meta_data: {},
					countries: [],
					last_modified: "2023-12-31T23:10:00.000Z",
					is_parsed: false,
					parsed: null
				}
			],
			jobs: [
				{ job_name: "csv", job: job(ids.csv, "QUEUED", null, iso("01:01")) },
				{ job_name: "kml", job: job(ids.kml, "COMPLETED", iso("03:00"), iso("03:00")) }
			]
		});
	});

	it("shows an event without a rule, data without files, a recipe without jobs", async () => {
		const body = await get(`/recipes/${r[2]}/`);
		expect(body).toMatchObject({
			id: r[2],
			recipe_type: {
				id: ids.other,
				name: "rt-other",
				definition: OTHER_DEF,
				trigger_rule: null
			},
			recipe_type_rev: {
				id: ids.otherRev,
				recipe_type: { id: ids.other },
				revision_num: 1,
				definition: OTHER_DEF
			},
			event: {
				id: ids.clock,
				type: "CLOCK",
				rule: null,
				occurred: "2023-12-31T23:50:00.000Z",
				description: {}
			},
			completed: null,
			data: { version: "1.0", input_data: [] },
			input_files: [],
			jobs: []
		});
	});

	it("gives the revision the recipe was scheduled with beside its type's current definition", async () => {
		const body = await get(`/recipes/${r[3]}/`);
		expect(body.recipe_type.definition).toEqual(DEF2);
		expect(body.recipe_type_rev).toMatchObject({ id: ids.rev2, revision_num: 2 });
		expect(body.recipe_type_rev.definition).toEqual(DEF2);
		expect((await get(`/recipes/${r[1]}/`)).recipe_type_rev.definition).toEqual(DEF1);
	});

	it("is answered under /api/v3/ too, download URLs under that root", async () => {
		const body = await get(`/v3/recipes/${r[1]}/`);
		expect(body.id).toBe(r[1]);
		expect(body.input_files[1].url).toBe(`${api}/v3/files/${ids.b}/download/`);
		// and without the trailing slash
		expect((await get(`/recipes/${r[1]}`)).id).toBe(r[1]);
	});

	it("reads recipes together as it reads each alone: their own files and jobs each", async () => {
		const together = await getRecipeDetailsOf(tdb.db, [r[3], 999999, r[1], r[2]], api);
		expect([...together.keys()].sort()).toEqual([r[1], r[2], r[3]].sort());
		for (const id of [r[1], r[2], r[3]])
			expect(together.get(id)).toEqual(await getRecipeDetails(tdb.db, id, api));
		expect(together.get(r[1])?.input_files.length).toBeGreaterThan(0);
		expect(together.get(r[2])?.input_files).toEqual([]);
	});

	it("ignores query parameters", async () => {
		expect(await get(`/recipes/${r[2]}/?foo=bar&id=${r[1]}`)).toEqual(
			await get(`/recipes/${r[2]}/`)
		);
	});

	it.each(["999999", "0", "abc", "1.5", "-1", "99999999999"])(
		"answers 404 {detail} for %s",
		async id => {
			expectJsonError(await request("GET", `${api}/recipes/${id}/`), 404);
		}
	);
});
