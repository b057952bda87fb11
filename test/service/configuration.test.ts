import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import {
	request,
	startServices,
	type Reply,
	type TestApi,
	expectJsonError
} from "../helpers/broker";

/**
 * Configuration export, import, validation, download and upload (Scale's port app) through the
 * gateway, over real HTTP and PostgreSQL: database A holds a configuration built through the
 * REST API; database B (the round trip) starts empty.
 */

const SERVICES = ["api", "errors", "workspaces", "job-types", "recipe-types", "configuration"];

/** The fields of Scale's ConfigurationJobTypeSerializer, ...RecipeTypeSerializer, ...ErrorSerializer. */
const JOB_TYPE_FIELDS = [
	"author_name",
	"author_url",
	"category",
	"cpus_required",
	"description",
	"disk_out_const_required",
	"disk_out_mult_required",
	"docker_image",
	"docker_privileged",
	"error_mapping",
	"icon_code",
	"interface",
	"is_operational",
	"max_scheduled",
	"max_tries",
	"mem_required",
	"name",
	"priority",
	"timeout",
	"title",
	"trigger_rule",
	"version"
];
const RECIPE_TYPE_FIELDS = [
	"definition",
	"description",
	"name",
	"title",
	"trigger_rule",
	"version"
];
const ERROR_FIELDS = ["category", "description", "name", "title"];
const RULE_FIELDS = ["configuration", "is_active", "name", "type"];

const MAX_UPLOAD_BYTES = 5 * 1024 * 1024;

let tdb: TestDatabase;
let app: TestApi;
let api: string;
/** ids in database A, by name */
const ids: Record<string, number> = {};

async function query<T = Record<string, any>>(
	db: TestDatabase,
	sql: string,
	bind: unknown[] = []
): Promise<T[]> {
	const [rows] = await db.db.query(sql, { bind });
	return rows as T[];
}

/** Row counts of every table an import writes. */
async function counts(db: TestDatabase = tdb) {
	const [row] = await query(
		db,
		`SELECT (SELECT count(*)::int FROM error) AS error,
			(SELECT count(*)::int FROM job_type) AS job_type,
			(SELECT count(*)::int FROM job_type_rev) AS job_type_rev,
			(SELECT count(*)::int FROM recipe_type) AS recipe_type,
			(SELECT count(*)::int FROM recipe_type_rev) AS recipe_type_rev,
			(SELECT count(*)::int FROM trigger_rule) AS trigger_rule,
			(SELECT count(*)::int FROM workspace) AS workspace`
	);
	return row;
}

/** Everything an import may touch, row by row, to prove that nothing changed. */
async function snapshot(db: TestDatabase = tdb) {
	const table = (name: string) => query(db, `SELECT * FROM ${name} ORDER BY id`);
	return {
		error: await table("error"),
		job_type: await table("job_type"),
		job_type_rev: await table("job_type_rev"),
		recipe_type: await table("recipe_type"),
		recipe_type_rev: await table("recipe_type_rev"),
		trigger_rule: await table("trigger_rule")
	};
}

async function ok(method: string, url: string, body?: unknown, status = 201) {
	const res = await request(method, url, body);
	if (res.status !== status) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
	return res.body;
}

const exportOf = (qs = "", base = api) => request("GET", `${base}/configuration/${qs}`);

async function exported(qs = "", base = api) {
	const res = await exportOf(qs, base);
	expect(res.status).toBe(200);
	return res.body;
}

/** The names of each list of an export, to compare what a filter kept. */
function names(config: any) {
	return {
		recipe_types: config.recipe_types.map((r: any) => `${r.name}@${r.version}`),
		job_types: config.job_types.map((j: any) => `${j.name}@${j.version}`),
		errors: config.errors.map((e: any) => e.name)
	};
}

const importConfig = (doc: unknown, base = api) =>
	request("POST", `${base}/configuration/`, { import: doc });
const validateConfig = (doc: unknown, base = api) =>
	request("POST", `${base}/configuration/validation/`, { import: doc });

function iface(inputs: unknown[], outputs: unknown[] = [], command = "run") {
	return {
		version: "1.0",
		command,
		command_arguments: "${job_output_dir}",
		input_data: inputs,
		output_data: outputs
	};
}

const PNG_INPUT = { name: "input_file", type: "file", media_types: ["image/png"] };

function parseRule(mediaType: string, input = "input_file", workspace = "raw") {
	return {
		type: "PARSE",
		name: "parse-png",
		is_active: true,
		configuration: {
			version: "1.0",
			condition: { media_type: mediaType, data_types: [] },
			data: { input_data_name: input, workspace_name: workspace }
		}
	};
}

/** A new job type as an import entry, valid on its own. */
function jobTypeEntry(name: string, extra: Record<string, unknown> = {}) {
	return { name, version: "1.0", interface: iface([PNG_INPUT]), ...extra };
}

const MAIN_DEFINITION = {
	version: "1.0",
	input_data: [{ name: "image", type: "file", media_types: ["image/png"] }],
	jobs: [
		{
			name: "ingest",
			job_type: { name: "jt-ingest", version: "1.0" },
			recipe_inputs: [{ recipe_input: "image", job_input: "input_file" }]
		},
		{
			name: "process",
			job_type: { name: "jt-process", version: "2.0" },
			dependencies: [
				{ name: "ingest", connections: [{ output: "output_file", input: "in_file" }] }
			]
		}
	]
};

async function createWorkspace(base: string, name: string) {
	return ok("POST", `${base}/workspaces/`, {
		name,
		title: name,
		// a directory of its own: the temp folder itself may hold the service's data directory
		json_config: {
			broker: { type: "host", host_path: fs.mkdtempSync(path.join(os.tmpdir(), "ws-")) }
		}
	});
}

/**
 * Database A: workspace raw; errors bad-data (DATA) and bad-algo (ALGORITHM), plus a SYSTEM error
 * (written directly: the API only makes ALGORITHM and DATA); job types jt-ingest (maps exit code
 * 1 to bad-data, PARSE rule), jt-process and jt-other (maps to bad-algo); recipe types rt-main
 * (jt-ingest then jt-process, with an INGEST rule) and rt-solo (jt-other).
 */
async function buildConfigurationA() {
	await createWorkspace(api, "raw");
	ids["bad-data"] = (
		await ok("POST", `${api}/errors/`, {
			name: "bad-data",
			title: "Bad Data",
			description: "The input is corrupt",
			category: "DATA"
		})
	).id;
	ids["bad-algo"] = (
		await ok("POST", `${api}/errors/`, {
			name: "bad-algo",
			title: "Bad Algorithm",
			category: "ALGORITHM"
		})
	).id;
	const [sys] = await query(
		tdb,
		`INSERT INTO error (name, title, category) VALUES ('site-system', 'Site', 'SYSTEM')
		 RETURNING id`
	);
	ids["site-system"] = sys.id;
	ids["jt-ingest"] = (
		await ok("POST", `${api}/job-types/`, {
			name: "jt-ingest",
			version: "1.0",
			title: "Ingest",
			description: "Ingests images",
			category: "ingest",
			author_name: "Someone",
			priority: 10,
			timeout: 600,
			max_tries: 5,
			cpus_required: 2.5,
			mem_required: 1024,
			docker_image: "example/ingest:1.0",
			interface: iface(
				[PNG_INPUT],
				[{ name: "output_file", type: "file", media_type: "image/png" }],
				"ingest"
			),
			error_mapping: { version: "1.0", exit_codes: { "1": "bad-data" } },
			trigger_rule: parseRule("image/png")
		})
	).id;
	ids["jt-process"] = (
		await ok("POST", `${api}/job-types/`, {
			name: "jt-process",
			version: "2.0",
			category: "process",
			interface: iface([{ name: "in_file", type: "file" }], [], "process")
		})
	).id;
	ids["jt-other"] = (
		await ok("POST", `${api}/job-types/`, {
			name: "jt-other",
			version: "1.0",
			category: "other",
			interface: iface([PNG_INPUT], [], "other"),
			error_mapping: { exit_codes: { "2": "bad-algo" } }
		})
	).id;
	ids["rt-main"] = (
		await ok("POST", `${api}/recipe-types/`, {
			name: "rt-main",
			version: "1.0",
			title: "Main",
			description: "Ingest, then process",
			definition: MAIN_DEFINITION,
			trigger_rule: {
				type: "INGEST",
				is_active: true,
				configuration: {
					condition: { media_type: "image/png" },
					data: { input_data_name: "image", workspace_name: "raw" }
				}
			}
		})
	).id;
	ids["rt-solo"] = (
		await ok("POST", `${api}/recipe-types/`, {
			name: "rt-solo",
			version: "1.0",
			definition: {
				version: "1.0",
				input_data: [{ name: "image", type: "file" }],
				jobs: [
					{
						name: "only",
						job_type: { name: "jt-other", version: "1.0" },
						recipe_inputs: [{ recipe_input: "image", job_input: "input_file" }]
					}
				]
			}
		})
	).id;
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, SERVICES);
	api = app.api;
	await buildConfigurationA();
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

/** Every key anywhere in a JSON value, to prove there is no id at any depth. */
function keysDeep(value: unknown, into = new Set<string>()): Set<string> {
	if (Array.isArray(value)) value.forEach(v => keysDeep(v, into));
	else if (value && typeof value === "object")
		for (const [k, v] of Object.entries(value)) {
			into.add(k);
			keysDeep(v, into);
		}
	return into;
}

describe("GET /configuration/ (export)", () => {
	it("answers {version, recipe_types, job_types, errors} without ids, SYSTEM or built-in errors", async () => {
		const res = await exportOf();
		expect(res.status).toBe(200);
		expect(res.headers.get("content-type")).toMatch(/^application\/json/);
		expect(res.headers.get("content-disposition")).toBeNull();
		const config = res.body;
		expect(Object.keys(config).sort()).toEqual([
			"errors",
			"job_types",
			"recipe_types",
			"version"
		]);
		expect(config.version).toBe("1.0");
		expect(names(config)).toEqual({
			recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
			job_types: ["jt-ingest@1.0", "jt-other@1.0", "jt-process@2.0"],
			errors: ["bad-algo", "bad-data"]
		});
		const deep = keysDeep(config);
		for (const key of ["id", "created", "last_modified", "revision_num", "is_builtin"])
			expect(deep.has(key)).toBe(false);
		for (const j of config.job_types) expect(Object.keys(j).sort()).toEqual(JOB_TYPE_FIELDS);
		for (const r of config.recipe_types)
			expect(Object.keys(r).sort()).toEqual(RECIPE_TYPE_FIELDS);
		for (const e of config.errors) expect(Object.keys(e).sort()).toEqual(ERROR_FIELDS);

		// The SYSTEM errors (built-in or not) and the built-in ALGORITHM error exist, unexported.
		const [{ system, builtin }] = await query(
			tdb,
			`SELECT count(*) FILTER (WHERE category = 'SYSTEM')::int AS system,
				count(*) FILTER (WHERE is_builtin AND category <> 'SYSTEM')::int AS builtin
			 FROM error`
		);
		expect(system).toBeGreaterThan(1);
		expect(builtin).toBeGreaterThanOrEqual(1);
	});

	it("carries each record's fields, documents and trigger rule", async () => {
		const config = await exported();
		const ingest = config.job_types.find((j: any) => j.name === "jt-ingest");
		expect(ingest).toMatchObject({
			version: "1.0",
			title: "Ingest",
			description: "Ingests images",
			category: "ingest",
			author_name: "Someone",
			author_url: null,
			is_operational: true,
			docker_privileged: false,
			docker_image: "example/ingest:1.0",
			priority: 10,
			timeout: 600,
			max_scheduled: null,
			max_tries: 5,
			cpus_required: 2.5,
			mem_required: 1024,
			error_mapping: { version: "1.0", exit_codes: { "1": "bad-data" } }
		});
		expect(ingest.interface).toMatchObject({
			command: "ingest",
			input_data: [{ name: "input_file", type: "file", media_types: ["image/png"] }]
		});
		expect(Object.keys(ingest.trigger_rule).sort()).toEqual(RULE_FIELDS);
		expect(ingest.trigger_rule).toMatchObject({
			type: "PARSE",
			name: "parse-png",
			is_active: true,
			configuration: {
				condition: { media_type: "image/png", data_types: [] },
				data: { input_data_name: "input_file", workspace_name: "raw" }
			}
		});
		const proc = config.job_types.find((j: any) => j.name === "jt-process");
		expect(proc.trigger_rule).toBeNull();
		expect(proc.error_mapping).toEqual({ version: "1.0", exit_codes: {} });

		const main = config.recipe_types.find((r: any) => r.name === "rt-main");
		expect(main).toMatchObject({ title: "Main", description: "Ingest, then process" });
		expect(main.definition.jobs.map((j: any) => j.job_type)).toEqual([
			{ name: "jt-ingest", version: "1.0" },
			{ name: "jt-process", version: "2.0" }
		]);
		expect(main.trigger_rule).toMatchObject({ type: "INGEST", is_active: true });
		expect(config.recipe_types.find((r: any) => r.name === "rt-solo").trigger_rule).toBeNull();

		expect(config.errors).toEqual([
			{ name: "bad-algo", title: "Bad Algorithm", description: null, category: "ALGORITHM" },
			{
				name: "bad-data",
				title: "Bad Data",
				description: "The input is corrupt",
				category: "DATA"
			}
		]);
	});

	it("answers with the trailing slash or without, and under /api/v3", async () => {
		const all = await exported();
		const bare = await request("GET", `${api}/configuration`);
		expect(bare.status).toBe(200);
		expect(bare.body).toEqual(all);
		const v3 = await request("GET", `${api.replace(/\/api$/, "/api/v3")}/configuration/`);
		expect(v3.status).toBe(200);
		expect(v3.body).toEqual(all);
	});

	describe("include", () => {
		it("keeps only the lists named, the others empty", async () => {
			const all = await exported();
			expect(await exported("?include=errors")).toEqual({
				version: "1.0",
				recipe_types: [],
				job_types: [],
				errors: all.errors
			});
			expect(await exported("?include=job_types&include=recipe_types")).toEqual({
				version: "1.0",
				recipe_types: all.recipe_types,
				job_types: all.job_types,
				errors: []
			});
			expect(
				await exported("?include=recipe_types&include=job_types&include=errors")
			).toEqual(all);
		});

		it("applies last, after the cascade of the filters", async () => {
			// The errors still follow the recipe type filter although no job type is included.
			expect(names(await exported("?recipe_type_name=rt-solo&include=errors"))).toEqual({
				recipe_types: [],
				job_types: [],
				errors: ["bad-algo"]
			});
		});

		it("rejects an unknown value with 400 naming include", async () => {
			expectJsonError(await exportOf("?include=nodes"), 400, /include/);
			expectJsonError(await exportOf("?include=errors&include=workspaces"), 400, /include/);
		});
	});

	describe("filters and Scale's cascade", () => {
		it("recipe_type_name narrows the job types to those the definition uses, and the errors to their mappings", async () => {
			expect(names(await exported("?recipe_type_name=rt-main"))).toEqual({
				recipe_types: ["rt-main@1.0"],
				job_types: ["jt-ingest@1.0", "jt-process@2.0"],
				errors: ["bad-data"]
			});
		});

		it("recipe_type_id does the same, and repeats", async () => {
			expect(names(await exported(`?recipe_type_id=${ids["rt-solo"]}`))).toEqual({
				recipe_types: ["rt-solo@1.0"],
				job_types: ["jt-other@1.0"],
				errors: ["bad-algo"]
			});
			expect(
				names(
					await exported(
						`?recipe_type_id=${ids["rt-solo"]}&recipe_type_id=${ids["rt-main"]}`
					)
				)
			).toEqual({
				recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
				job_types: ["jt-ingest@1.0", "jt-other@1.0", "jt-process@2.0"],
				errors: ["bad-algo", "bad-data"]
			});
		});

		it("a recipe type filter matching nothing exports no job types and no errors", async () => {
			expect(names(await exported("?recipe_type_name=nothing"))).toEqual({
				recipe_types: [],
				job_types: [],
				errors: []
			});
		});

		it("job type filters narrow the errors but not the recipe types", async () => {
			expect(names(await exported("?job_type_name=jt-other"))).toEqual({
				recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
				job_types: ["jt-other@1.0"],
				errors: ["bad-algo"]
			});
			expect(names(await exported("?job_type_category=process"))).toEqual({
				recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
				job_types: ["jt-process@2.0"],
				errors: []
			});
			expect(
				names(
					await exported(
						`?job_type_id=${ids["jt-ingest"]}&job_type_id=${ids["jt-other"]}`
					)
				)
			).toEqual({
				recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
				job_types: ["jt-ingest@1.0", "jt-other@1.0"],
				errors: ["bad-algo", "bad-data"]
			});
			expect(
				names(await exported("?job_type_category=ingest&job_type_category=other")).job_types
			).toEqual(["jt-ingest@1.0", "jt-other@1.0"]);
			// Several job type filters must all match.
			expect(
				names(await exported("?job_type_name=jt-ingest&job_type_category=other")).job_types
			).toEqual([]);
		});

		it("a job type filter takes over from the recipe type cascade (Scale)", async () => {
			expect(
				names(await exported("?recipe_type_name=rt-main&job_type_name=jt-other"))
			).toEqual({
				recipe_types: ["rt-main@1.0"],
				job_types: ["jt-other@1.0"],
				errors: ["bad-algo"]
			});
		});

		it("error filters replace the cascade and repeat", async () => {
			expect(names(await exported("?job_type_name=jt-process&error_name=bad-algo"))).toEqual({
				recipe_types: ["rt-main@1.0", "rt-solo@1.0"],
				job_types: ["jt-process@2.0"],
				errors: ["bad-algo"]
			});
			expect(
				names(await exported(`?recipe_type_name=rt-main&error_id=${ids["bad-algo"]}`))
					.errors
			).toEqual(["bad-algo"]);
			expect(names(await exported("?error_name=bad-data")).errors).toEqual(["bad-data"]);
			expect(
				names(await exported("?error_name=bad-data&error_name=bad-algo")).errors
			).toEqual(["bad-algo", "bad-data"]);
			expect(
				names(await exported(`?error_id=${ids["bad-data"]}&error_id=${ids["bad-algo"]}`))
					.errors
			).toEqual(["bad-algo", "bad-data"]);
			// Error filters do not narrow the types.
			const onlyError = names(await exported(`?error_id=${ids["bad-data"]}`));
			expect(onlyError.job_types).toHaveLength(3);
			expect(onlyError.recipe_types).toHaveLength(2);
		});

		it("never exports SYSTEM or built-in errors, even when asked by name or id", async () => {
			const [unknown] = await query(tdb, "SELECT id FROM error WHERE name = 'unknown'");
			const [builtin] = await query(
				tdb,
				"SELECT name, id FROM error WHERE is_builtin AND category <> 'SYSTEM' LIMIT 1"
			);
			expect(
				(
					await exported(
						`?error_name=site-system&error_name=unknown&error_name=${builtin.name}` +
							`&error_id=${ids["site-system"]}`
					)
				).errors
			).toEqual([]);
			expect(
				(await exported(`?error_id=${unknown.id}&error_id=${builtin.id}`)).errors
			).toEqual([]);
		});

		it("never exports system job types", async () => {
			await query(
				tdb,
				`INSERT INTO job_type (name, version, category, is_system, interface)
				 VALUES ('jt-system', '1.0', 'system', true, '{"version": "1.0", "command": "x",
					"command_arguments": "", "input_data": [], "output_data": []}'),
				 ('jt-sys-cat', '1.0', 'system', false, '{"version": "1.0", "command": "x",
					"command_arguments": "", "input_data": [], "output_data": []}')`
			);
			try {
				expect(names(await exported()).job_types).toEqual([
					"jt-ingest@1.0",
					"jt-other@1.0",
					"jt-process@2.0"
				]);
				expect(
					(await exported("?job_type_name=jt-system&job_type_category=system")).job_types
				).toEqual([]);
			} finally {
				await query(tdb, "DELETE FROM job_type WHERE name IN ('jt-system', 'jt-sys-cat')");
			}
		});

		it("rejects ids that are not integers with 400", async () => {
			expectJsonError(await exportOf("?job_type_id=abc"), 400, /job_type_id/);
			expectJsonError(await exportOf("?recipe_type_id=1.5"), 400, /recipe_type_id/);
			expectJsonError(await exportOf("?error_id=0"), 400, /error_id/);
		});
	});
});

describe("GET /configuration/download/", () => {
	it("answers the export as an attachment named configuration.json", async () => {
		const res = await request("GET", `${api}/configuration/download/`);
		expect(res.status).toBe(200);
		expect(res.headers.get("content-disposition")).toBe(
			'attachment; filename="configuration.json"'
		);
		expect(res.headers.get("content-type")).toMatch(/^application\/json/);
		expect(res.body).toEqual(await exported());
	});

	it("takes the export's parameters", async () => {
		const qs = "?recipe_type_name=rt-main&include=job_types&include=errors";
		const res = await request("GET", `${api}/configuration/download/${qs}`);
		expect(res.status).toBe(200);
		expect(res.headers.get("content-disposition")).toBe(
			'attachment; filename="configuration.json"'
		);
		expect(res.body).toEqual(await exported(qs));
		expect(names(res.body)).toEqual({
			recipe_types: [],
			job_types: ["jt-ingest@1.0", "jt-process@2.0"],
			errors: ["bad-data"]
		});
		expectJsonError(
			await request("GET", `${api}/configuration/download/?include=bogus`),
			400,
			/include/
		);
	});
});

describe("round trip into an empty database", () => {
	let tdbB: TestDatabase;
	let appB: TestApi;
	let apiB: string;

	beforeAll(async () => {
		tdbB = await createTestDatabase();
		appB = await startServices(tdbB.url, SERVICES);
		apiB = appB.api;
	});

	afterAll(async () => {
		await appB?.stop();
		await tdbB?.drop();
	});

	it("imports A's export into B, whose export then equals A's", async () => {
		const configA = await exported();
		expect(await exported("", apiB)).toEqual({
			version: "1.0",
			recipe_types: [],
			job_types: [],
			errors: []
		});

		// Workspaces are not exported: without B's own "raw", the trigger rules cannot be imported.
		const before = await snapshot(tdbB);
		expectJsonError(
			await importConfig(configA, apiB),
			400,
			/^import\.job_types\[0\]\.trigger_rule\.configuration\.data\.workspace_name: "raw"/
		);
		expect(await snapshot(tdbB)).toEqual(before);

		await createWorkspace(apiB, "raw");
		// rt-solo's input takes any file, jt-other's input only PNG: the warning rt-solo's
		// creation in A gave (recipe definition checks), again.
		const soloWarning = {
			id: "media_type",
			details:
				'Invalid media type for data input: input_file -> application/octet-stream (job only, from recipe input "image")'
		};
		const res = await importConfig(configA, apiB);
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ warnings: [soloWarning] });

		expect(await exported("", apiB)).toEqual(configA);
		// Filtered exports agree too.
		for (const qs of ["?recipe_type_name=rt-main", "?job_type_category=other&include=errors"])
			expect(await exported(qs, apiB)).toEqual(await exported(qs));

		// Everything was created: revision 1 of each, one rule per owner (beside what migrations
		// make: the system job type scale-strike and the two clock rules).
		expect(await counts(tdbB)).toMatchObject({
			job_type: 3 + 1,
			job_type_rev: 3 + 1,
			recipe_type: 2,
			recipe_type_rev: 2,
			trigger_rule: 2 + 2
		});
		const revs = await query(
			tdbB,
			"SELECT revision_num FROM job_type UNION ALL SELECT revision_num FROM recipe_type"
		);
		expect(revs.map(r => r.revision_num)).toEqual([1, 1, 1, 1, 1, 1]);
		const details = await ok(
			"GET",
			`${apiB}/job-types/${(await query(tdbB, "SELECT id FROM job_type WHERE name = 'jt-ingest'"))[0].id}/`,
			undefined,
			200
		);
		expect(details.errors.map((e: any) => e.name)).toEqual(["bad-data"]);
		expect(details.trigger_rule).toMatchObject({ type: "PARSE", name: "parse-png" });

		// Importing the same export again changes nothing that an export shows, and adds no rules.
		const rules = (await counts(tdbB)).trigger_rule;
		const again = await importConfig(configA, apiB);
		expect(again.status).toBe(200);
		expect(again.body).toEqual({ warnings: [soloWarning] });
		expect(await exported("", apiB)).toEqual(configA);
		expect((await counts(tdbB)).trigger_rule).toBe(rules);
	});
});

describe("POST /configuration/ (import)", () => {
	it("updates a job type found by name and version: revision_num increments", async () => {
		const before = await query(tdb, "SELECT * FROM job_type WHERE id = $1", [ids["jt-ingest"]]);
		const beforeCounts = await counts();
		const res = await importConfig({
			job_types: [{ name: "jt-ingest", version: "1.0", title: "Ingest v2" }]
		});
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ warnings: [] });
		const [after] = await query(tdb, "SELECT * FROM job_type WHERE id = $1", [
			ids["jt-ingest"]
		]);
		expect(after.title).toBe("Ingest v2");
		expect(after.revision_num).toBe(before[0].revision_num + 1);
		// Absent fields keep their values: interface, mapping, rule, description.
		expect(after.interface).toEqual(before[0].interface);
		expect(after.error_mapping).toEqual(before[0].error_mapping);
		expect(after.trigger_rule_id).toBe(before[0].trigger_rule_id);
		expect(after.description).toBe("Ingests images");
		// No new interface, no new revision row; nothing created.
		expect(await counts()).toEqual(beforeCounts);
	});

	it("updates from a whole exported entry, keeping an unchanged trigger rule", async () => {
		const config = await exported("?job_type_name=jt-ingest&include=job_types");
		const entry = { ...config.job_types[0], title: "Ingest v3", priority: 20 };
		const [before] = await query(tdb, "SELECT * FROM job_type WHERE id = $1", [
			ids["jt-ingest"]
		]);
		const beforeCounts = await counts();
		const res = await importConfig({ version: "1.0", job_types: [entry] });
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ warnings: [] });
		const [after] = await query(tdb, "SELECT * FROM job_type WHERE id = $1", [
			ids["jt-ingest"]
		]);
		expect(after).toMatchObject({
			title: "Ingest v3",
			priority: 20,
			revision_num: before.revision_num + 1,
			trigger_rule_id: before.trigger_rule_id
		});
		// The interface was given: a new revision row, with the same interface.
		expect(await counts()).toEqual({
			...beforeCounts,
			job_type_rev: beforeCounts.job_type_rev + 1
		});
		const exportedNow = await exported("?job_type_name=jt-ingest&include=job_types");
		expect(exportedNow.job_types).toEqual([entry]);
	});

	it("updates a recipe type and an error by name", async () => {
		const [rtBefore] = await query(tdb, "SELECT * FROM recipe_type WHERE id = $1", [
			ids["rt-main"]
		]);
		const res = await importConfig({
			recipe_types: [{ name: "rt-main", version: "1.0", description: "Changed" }],
			errors: [{ name: "bad-algo", description: "Now described" }]
		});
		expect(res.status).toBe(200);
		expect(res.body).toEqual({ warnings: [] });
		const [rtAfter] = await query(tdb, "SELECT * FROM recipe_type WHERE id = $1", [
			ids["rt-main"]
		]);
		expect(rtAfter).toMatchObject({
			description: "Changed",
			title: "Main",
			revision_num: rtBefore.revision_num + 1,
			definition: rtBefore.definition,
			trigger_rule_id: rtBefore.trigger_rule_id
		});
		const [error] = await query(tdb, "SELECT * FROM error WHERE id = $1", [ids["bad-algo"]]);
		expect(error).toMatchObject({
			title: "Bad Algorithm",
			description: "Now described",
			category: "ALGORITHM"
		});
	});

	it("creates a new version of a job type next to the existing one", async () => {
		const res = await importConfig({
			job_types: [jobTypeEntry("jt-ingest", { version: "2.0", title: "Ingest 2" })]
		});
		expect(res.status).toBe(200);
		const rows = await query(
			tdb,
			"SELECT version, title, revision_num FROM job_type WHERE name = 'jt-ingest' ORDER BY version"
		);
		expect(rows).toEqual([
			{ version: "1.0", title: "Ingest v3", revision_num: 3 },
			{ version: "2.0", title: "Ingest 2", revision_num: 1 }
		]);
	});

	it("creates errors, job types and recipe types that refer to each other, and answers warnings", async () => {
		const before = await counts();
		const doc = {
			errors: [{ name: "new-data", title: "New", category: "DATA" }],
			job_types: [
				jobTypeEntry("jt-new", {
					error_mapping: { exit_codes: { "3": "new-data" } },
					// The input accepts image/png only: a rule passing text/plain is a warning.
					trigger_rule: parseRule("text/plain")
				})
			],
			recipe_types: [
				{
					name: "rt-new",
					version: "1.0",
					definition: {
						input_data: [{ name: "img", type: "file", media_types: ["image/png"] }],
						jobs: [
							{
								name: "a",
								job_type: { name: "jt-new", version: "1.0" },
								recipe_inputs: [{ recipe_input: "img", job_input: "input_file" }]
							}
						]
					}
				}
			]
		};
		const res = await importConfig(doc);
		expect(res.status).toBe(200);
		expect(res.body).toEqual({
			warnings: [
				{
					id: "media_type",
					details: "Invalid media type for data input: input_file -> text/plain"
				}
			]
		});
		expect(await counts()).toEqual({
			...before,
			error: before.error + 1,
			job_type: before.job_type + 1,
			job_type_rev: before.job_type_rev + 1,
			recipe_type: before.recipe_type + 1,
			recipe_type_rev: before.recipe_type_rev + 1,
			trigger_rule: before.trigger_rule + 1
		});
		const [jt] = await query(tdb, "SELECT * FROM job_type WHERE name = 'jt-new'");
		expect(jt.error_mapping).toEqual({ version: "1.0", exit_codes: { "3": "new-data" } });
		const [rule] = await query(tdb, "SELECT * FROM trigger_rule WHERE id = $1", [
			jt.trigger_rule_id
		]);
		expect(rule.configuration.condition.media_type).toBe("text/plain");
		const [rt] = await query(tdb, "SELECT title FROM recipe_type WHERE name = 'rt-new'");
		expect(rt.title).toBe("rt-new");
	});

	it("warns about read-only fields and ignores them", async () => {
		const res = await importConfig({
			job_types: [{ name: "jt-process", version: "2.0", id: 999, revision_num: 50 }]
		});
		expect(res.status).toBe(200);
		expect(res.body.warnings.map((w: any) => w.id)).toEqual(["read-only", "read-only"]);
		expect(res.body.warnings[0].details).toMatch(/jt-process -> id/);
		const [row] = await query(
			tdb,
			"SELECT id, revision_num FROM job_type WHERE name = 'jt-process'"
		);
		expect(row).toEqual({ id: ids["jt-process"], revision_num: 1 });
	});

	describe("all or nothing", () => {
		function brokenDoc(broken: Record<string, unknown>) {
			return {
				errors: [{ name: "aon-error", category: "DATA" }],
				job_types: [
					jobTypeEntry("aon-1", { error_mapping: { exit_codes: { "1": "aon-error" } } }),
					jobTypeEntry("aon-2", { trigger_rule: parseRule("image/png") }),
					broken,
					jobTypeEntry("aon-4")
				],
				recipe_types: [
					{
						name: "aon-recipe",
						version: "1.0",
						definition: {
							input_data: [{ name: "img", type: "file" }],
							jobs: [
								{
									name: "a",
									job_type: { name: "aon-1", version: "1.0" },
									recipe_inputs: [
										{ recipe_input: "img", job_input: "input_file" }
									]
								}
							]
						}
					}
				]
			};
		}

		it("an invalid third job type: 400 naming import.job_types[2], nothing written", async () => {
			const before = await snapshot();
			const cases: [Record<string, unknown>, RegExp][] = [
				[
					jobTypeEntry("aon-3", { interface: { command: 5, command_arguments: "" } }),
					/^import\.job_types\[2\]\.interface\.command: /
				],
				[
					{ name: "aon-3", version: "1.0" },
					/^import\.job_types\[2\]\.interface: is required/
				],
				[
					jobTypeEntry("aon-3", {
						error_mapping: { exit_codes: { "1": "no-such-error" } }
					}),
					/^import\.job_types\[2\]\.error_mapping\.exit_codes\.1: "no-such-error"/
				],
				[
					jobTypeEntry("aon-3", {
						trigger_rule: parseRule("image/png", "input_file", "nowhere")
					}),
					/^import\.job_types\[2\]\.trigger_rule\.configuration\.data\.workspace_name: /
				],
				[
					jobTypeEntry("aon-3", { priority: "high" }),
					/^import\.job_types\[2\]\.priority: /
				],
				[jobTypeEntry("aon-3", { name: "bad/name" }), /^import\.job_types\[2\]\.name: /],
				// An existing job type's edit that breaks a recipe type using it.
				[
					{
						name: "jt-process",
						version: "2.0",
						interface: iface([{ name: "other", type: "file" }])
					},
					/^import\.job_types\[2\]\.interface: does not fit recipe type "rt-main"/
				]
			];
			for (const [broken, detail] of cases) {
				expectJsonError(await importConfig(brokenDoc(broken)), 400, detail);
				expect(await snapshot()).toEqual(before);
			}
		});

		it("a failure in the recipe types, after errors and job types were written, leaves nothing", async () => {
			const before = await snapshot();
			const doc = brokenDoc(jobTypeEntry("aon-3"));
			(doc.recipe_types[0].definition.jobs[0].job_type as any).name = "no-such-type";
			expectJsonError(await importConfig(doc), 400, /^import\.recipe_types\[0\]\.definition/);
			expect(await snapshot()).toEqual(before);
			// The same document fixed imports every record.
			const fixed = brokenDoc(jobTypeEntry("aon-3"));
			const res = await importConfig(fixed);
			expect(res.status).toBe(200);
			const after = await counts();
			expect(after.job_type).toBe(before.job_type.length + 4);
			expect(after.error).toBe(before.error.length + 1);
			expect(after.recipe_type).toBe(before.recipe_type.length + 1);
		});
	});

	describe("errors", () => {
		it("refuses a SYSTEM error with 400, new or existing, and writes nothing", async () => {
			const before = await snapshot();
			expectJsonError(
				await importConfig({
					errors: [
						{ name: "fine", category: "DATA" },
						{ name: "my-system", category: "SYSTEM" }
					]
				}),
				400,
				/^import\.errors\[1\]\.category: SYSTEM errors cannot be imported/
			);
			expectJsonError(
				await importConfig({ errors: [{ name: "site-system", title: "Changed" }] }),
				400,
				/^import\.errors\[0\]\.name: "site-system" is a SYSTEM error/
			);
			// A built-in SYSTEM error named with category SYSTEM is refused too.
			expectJsonError(
				await importConfig({ errors: [{ name: "unknown", category: "SYSTEM" }] }),
				400,
				/SYSTEM/
			);
			expect(await snapshot()).toEqual(before);
		});

		it("keeps a built-in error as it is, with a builtin-error warning", async () => {
			const [builtin] = await query(
				tdb,
				"SELECT * FROM error WHERE is_builtin AND category <> 'SYSTEM' ORDER BY id LIMIT 1"
			);
			const [system] = await query(tdb, "SELECT * FROM error WHERE name = 'unknown'");
			const res = await importConfig({
				errors: [
					{ name: builtin.name, title: "Hijacked", category: "DATA" },
					{ name: "unknown", description: "Hijacked" },
					{ name: "fresh-error", category: "ALGORITHM" }
				]
			});
			expect(res.status).toBe(200);
			expect(res.body.warnings).toEqual([
				{ id: "builtin-error", details: expect.stringContaining(builtin.name) },
				{ id: "builtin-error", details: expect.stringContaining("unknown") }
			]);
			expect(
				(await query(tdb, "SELECT * FROM error WHERE id = $1", [builtin.id]))[0]
			).toEqual(builtin);
			expect((await query(tdb, "SELECT * FROM error WHERE id = $1", [system.id]))[0]).toEqual(
				system
			);
			expect(
				await query(tdb, "SELECT category FROM error WHERE name = 'fresh-error'")
			).toEqual([{ category: "ALGORITHM" }]);
		});

		it("needs a category for a new error", async () => {
			expectJsonError(
				await importConfig({ errors: [{ name: "no-category" }] }),
				400,
				/^import\.errors\[0\]\.category: is required/
			);
		});
	});

	describe("bad input", () => {
		it("a body without import: 400 naming import", async () => {
			expectJsonError(
				await request("POST", `${api}/configuration/`, { version: "1.0", job_types: [] }),
				400,
				/^import: is required/
			);
			expectJsonError(await request("POST", `${api}/configuration/`, {}), 400, /import/);
		});

		it("import that is not an object: 400", async () => {
			for (const value of ["config", 5, null, [], [{ job_types: [] }], true])
				expectJsonError(await importConfig(value), 400, /^import/);
		});

		it("an unknown version: 400 naming import.version", async () => {
			expectJsonError(await importConfig({ version: "2.0" }), 400, /^import\.version: /);
			expectJsonError(await importConfig({ version: 1 }), 400, /^import\.version: /);
		});

		it("unknown top-level fields, wrong lists and duplicates: 400 naming the field", async () => {
			const before = await snapshot();
			expectJsonError(await importConfig({ workspaces: [] }), 400, /^import\.workspaces: /);
			expectJsonError(await importConfig({ job_types: {} }), 400, /^import\.job_types: /);
			expectJsonError(
				await importConfig({ errors: [{ title: "no name", category: "DATA" }] }),
				400,
				/^import\.errors\[0\]\.name: is required/
			);
			expectJsonError(
				await importConfig({ recipe_types: [{ name: "rt-main" }] }),
				400,
				/^import\.recipe_types\[0\]\.version: is required/
			);
			expectJsonError(
				await importConfig({
					job_types: [jobTypeEntry("dup"), jobTypeEntry("dup", { title: "again" })]
				}),
				400,
				/^import\.job_types\[1\]\.name: /
			);
			expectJsonError(
				await importConfig({ job_types: [jobTypeEntry("x", { unknown_field: 1 })] }),
				400,
				/^import\.job_types\[0\]\.unknown_field: /
			);
			expect(await snapshot()).toEqual(before);
		});

		it("an empty document imports nothing", async () => {
			const before = await snapshot();
			const res = await importConfig({});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ warnings: [] });
			expect(await snapshot()).toEqual(before);
		});
	});
});

describe("POST /configuration/validation/", () => {
	it("answers the warnings an import would, and writes nothing", async () => {
		const doc = {
			errors: [{ name: "val-error", category: "DATA" }],
			job_types: [
				jobTypeEntry("val-jt", {
					error_mapping: { exit_codes: { "9": "val-error" } },
					trigger_rule: parseRule("image/jpeg")
				})
			],
			recipe_types: [
				{
					name: "val-rt",
					version: "1.0",
					definition: {
						input_data: [{ name: "img", type: "file" }],
						jobs: [
							{
								name: "a",
								job_type: { name: "val-jt", version: "1.0" },
								recipe_inputs: [{ recipe_input: "img", job_input: "input_file" }]
							}
						]
					}
				}
			]
		};
		const before = await snapshot();
		const validated = await validateConfig(doc);
		expect(validated.status).toBe(200);
		// The job type's rule, then the recipe definition (its input takes any file).
		expect(validated.body).toEqual({
			warnings: [
				{
					id: "media_type",
					details: "Invalid media type for data input: input_file -> image/jpeg"
				},
				{
					id: "media_type",
					details:
						'Invalid media type for data input: input_file -> application/octet-stream (job a, from recipe input "img")'
				}
			]
		});
		expect(await snapshot()).toEqual(before);
		// Twice: the first validation left nothing behind that would make the second differ.
		expect((await validateConfig(doc)).body).toEqual(validated.body);
		expect(await snapshot()).toEqual(before);

		const imported = await importConfig(doc);
		expect(imported.status).toBe(200);
		expect(imported.body).toEqual(validated.body);
		expect((await counts()).job_type).toBe(before.job_type.length + 1);
	});

	it("answers the same 400 as an import, and writes nothing", async () => {
		const before = await snapshot();
		const doc = {
			errors: [{ name: "val-2", category: "DATA" }],
			job_types: [
				jobTypeEntry("val-2a"),
				jobTypeEntry("val-2b"),
				{ name: "val-2c", version: "1" }
			]
		};
		const validated = await validateConfig(doc);
		expectJsonError(validated, 400, /^import\.job_types\[2\]\.interface: is required/);
		const imported = await importConfig(doc);
		expect(imported.body).toEqual(validated.body);
		expect(await snapshot()).toEqual(before);
		expectJsonError(await validateConfig({ version: "0.9" }), 400, /^import\.version: /);
		expectJsonError(
			await request("POST", `${api}/configuration/validation/`, {}),
			400,
			/^import: is required/
		);
		expectJsonError(await validateConfig("x"), 400, /^import/);
	});

	it("warns as an import does for updates of existing records, without applying them", async () => {
		const before = await snapshot();
		const res = await validateConfig({
			job_types: [
				{ name: "jt-ingest", version: "1.0", trigger_rule: parseRule("image/gif") }
			],
			errors: [{ name: "algorithm-unknown", title: "x" }]
		});
		expect(res.status).toBe(200);
		expect(res.body.warnings.map((w: any) => w.id).sort()).toEqual([
			"builtin-error",
			"media_type"
		]);
		expect(await snapshot()).toEqual(before);
	});
});

describe("POST /configuration/upload/", () => {
	const upload = (body: BodyInit, headers: Record<string, string> = {}) =>
		fetch(`${api}/configuration/upload/`, { method: "POST", body, headers }).then(async res => {
			const text = await res.text();
			let parsed: any;
			try {
				parsed = JSON.parse(text);
			} catch {
				parsed = undefined;
			}
			return { status: res.status, headers: res.headers, body: parsed, text } as Reply;
		});

	function form(content: BlobPart, fileName = "config.json", field = "import") {
		const data = new FormData();
		data.append("note", "a plain field, ignored");
		data.append(field, new Blob([content], { type: "application/json" }), fileName);
		return data;
	}

	/** A document creating one job type whose rule passes a media type its input refuses. */
	function uploadDoc(name: string) {
		return {
			version: "1.0",
			job_types: [jobTypeEntry(name, { trigger_rule: parseRule("text/csv") })]
		};
	}
	const CSV_WARNING = {
		warnings: [
			{
				id: "media_type",
				details: "Invalid media type for data input: input_file -> text/csv"
			}
		]
	};

	async function jobTypeExists(name: string) {
		return (await query(tdb, "SELECT id FROM job_type WHERE name = $1", [name])).length === 1;
	}

	it("multipart: the file field import is imported like POST /configuration/", async () => {
		const res = await upload(form(JSON.stringify(uploadDoc("up-multipart"))));
		expect(res.status).toBe(200);
		expect(res.body).toEqual(CSV_WARNING);
		expect(await jobTypeExists("up-multipart")).toBe(true);
		// Uploading a new title updates it, as an import does.
		const doc = uploadDoc("up-multipart");
		(doc.job_types[0] as any).title = "Uploaded";
		expect((await upload(form(JSON.stringify(doc)))).status).toBe(200);
		expect(
			await query(tdb, "SELECT title, revision_num FROM job_type WHERE name = 'up-multipart'")
		).toEqual([{ title: "Uploaded", revision_num: 2 }]);
	});

	it("raw body with X-File-Name, as application/octet-stream and as application/json", async () => {
		const octet = await upload(JSON.stringify(uploadDoc("up-octet")), {
			"Content-Type": "application/octet-stream",
			"X-File-Name": "x.json"
		});
		expect(octet.status).toBe(200);
		expect(octet.body).toEqual(CSV_WARNING);
		expect(await jobTypeExists("up-octet")).toBe(true);

		const json = await upload(JSON.stringify(uploadDoc("up-json")), {
			"Content-Type": "application/json",
			"X-File-Name": "export.JSON"
		});
		expect(json.status).toBe(200);
		expect(json.body).toEqual(CSV_WARNING);
		expect(await jobTypeExists("up-json")).toBe(true);
	});

	it("takes a raw application/json file of up to 5 MB (past the 1 MB limit of other bodies)", async () => {
		// 2 MB of white space make a valid file of that size
		const big = JSON.stringify(uploadDoc("up-big")) + " ".repeat(2 * 1024 * 1024);
		const reply = await upload(big, {
			"Content-Type": "application/json",
			"X-File-Name": "big.json"
		});
		expect(reply.status).toBe(200);
		expect(await jobTypeExists("up-big")).toBe(true);

		const before = await snapshot();
		const huge = JSON.stringify(uploadDoc("up-huge")) + " ".repeat(5 * 1024 * 1024);
		expectJsonError(
			await upload(huge, { "Content-Type": "application/json", "X-File-Name": "huge.json" }),
			400,
			/^import: the file is larger than 5242880 bytes/
		);
		expect(await snapshot()).toEqual(before);
		// other bodies keep their 1 MB limit
		const other = await fetch(`${api}/configuration/validation/`, {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ import: uploadDoc("up-other") }) + " ".repeat(2 * 1024 * 1024)
		});
		expect(other.status).toBe(413);
	});

	it("answers the import's 400 for an invalid configuration, writing nothing", async () => {
		const before = await snapshot();
		const bad = JSON.stringify({
			job_types: [jobTypeEntry("up-a"), jobTypeEntry("up-b"), { name: "up-c", version: "1" }]
		});
		expectJsonError(
			await upload(form(bad)),
			400,
			/^import\.job_types\[2\]\.interface: is required/
		);
		expectJsonError(
			await upload(bad, {
				"Content-Type": "application/octet-stream",
				"X-File-Name": "a.json"
			}),
			400,
			/^import\.job_types\[2\]\.interface: is required/
		);
		expectJsonError(await upload(form('{"version": "7"}')), 400, /^import\.version: /);
		expectJsonError(await upload(form("[1, 2]")), 400, /^import/);
		expect(await snapshot()).toEqual(before);
	});

	it("rejects with 400: missing X-File-Name, a .txt file, invalid JSON, no import field", async () => {
		const before = await snapshot();
		const doc = JSON.stringify(uploadDoc("up-never"));
		expectJsonError(
			await upload(doc, { "Content-Type": "application/octet-stream" }),
			400,
			/X-File-Name/
		);
		expectJsonError(
			await upload(doc, { "Content-Type": "application/json" }),
			400,
			/X-File-Name/
		);
		expectJsonError(
			await upload(doc, {
				"Content-Type": "application/octet-stream",
				"X-File-Name": "x.txt"
			}),
			400,
			/unsupported file type "x\.txt"/
		);
		expectJsonError(await upload(form(doc, "config.txt")), 400, /unsupported file type/);
		expectJsonError(await upload(form(doc, "config.json.bak")), 400, /unsupported file type/);
		expectJsonError(
			await upload("{not json", {
				"Content-Type": "application/octet-stream",
				"X-File-Name": "x.json"
			}),
			400,
			/not valid JSON/
		);
		expectJsonError(await upload(form("{not json")), 400, /not valid JSON/);
		expectJsonError(await upload(form(doc, "config.json", "file")), 400, /"import"/);
		const onlyText = new FormData();
		onlyText.append("import", doc);
		expectJsonError(await upload(onlyText), 400, /"import"/);
		expect(await snapshot()).toEqual(before);
		expect(await jobTypeExists("up-never")).toBe(false);
	});

	it("rejects a file over 5 MB with 400", async () => {
		const before = await snapshot();
		// Valid JSON, so only its size can be at fault.
		const big = JSON.stringify({
			version: "1.0",
			errors: [],
			padding: "x".repeat(MAX_UPLOAD_BYTES)
		});
		expect(big.length).toBeGreaterThan(MAX_UPLOAD_BYTES);
		expectJsonError(await upload(form(big)), 400, /larger than/);
		expectJsonError(
			await upload(big, {
				"Content-Type": "application/octet-stream",
				"X-File-Name": "big.json"
			}),
			400,
			/larger than/
		);
		expect(await snapshot()).toEqual(before);

		// A file just under the limit is read whole (and then refused for its unknown field).
		const fits = JSON.stringify({ padding: "x".repeat(MAX_UPLOAD_BYTES - 100) });
		expect(fits.length).toBeLessThanOrEqual(MAX_UPLOAD_BYTES);
		expectJsonError(await upload(form(fits)), 400, /^import\.padding: /);
		expectJsonError(
			await upload(fits, {
				"Content-Type": "application/octet-stream",
				"X-File-Name": "f.json"
			}),
			400,
			/^import\.padding: /
		);
		// The gateway still answers afterwards.
		expect((await exportOf()).status).toBe(200);
	});
});
