import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/** The gateway, recipe types and job types in one process, over real HTTP and PostgreSQL. */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const LIST_FIELDS = [
	"archived",
	"created",
	"definition",
	"description",
	"id",
	"is_active",
	"last_modified",
	"name",
	"revision_num",
	"title",
	"trigger_rule",
	"version"
];
const JOB_TYPE_SUMMARY_FIELDS = [
	"author_name",
	"author_url",
	"category",
	"description",
	"icon_code",
	"id",
	"interface",
	"is_active",
	"is_long_running",
	"is_operational",
	"is_paused",
	"is_system",
	"name",
	"title",
	"version"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let ingestType: any;
let processType: any;

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function counts() {
	const [row] = await query<{ rt: number; rev: number; rule: number }>(
		`SELECT (SELECT count(*)::int FROM recipe_type) AS rt,
			(SELECT count(*)::int FROM recipe_type_rev) AS rev,
			(SELECT count(*)::int FROM trigger_rule) AS rule`
	);
	return row;
}

/** Two jobs: "ingest" takes the recipe's image, "process" takes ingest's output. */
function definition(extra: Record<string, unknown> = {}) {
	return {
		version: "1.0",
		input_data: [{ name: "image", type: "file", media_types: ["image/png"] }],
		jobs: [
			{
				name: "ingest",
				job_type: { name: "rt-ingest", version: "1.0" },
				recipe_inputs: [{ recipe_input: "image", job_input: "input_file" }]
			},
			{
				name: "process",
				job_type: { name: "rt-process", version: "2.0" },
				dependencies: [
					{ name: "ingest", connections: [{ output: "output_file", input: "in_file" }] }
				]
			}
		],
		...extra
	};
}

function ingestRule(extra: Record<string, unknown> = {}, data: Record<string, unknown> = {}) {
	return {
		type: "INGEST",
		configuration: {
			condition: { media_type: "image/png" },
			data: { input_data_name: "image", workspace_name: "raw", ...data }
		},
		...extra
	};
}

function body(name: string, extra: Record<string, unknown> = {}) {
	return { name, version: "1.0", definition: definition(), ...extra };
}

async function create(b: Record<string, unknown>) {
	const res = await request("POST", `${api}/recipe-types/`, b);
	if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
	return res.body;
}

async function patch(id: number, b: Record<string, unknown>) {
	return request("PATCH", `${api}/recipe-types/${id}/`, b);
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	await query(
		`INSERT INTO workspace (name, json_config) VALUES
			('raw', '{"version": "1.0", "broker": {"type": "host", "host_path": "/tmp"}}')`
	);
	app = await startServices(tdb.url, ["api", "job-types", "recipe-types"]);
	api = app.api;
	const jobType = async (b: Record<string, unknown>) => {
		const res = await request("POST", `${api}/job-types/`, b);
		if (res.status !== 201) throw new Error(res.text);
		return res.body;
	};
	ingestType = await jobType({
		name: "rt-ingest",
		version: "1.0",
		title: "Ingest",
		interface: {
			command: "ingest",
			command_arguments: "${input_file} ${job_output_dir}",
			input_data: [{ name: "input_file", type: "file", media_types: ["image/png"] }],
			output_data: [{ name: "output_file", type: "file", media_type: "image/png" }]
		}
	});
	processType = await jobType({
		name: "rt-process",
		version: "2.0",
		interface: {
			command: "process",
			command_arguments: "${in_file}",
			input_data: [{ name: "in_file", type: "file" }]
		}
	});
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("POST /recipe-types/", () => {
	it("answers 201, Location and the details with the job types and the rule", async () => {
		const before = await counts();
		const res = await request("POST", `${api}/recipe-types/`, {
			...body("my-recipe", { description: "Ingests and processes" }),
			trigger_rule: ingestRule()
		});
		expect(res.status).toBe(201);
		expect(res.headers.get("location")).toBe(`${api}/recipe-types/${res.body.id}/`);
		expect(Object.keys(res.body).sort()).toEqual([...LIST_FIELDS, "job_types"].sort());
		expect(res.body).toMatchObject({
			name: "my-recipe",
			version: "1.0",
			title: "my-recipe",
			description: "Ingests and processes",
			is_active: true,
			revision_num: 1,
			archived: null
		});
		expect(res.body.created).toMatch(ISO_MS_Z);
		expect(res.body.definition).toEqual({
			version: "1.0",
			input_data: [
				{ name: "image", type: "file", required: true, media_types: ["image/png"] }
			],
			jobs: [
				{
					name: "ingest",
					job_type: { name: "rt-ingest", version: "1.0" },
					recipe_inputs: [{ recipe_input: "image", job_input: "input_file" }],
					dependencies: []
				},
				{
					name: "process",
					job_type: { name: "rt-process", version: "2.0" },
					recipe_inputs: [],
					dependencies: [
						{
							name: "ingest",
							connections: [{ output: "output_file", input: "in_file" }]
						}
					]
				}
			]
		});
		expect(res.body.job_types.map((j: any) => j.id)).toEqual([ingestType.id, processType.id]);
		for (const j of res.body.job_types)
			expect(Object.keys(j).sort()).toEqual(JOB_TYPE_SUMMARY_FIELDS);
		expect(res.body.job_types[0]).toMatchObject({
			name: "rt-ingest",
			title: "Ingest",
			interface: ingestType.interface
		});
		expect(res.body.trigger_rule).toEqual({
			id: expect.any(Number),
			type: "INGEST",
			name: "my-recipe",
			is_active: true,
			configuration: {
				version: "1.0",
				condition: { media_type: "image/png", data_types: [] },
				data: { input_data_name: "image", workspace_name: "raw" }
			},
			created: expect.stringMatching(ISO_MS_Z),
			archived: null,
			last_modified: expect.stringMatching(ISO_MS_Z)
		});
		expect(await counts()).toEqual({
			rt: before.rt + 1,
			rev: before.rev + 1,
			rule: before.rule + 1
		});
		const revs = await query("SELECT * FROM recipe_type_rev WHERE recipe_type_id = $1", [
			res.body.id
		]);
		expect(revs).toHaveLength(1);
		expect(revs[0]).toMatchObject({ revision_num: 1, definition: res.body.definition });

		const got = await request("GET", `${api}/recipe-types/${res.body.id}/`);
		expect(got.status).toBe(200);
		expect(got.body).toEqual(res.body);
	});

	it("saves a recipe type without a rule, with the title given", async () => {
		const b = await create(body("plain", { title: "Plain" }));
		expect(b).toMatchObject({ title: "Plain", description: null, trigger_rule: null });
	});
});

describe("concurrent creates", () => {
	it("let one create of a name and version win and leave no stray rule or revision", async () => {
		const before = await counts();
		const replies = await Promise.all(
			Array.from({ length: 5 }, () =>
				request(
					"POST",
					`${api}/recipe-types/`,
					body("raced", { trigger_rule: ingestRule() })
				)
			)
		);
		expect(replies.filter(r => r.status === 201)).toHaveLength(1);
		for (const reply of replies.filter(r => r.status !== 201))
			expectJsonError(
				reply,
				400,
				/^name: a recipe type named "raced" with version "1\.0" already exists$/
			);
		expect(await counts()).toEqual({
			rt: before.rt + 1,
			rev: before.rev + 1,
			rule: before.rule + 1
		});
	});
});

describe("GET /recipe-types/", () => {
	beforeAll(async () => {
		await create(body("list-z", { version: "1.0" }));
		await create(body("list-y", { version: "2.0", trigger_rule: ingestRule() }));
		await create(body("list-y", { version: "1.0" }));
	});

	it("lists by name then version with the rule as a reference", async () => {
		const res = await request("GET", `${api}/recipe-types/?page_size=1000`);
		expect(res.status).toBe(200);
		const listed = res.body.results.filter((r: any) => r.name.startsWith("list-"));
		expect(listed.map((r: any) => `${r.name}@${r.version}`)).toEqual([
			"list-y@1.0",
			"list-y@2.0",
			"list-z@1.0"
		]);
		for (const r of listed) expect(Object.keys(r).sort()).toEqual(LIST_FIELDS);
		const [row] = await query(
			"SELECT trigger_rule_id FROM recipe_type WHERE name = 'list-y' AND version = '2.0'"
		);
		expect(listed[1].trigger_rule).toEqual({ id: row.trigger_rule_id });
		expect(listed[0].trigger_rule).toBeNull();
	});

	it("orders as asked", async () => {
		const res = await request("GET", `${api}/recipe-types/?order=-name&order=-version`);
		const keys = res.body.results
			.filter((r: any) => r.name.startsWith("list-"))
			.map((r: any) => `${r.name}@${r.version}`);
		expect(keys).toEqual(["list-z@1.0", "list-y@2.0", "list-y@1.0"]);
	});
});

describe("GET /recipe-types/{id}/", () => {
	it("answers 404 for an unknown or non-numeric id", async () => {
		expectJsonError(await request("GET", `${api}/recipe-types/424242/`), 404);
		expectJsonError(await request("GET", `${api}/recipe-types/x1/`), 404);
		expectJsonError(await patch(424242, { title: "x" }), 404);
	});
});

describe("PATCH /recipe-types/{id}/", () => {
	it("increments revision_num per edit; only a definition edit writes a revision", async () => {
		const rt = await create(body("edit-me", { trigger_rule: ingestRule() }));
		const titled = await patch(rt.id, {
			title: "New title",
			description: "New description",
			name: "ignored"
		});
		expect(titled.status).toBe(200);
		expect(titled.body).toMatchObject({
			name: "edit-me",
			title: "New title",
			description: "New description",
			revision_num: 2
		});
		const newDefinition = definition({
			jobs: [definition().jobs[0]]
		});
		const redefined = await patch(rt.id, { definition: newDefinition });
		expect(redefined.status).toBe(200);
		expect(redefined.body.revision_num).toBe(3);
		expect(redefined.body.definition.jobs).toHaveLength(1);
		expect(redefined.body.job_types.map((j: any) => j.name)).toEqual(["rt-ingest"]);
		const revs = await query(
			"SELECT revision_num, definition FROM recipe_type_rev WHERE recipe_type_id = $1 ORDER BY revision_num",
			[rt.id]
		);
		expect(revs.map(r => r.revision_num)).toEqual([1, 3]);
		expect(revs[1].definition).toEqual(redefined.body.definition);
		// The rule stayed through both edits.
		expect(redefined.body.trigger_rule.id).toBe(rt.trigger_rule.id);
	});

	it("pauses, replaces and removes the trigger rule (null)", async () => {
		const rt = await create(body("rule-edits", { trigger_rule: ingestRule() }));
		const first = rt.trigger_rule.id;
		const paused = await patch(rt.id, { trigger_rule: { is_active: false } });
		expect(paused.body.trigger_rule).toMatchObject({ id: first, is_active: false });

		const replaced = await patch(rt.id, { trigger_rule: ingestRule({ type: "PARSE" }) });
		expect(replaced.status).toBe(200);
		expect(replaced.body.trigger_rule).toMatchObject({ type: "PARSE", is_active: true });
		expect(replaced.body.trigger_rule.id).not.toBe(first);
		const [old] = await query("SELECT * FROM trigger_rule WHERE id = $1", [first]);
		expect(old.is_active).toBe(false);
		expect(old.archived).toBeInstanceOf(Date);

		const removed = await patch(rt.id, { trigger_rule: null });
		expect(removed.status).toBe(200);
		expect(removed.body.trigger_rule).toBeNull();
		expect(removed.body.revision_num).toBe(4);
		const [gone] = await query("SELECT * FROM trigger_rule WHERE id = $1", [
			replaced.body.trigger_rule.id
		]);
		expect(gone.is_active).toBe(false);
		expect(gone.archived).toBeInstanceOf(Date);
		const listed = await request("GET", `${api}/recipe-types/?order=-last_modified`);
		const mine = listed.body.results.find((r: any) => r.id === rt.id);
		expect(mine.trigger_rule).toBeNull();
	});

	it("refuses a definition the current rule does not fit, and writes nothing", async () => {
		const rt = await create(body("rule-fit", { trigger_rule: ingestRule() }));
		const before = await counts();
		const res = await patch(rt.id, {
			title: "changed",
			definition: definition({
				input_data: [{ name: "picture", type: "file" }],
				jobs: [
					{
						name: "ingest",
						job_type: { name: "rt-ingest", version: "1.0" },
						recipe_inputs: [{ recipe_input: "picture", job_input: "input_file" }]
					}
				]
			})
		});
		expectJsonError(
			res,
			400,
			/^trigger_rule\.configuration\.data\.input_data_name: "image" names no input/
		);
		expect(await counts()).toEqual(before);
		const got = await request("GET", `${api}/recipe-types/${rt.id}/`);
		expect(got.body).toMatchObject({ title: "rule-fit", revision_num: 1 });
	});

	it("answers 400 for a bad definition and writes nothing", async () => {
		const rt = await create(body("bad-edit"));
		const before = await counts();
		const res = await patch(rt.id, {
			title: "changed",
			definition: definition({
				jobs: [{ name: "x", job_type: { name: "nope", version: "1" } }]
			})
		});
		expectJsonError(
			res,
			400,
			/^definition\.jobs\[0\]\.job_type: job type "nope" version "1" does not exist$/
		);
		expect(await counts()).toEqual(before);
		const got = await request("GET", `${api}/recipe-types/${rt.id}/`);
		expect(got.body).toMatchObject({ title: "bad-edit", revision_num: 1 });
	});
});

describe("job type interface edits and the recipe types using them", () => {
	it("refuses a job type interface that breaks a recipe type, changing nothing", async () => {
		await create(body("uses-ingest"));
		const [before] = await query<{ n: number }>("SELECT count(*)::int AS n FROM job_type_rev");
		const res = await request("PATCH", `${api}/job-types/${ingestType.id}/`, {
			interface: {
				command: "ingest",
				command_arguments: "${input_file}",
				input_data: [{ name: "input_file", type: "file", media_types: ["image/png"] }],
				output_data: []
			}
		});
		expectJsonError(
			res,
			400,
			/^interface: does not fit recipe type "[^"]+" version "1\.0": definition\.jobs\[1\]\.dependencies\[0\]\.connections\[0\]\.output: "output_file" is not an output/
		);
		const [after] = await query<{ n: number }>("SELECT count(*)::int AS n FROM job_type_rev");
		expect(after.n).toBe(before.n);
		const got = await request("GET", `${api}/job-types/${ingestType.id}/`);
		expect(got.body.revision_num).toBe(1);
	});
});

describe("POST /recipe-types/validation/", () => {
	it("answers the media_type warning and saves nothing", async () => {
		const before = await counts();
		const res = await request(
			"POST",
			`${api}/recipe-types/validation/`,
			body("validated", {
				trigger_rule: {
					type: "PARSE",
					configuration: {
						condition: { media_type: "image/tiff" },
						data: { input_data_name: "image", workspace_name: "raw" }
					}
				}
			})
		);
		expect(res.status).toBe(200);
		expect(res.body).toEqual({
			warnings: [
				{
					id: "media_type",
					details: "Invalid media type for data input: image -> image/tiff"
				}
			]
		});
		expect(await counts()).toEqual(before);
	});

	it("answers no warnings for a good recipe type", async () => {
		const res = await request("POST", `${api}/recipe-types/validation/`, body("fine"));
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ warnings: [] });
	});

	it("answers 400 for a bad definition", async () => {
		const res = await request(
			"POST",
			`${api}/recipe-types/validation/`,
			body("bad", { definition: { jobs: "none" } })
		);
		expectJsonError(res, 400, /^definition\.jobs: must be array$/);
	});
});

describe("bad create bodies", () => {
	beforeAll(async () => {
		await create(body("taken"));
	});

	const jobs = definition().jobs;
	const cases: [string, Record<string, unknown>, RegExp][] = [
		["missing name", { version: "1.0", definition: definition() }, /^name: is required$/],
		["missing definition", { name: "n", version: "1.0" }, /^definition: is required$/],
		[
			"a duplicate name and version",
			body("taken"),
			/^name: a recipe type named "taken" with version "1\.0" already exists$/
		],
		[
			"a missing job type",
			body("n", {
				definition: definition({
					jobs: [
						jobs[0],
						{ ...jobs[1], job_type: { name: "rt-process", version: "9.9" } }
					]
				})
			}),
			/^definition\.jobs\[1\]\.job_type: job type "rt-process" version "9\.9" does not exist$/
		],
		[
			"a dependency cycle",
			body("n", {
				definition: definition({
					jobs: [
						{ ...jobs[0], dependencies: [{ name: "process", connections: [] }] },
						jobs[1]
					]
				})
			}),
			/^definition\.jobs: the job dependencies form a cycle/
		],
		[
			"a connection from an output that does not exist",
			body("n", {
				definition: definition({
					jobs: [
						jobs[0],
						{
							...jobs[1],
							dependencies: [
								{
									name: "ingest",
									connections: [{ output: "nothing", input: "in_file" }]
								}
							]
						}
					]
				})
			}),
			/^definition\.jobs\[1\]\.dependencies\[0\]\.connections\[0\]\.output: "nothing" is not an output/
		],
		[
			"a rule input that is not a recipe input",
			body("n", { trigger_rule: ingestRule({}, { input_data_name: "input_file" }) }),
			/^trigger_rule\.configuration\.data\.input_data_name: "input_file" names no input/
		],
		[
			"a rule with a missing workspace",
			body("n", { trigger_rule: ingestRule({}, { workspace_name: "nowhere" }) }),
			/^trigger_rule\.configuration\.data\.workspace_name: "nowhere" is not the name of a workspace$/
		],
		[
			"a bad rule type",
			body("n", { trigger_rule: ingestRule({ type: "HOURLY" }) }),
			/^trigger_rule\.type: must be one of INGEST, PARSE, CLOCK$/
		],
		["a title too long", body("n", { title: "t".repeat(51) }), /^title: /],
		[
			"a definition that is an array",
			body("n", { definition: [] }),
			/^definition: must be object$/
		]
	];
	it.each(cases)("answers 400 for %s, writing nothing", async (_name, b, detail) => {
		const before = await counts();
		expectJsonError(await request("POST", `${api}/recipe-types/`, b), 400, detail);
		expect(await counts()).toEqual(before);
	});
});
