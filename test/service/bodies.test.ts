import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/**
 * Create and edit bodies over real HTTP and PostgreSQL: a field a body does not take is a 400
 * naming it (every one of them, validation endpoints included) that changes nothing; the
 * read-only fields of a record's own answer, which Scale's exports carry, are accepted and named
 * in `warnings`; ids and numbers Scale read with parse_int may be strings of digits.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let rawId = 0;
let rawDir = "";

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

const count = async (table: string) =>
	(await query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0].n;

function jobType(name: string, extra: Record<string, unknown> = {}) {
	return {
		name,
		version: "1.0",
		interface: {
			version: "1.0",
			command: "true",
			command_arguments: "",
			input_data: [{ name: "n", type: "property", required: false }],
			output_data: []
		},
		...extra
	};
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	// a directory of its own: /tmp may hold the service's data directory (a clone under /tmp),
	// which a workspace's edit refuses
	rawDir = fs.mkdtempSync(path.join(os.tmpdir(), "bodies-raw-"));
	[{ id: rawId }] = await query<{ id: number }>(
		`INSERT INTO workspace (name, json_config) VALUES
			('raw', json_build_object('version', '1.0',
				'broker', json_build_object('type', 'host', 'host_path', $1::text)))
		 RETURNING id`,
		[rawDir]
	);
	app = await startServices(tdb.url, [
		"api",
		"job-types",
		"recipe-types",
		"errors",
		"workspaces",
		"queue",
		"configuration",
		"scheduler"
	]);
	api = app.api;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
	if (rawDir) fs.rmSync(rawDir, { recursive: true, force: true });
});

describe("a field a body does not take", () => {
	it("is a 400 naming it at create, and nothing is saved", async () => {
		const before = await count("job_type");
		const reply = await request(
			"POST",
			`${api}/job-types/`,
			jobType("typo", { cpus_requried: 4 })
		);
		expectJsonError(reply, 400, /^cpus_requried: is not a field of this request/);
		expect(await count("job_type")).toBe(before);
	});

	it("is named, every one of them, by the validation endpoints", async () => {
		const reply = await request(
			"POST",
			`${api}/job-types/validation/`,
			jobType("typo", { cpus_requried: 4, mem_requried: 64 })
		);
		expectJsonError(reply, 400, /^cpus_requried: .*; mem_requried: /);
		const recipe = await request("POST", `${api}/recipe-types/validation/`, {
			name: "r",
			version: "1.0",
			definition: { version: "1.0", input_data: [], jobs: [] },
			tittle: "x"
		});
		expectJsonError(recipe, 400, /^tittle: /);
	});

	it("is a 400 at edit, the record unchanged", async () => {
		const created = await request("POST", `${api}/job-types/`, jobType("edited"));
		expect(created.status).toBe(201);
		const reply = await request("PATCH", `${api}/job-types/${created.body.id}/`, {
			titel: "New"
		});
		expectJsonError(reply, 400, /^titel: /);
		const [row] = await query(`SELECT title, revision_num FROM job_type WHERE id = $1`, [
			created.body.id
		]);
		expect(row).toEqual({ title: null, revision_num: 1 });
	});

	it("is a 400 in every other create or edit body", async () => {
		const cases: [string, string, Record<string, unknown>][] = [
			["POST", "/errors/", { name: "e1", category: "DATA", categroy: "DATA" }],
			[
				"POST",
				"/workspaces/",
				{
					name: "w1",
					json_config: { version: "1.0", broker: { type: "host", host_path: "/tmp" } },
					base_ulr: "x"
				}
			],
			["PATCH", `/workspaces/${rawId}/`, { titel: "x" }],
			["POST", "/queue/new-job/", { job_type_id: 1, job_dat: {} }],
			["POST", "/queue/new-recipe/", { recipe_type_id: 1, recipe_dat: {} }],
			["POST", "/queue/requeue-jobs/", { job_id: [1] }],
			["PATCH", "/scheduler/", { is_pasued: true }],
			["POST", "/configuration/validation/", { import: {}, dry_run: true }]
		];
		for (const [method, path, body] of cases) {
			const field = Object.keys(body).pop()!;
			const reply = await request(method, `${api}${path}`, body);
			expect([path, reply.status]).toEqual([path, 400]);
			expect(reply.body.detail).toMatch(new RegExp(`^${field}: `));
		}
		expect(await count("error WHERE name = 'e1'")).toBe(0);
		expect(await count("workspace")).toBe(1);
	});
});

describe("the read-only fields of a record's own answer", () => {
	it("are accepted from an exported job type and named in warnings", async () => {
		const created = await request("POST", `${api}/job-types/`, jobType("exported"));
		const exported = { ...created.body, name: "imported" };
		const validation = await request("POST", `${api}/job-types/validation/`, exported);
		expect(validation.status).toBe(200);
		const readOnly = validation.body.warnings.filter((w: any) => w.id === "read-only");
		expect(readOnly.map((w: any) => w.details)).toEqual(
			expect.arrayContaining([
				"Job type includes read-only field id, ignored",
				"Job type includes read-only field revision_num, ignored",
				"Job type includes read-only field job_counts_24h, ignored"
			])
		);
		const reply = await request("POST", `${api}/job-types/`, exported);
		expect(reply.status).toBe(201);
		expect(reply.body.id).not.toBe(created.body.id);
		expect(reply.body.warnings).toEqual(readOnly);
		// an answer without read-only fields given has no warnings member
		expect(created.body).not.toHaveProperty("warnings");
	});

	it("are accepted in edits, name and version with them", async () => {
		const created = await request("POST", `${api}/job-types/`, jobType("renamed"));
		const reply = await request("PATCH", `${api}/job-types/${created.body.id}/`, {
			...created.body,
			name: "other",
			title: "Edited"
		});
		expect(reply.status).toBe(200);
		expect(reply.body.name).toBe("renamed");
		expect(reply.body.title).toBe("Edited");
		expect(reply.body.warnings.map((w: any) => w.details)).toContain(
			"Job type includes read-only field name, ignored"
		);
	});

	it("are accepted from an error's and a workspace's answers", async () => {
		const error = await request("POST", `${api}/errors/`, {
			name: "mine",
			category: "DATA"
		});
		const copy = await request("POST", `${api}/errors/`, { ...error.body, name: "mine-2" });
		expect(copy.status).toBe(201);
		expect(copy.body.warnings.map((w: any) => w.details)).toContain(
			"Error includes read-only field is_builtin, ignored"
		);
		const ws = await request("GET", `${api}/workspaces/${rawId}/`);
		const edit = await request("PATCH", `${api}/workspaces/${rawId}/`, {
			...ws.body,
			title: "Raw"
		});
		expect(edit.status).toBe(200);
		expect(edit.body.title).toBe("Raw");
	});
});

describe("ids and numbers as strings of digits, where Scale read them with parse_int", () => {
	it('accepts job_type_id "2" in a new job, and refuses what is not digits', async () => {
		const created = await request("POST", `${api}/job-types/`, jobType("by-string"));
		const id = created.body.id as number;
		const reply = await request("POST", `${api}/queue/new-job/`, {
			job_type_id: String(id),
			job_data: { version: "1.0", input_data: [], output_data: [] }
		});
		expect(reply.status).toBe(201);
		expect(reply.body.job_type.id).toBe(id);
		expectJsonError(
			await request("POST", `${api}/queue/new-job/`, { job_type_id: `${id}x` }),
			400,
			/^job_type_id: /
		);
		expectJsonError(
			await request("POST", `${api}/queue/new-job/`, { job_type_id: "-1" }),
			400,
			/^job_type_id: /
		);
	});

	it("accepts job_ids and priority as strings of digits in a requeue", async () => {
		const [{ id: jobId }] = await query<{ id: number }>(`SELECT max(id) AS id FROM job`);
		const reply = await request("POST", `${api}/queue/requeue-jobs/`, {
			job_ids: [String(jobId)],
			priority: "5"
		});
		expect(reply.status).toBe(200);
		expect(reply.body.results.map((j: any) => j.id)).toEqual([jobId]);
		expectJsonError(
			await request("POST", `${api}/queue/requeue-jobs/`, { job_ids: ["1.5"] }),
			400,
			/^job_ids\[0\]: /
		);
	});
});
