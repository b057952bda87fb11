import { createTestDatabase, type TestDatabase } from "../helpers/db";
import {
	request,
	startServices,
	type Reply,
	type TestApi,
	expectJsonError
} from "../helpers/broker";

/** The gateway and the job types service in one process, over real HTTP and PostgreSQL. */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const LIST_FIELDS = [
	"archived",
	"author_name",
	"author_url",
	"category",
	"cpus_required",
	"created",
	"description",
	"disk_out_const_required",
	"disk_out_mult_required",
	"docker_image",
	"docker_privileged",
	"icon_code",
	"id",
	"is_active",
	"is_long_running",
	"is_operational",
	"is_paused",
	"is_system",
	"last_modified",
	"max_scheduled",
	"max_tries",
	"mem_required",
	"name",
	"paused",
	"priority",
	"revision_num",
	"timeout",
	"title",
	"trigger_rule",
	"uses_docker",
	"version"
];
const DETAIL_FIELDS = [
	...LIST_FIELDS,
	"error_mapping",
	"errors",
	"interface",
	"job_counts_12h",
	"job_counts_24h",
	"job_counts_6h"
].sort();

let tdb: TestDatabase;
let app: TestApi;
let api: string;

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function counts() {
	const [row] = await query<{ jt: number; rev: number; rule: number }>(
		`SELECT (SELECT count(*)::int FROM job_type) AS jt,
			(SELECT count(*)::int FROM job_type_rev) AS rev,
			(SELECT count(*)::int FROM trigger_rule) AS rule`
	);
	return row;
}

function iface(extra: Record<string, unknown> = {}) {
	return {
		version: "1.0",
		command: "test_cmd",
		command_arguments: "${input_file} ${job_output_dir}",
		input_data: [{ name: "input_file", type: "file", media_types: ["image/png"] }],
		output_data: [{ name: "output_file", type: "file", media_type: "image/png" }],
		...extra
	};
}

function parseRule(extra: Record<string, unknown> = {}, data: Record<string, unknown> = {}) {
	return {
		type: "PARSE",
		is_active: true,
		configuration: {
			version: "1.0",
			condition: { media_type: "image/png", data_types: [] },
			data: { input_data_name: "input_file", workspace_name: "raw", ...data }
		},
		...extra
	};
}

function body(name: string, extra: Record<string, unknown> = {}) {
	return { name, version: "1.0", interface: iface(), ...extra };
}

async function create(b: Record<string, unknown>) {
	const res = await request("POST", `${api}/job-types/`, b);
	if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
	return res.body;
}

async function patch(id: number, b: Record<string, unknown>) {
	return request("PATCH", `${api}/job-types/${id}/`, b);
}

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

beforeAll(async () => {
	tdb = await createTestDatabase();
	await query(
		`INSERT INTO workspace (name, json_config) VALUES
			('raw', '{"version": "1.0", "broker": {"type": "host", "host_path": "/tmp"}}'),
			('products', '{"version": "1.0", "broker": {"type": "host", "host_path": "/tmp"}}')`
	);
	await query(
		`INSERT INTO error (name, title, description, category) VALUES
			('bad-pixels', 'Bad Pixels', 'The image has bad pixels', 'ALGORITHM'),
			('bad-header', 'Bad Header', NULL, 'DATA')`
	);
	app = await startServices(tdb.url, ["api", "job-types"]);
	api = app.api;
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

describe("POST /job-types/", () => {
	it("answers 201, Location and the details with revision 1, errors, counts and the rule", async () => {
		const before = await counts();
		const res = await request("POST", `${api}/job-types/`, {
			name: "my-job",
			version: "1.0",
			title: "My Job",
			description: "This is a description of the job",
			category: "test",
			author_name: null,
			author_url: null,
			is_long_running: false,
			is_operational: true,
			is_paused: false,
			icon_code: "f1c5",
			docker_privileged: false,
			docker_image: null,
			priority: 1,
			timeout: 0,
			max_tries: 2,
			cpus_required: 0.5,
			mem_required: 128.0,
			disk_out_const_required: 64.0,
			disk_out_mult_required: 1.5,
			interface: { ...iface(), shared_resources: [] },
			error_mapping: { version: "1.0", exit_codes: { "1": "unknown", "2": "bad-pixels" } },
			trigger_rule: parseRule()
		});
		expect(res.status).toBe(201);
		expect(res.headers.get("location")).toBe(`${api}/job-types/${res.body.id}/`);
		expect(Object.keys(res.body).sort()).toEqual(DETAIL_FIELDS);
		expect(res.body).toMatchObject({
			name: "my-job",
			version: "1.0",
			title: "My Job",
			category: "test",
			is_system: false,
			is_active: true,
			is_paused: false,
			uses_docker: false,
			revision_num: 1,
			priority: 1,
			timeout: 0,
			max_scheduled: null,
			max_tries: 2,
			cpus_required: 0.5,
			mem_required: 128,
			disk_out_mult_required: 1.5,
			archived: null,
			paused: null,
			job_counts_6h: [],
			job_counts_12h: [],
			job_counts_24h: []
		});
		expect(res.body.created).toMatch(ISO_MS_Z);
		expect(res.body.interface).toEqual({
			version: "1.0",
			command: "test_cmd",
			command_arguments: "${input_file} ${job_output_dir}",
			input_data: [
				{ name: "input_file", type: "file", required: true, media_types: ["image/png"] }
			],
			output_data: [
				{ name: "output_file", type: "file", required: true, media_type: "image/png" }
			],
			shared_resources: []
		});
		expect(res.body.error_mapping).toEqual({
			version: "1.0",
			exit_codes: { "1": "unknown", "2": "bad-pixels" }
		});
		// The errors the mapping names, as GET /errors/ shows them, ordered by name.
		expect(res.body.errors.map((e: any) => e.name)).toEqual(["bad-pixels", "unknown"]);
		const [pixels] = await query("SELECT * FROM error WHERE name = 'bad-pixels'");
		expect(res.body.errors[0]).toEqual({
			id: pixels.id,
			name: "bad-pixels",
			title: "Bad Pixels",
			description: "The image has bad pixels",
			category: "ALGORITHM",
			is_builtin: false,
			created: pixels.created.toISOString(),
			last_modified: pixels.last_modified.toISOString()
		});
		expect(res.body.trigger_rule).toEqual({
			id: expect.any(Number),
			type: "PARSE",
			name: "my-job",
			is_active: true,
			configuration: {
				version: "1.0",
				condition: { media_type: "image/png", data_types: [] },
				data: { input_data_name: "input_file", workspace_name: "raw" }
			},
			created: expect.stringMatching(ISO_MS_Z),
			archived: null,
			last_modified: expect.stringMatching(ISO_MS_Z)
		});

		const after = await counts();
		expect(after).toEqual({ jt: before.jt + 1, rev: before.rev + 1, rule: before.rule + 1 });
		const revs = await query("SELECT * FROM job_type_rev WHERE job_type_id = $1", [
			res.body.id
		]);
		expect(revs).toHaveLength(1);
		expect(revs[0].revision_num).toBe(1);
		expect(revs[0].interface).toEqual(res.body.interface);
		const [row] = await query("SELECT trigger_rule_id FROM job_type WHERE id = $1", [
			res.body.id
		]);
		expect(row.trigger_rule_id).toBe(res.body.trigger_rule.id);

		const got = await request("GET", `${api}/job-types/${res.body.id}/`);
		expect(got.status).toBe(200);
		expect(got.body).toEqual(res.body);
	});

	it("takes Scale's defaults and the empty error mapping", async () => {
		const b = await create(body("defaults"));
		expect(b).toMatchObject({
			title: null,
			description: null,
			category: null,
			is_long_running: false,
			is_operational: true,
			uses_docker: false,
			docker_privileged: false,
			docker_image: null,
			priority: 100,
			timeout: 1800,
			max_scheduled: null,
			max_tries: 3,
			cpus_required: 1,
			mem_required: 64,
			disk_out_const_required: 64,
			disk_out_mult_required: 0,
			error_mapping: { version: "1.0", exit_codes: {} },
			errors: [],
			trigger_rule: null
		});
	});

	it("sets uses_docker with a docker image, paused when paused, archived when inactive", async () => {
		const b = await create(
			body("docker-paused", {
				docker_image: "geoint/algo:1.0",
				is_paused: true,
				is_active: false,
				max_scheduled: 4
			})
		);
		expect(b).toMatchObject({
			uses_docker: true,
			docker_image: "geoint/algo:1.0",
			is_paused: true,
			is_active: false,
			max_scheduled: 4
		});
		expect(b.paused).toBe(b.created);
		expect(b.archived).toBe(b.created);
	});

	it("saves a CLOCK rule named after a clock processor, and a paused rule", async () => {
		const clock = await create(
			body("clocked", {
				trigger_rule: {
					type: "CLOCK",
					name: "scale-daily-metrics",
					configuration: { event_type: "DAILY_METRICS", schedule: "PT1H0M0S" }
				}
			})
		);
		expect(clock.trigger_rule).toMatchObject({
			type: "CLOCK",
			name: "scale-daily-metrics",
			is_active: true,
			configuration: { version: "1.0", event_type: "DAILY_METRICS", schedule: "PT1H0M0S" }
		});
		const paused = await create(
			body("rule-paused", { trigger_rule: parseRule({ is_active: false, type: "INGEST" }) })
		);
		expect(paused.trigger_rule).toMatchObject({ type: "INGEST", is_active: false });
		expect(paused.trigger_rule.archived).toBeNull();
	});

	it("saves a job type whose rule has warnings (validation reports them)", async () => {
		const b = await create(
			body("warned", {
				trigger_rule: parseRule({}, {}),
				interface: iface({
					input_data: [{ name: "input_file", type: "file", media_types: ["image/tiff"] }]
				})
			})
		);
		expect(b.trigger_rule.configuration.condition.media_type).toBe("image/png");
	});
});

describe("concurrent creates", () => {
	it("let one create of a name and version win and leave no stray rule or revision", async () => {
		const before = await counts();
		const replies = await Promise.all(
			Array.from({ length: 5 }, () =>
				request("POST", `${api}/job-types/`, body("raced", { trigger_rule: parseRule() }))
			)
		);
		expect(replies.filter(r => r.status === 201)).toHaveLength(1);
		for (const reply of replies.filter(r => r.status !== 201))
			expectJsonError(
				reply,
				400,
				/^name: a job type named "raced" with version "1\.0" already exists$/
			);
		expect(await counts()).toEqual({
			jt: before.jt + 1,
			rev: before.rev + 1,
			rule: before.rule + 1
		});
	});
});

describe("GET /job-types/", () => {
	let ids: Record<string, number>;
	beforeAll(async () => {
		ids = {};
		for (const [name, version, category] of [
			["list-b", "2.0", "cat-x"],
			["list-a", "1.0", "cat-y"],
			["list-b", "1.0", "cat-x"],
			["list-c", "1.0", null]
		] as const) {
			const b = await create(
				body(name, {
					version,
					category,
					trigger_rule: name === "list-a" ? parseRule() : undefined
				})
			);
			ids[`${name}@${version}`] = b.id;
		}
	});

	function keys(reply: Reply) {
		return reply.body.results.map((j: any) => `${j.name}@${j.version}`);
	}

	it("lists by name then version, with the rule as a reference and no documents", async () => {
		const res = await request("GET", `${api}/job-types/?name=list-a&name=list-b&name=list-c`);
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ count: 4, next: null, previous: null });
		expect(keys(res)).toEqual(["list-a@1.0", "list-b@1.0", "list-b@2.0", "list-c@1.0"]);
		for (const j of res.body.results) expect(Object.keys(j).sort()).toEqual(LIST_FIELDS);
		const a = res.body.results[0];
		const [row] = await query("SELECT trigger_rule_id FROM job_type WHERE id = $1", [a.id]);
		expect(a.trigger_rule).toEqual({ id: row.trigger_rule_id });
		expect(res.body.results[1].trigger_rule).toBeNull();
	});

	it("filters by category (repeatable) and orders as asked", async () => {
		const res = await request(
			"GET",
			`${api}/job-types/?category=cat-x&category=cat-y&order=-name&order=-version`
		);
		expect(keys(res)).toEqual(["list-b@2.0", "list-b@1.0", "list-a@1.0"]);
		const one = await request("GET", `${api}/job-types/?category=cat-y`);
		expect(keys(one)).toEqual(["list-a@1.0"]);
	});

	it("filters on last_modified with started and ended", async () => {
		const mark = new Date().toISOString();
		await sleep(20);
		await patch(ids["list-c@1.0"], { title: "touched" });
		const res = await request("GET", `${api}/job-types/?started=${mark}`);
		expect(keys(res)).toEqual(["list-c@1.0"]);
		const before = await request("GET", `${api}/job-types/?ended=${mark}&name=list-c`);
		expect(before.body.count).toBe(0);
	});

	it("pages, and rejects unknown order fields", async () => {
		const res = await request("GET", `${api}/job-types/?name=list-b&page_size=1&page=2`);
		expect(res.body.count).toBe(2);
		expect(keys(res)).toEqual(["list-b@2.0"]);
		expectJsonError(
			await request("GET", `${api}/job-types/?order=interface`),
			400,
			/^order: unknown field "interface"/
		);
	});
});

describe("GET /job-types/{id}/", () => {
	it("answers 404 for an unknown or non-numeric id", async () => {
		expectJsonError(await request("GET", `${api}/job-types/999999/`), 404);
		expectJsonError(await request("GET", `${api}/job-types/abc/`), 404);
		expectJsonError(await patch(999999, { title: "x" }), 404);
		expectJsonError(await request("PATCH", `${api}/job-types/abc/`, { title: "x" }), 404);
	});

	it("counts the jobs of the past 6, 12 and 24 hours by status and error category", async () => {
		const jt = await create(body("counted"));
		const [rev] = await query("SELECT id FROM job_type_rev WHERE job_type_id = $1", [jt.id]);
		const [event] = await query(
			"INSERT INTO trigger_event (type, processed) VALUES ('USER', now()) RETURNING id"
		);
		const [pixels] = await query("SELECT id FROM error WHERE name = 'bad-pixels'");
		const [nodeLost] = await query("SELECT id FROM error WHERE name = 'node-lost'");
		const job = (status: string, hoursAgo: number, errorId: number | null) =>
			query(
				`INSERT INTO job (job_type_id, job_type_rev_id, event_id, error_id, status, priority,
					timeout, max_tries, data, last_status_change)
				 VALUES ($1, $2, $3, $4, $5, 100, 1800, 3, '{}', now() - make_interval(hours => $6))`,
				[jt.id, rev.id, event.id, errorId, status, hoursAgo]
			);
		await job("FAILED", 1, pixels.id);
		await job("FAILED", 8, pixels.id);
		await job("FAILED", 3, nodeLost.id);
		await job("COMPLETED", 2, null);
		await job("COMPLETED", 20, null);
		await job("QUEUED", 30, null); // older than a day: not counted
		const recent = async (status: string, hoursAgo: number) => {
			const [r] = await query(
				`SELECT max(last_status_change) AS t FROM job WHERE job_type_id = $1 AND status = $2
				 AND last_status_change >= now() - make_interval(hours => $3)`,
				[jt.id, status, hoursAgo]
			);
			return (r.t as Date).toISOString();
		};
		const res = await request("GET", `${api}/job-types/${jt.id}/`);
		expect(res.status).toBe(200);
		const [failed1h] = await query(
			`SELECT last_status_change AS t FROM job WHERE job_type_id = $1 AND status = 'FAILED'
			 AND error_id = $2 ORDER BY last_status_change DESC LIMIT 1`,
			[jt.id, pixels.id]
		);
		const [failed3h] = await query(
			`SELECT last_status_change AS t FROM job WHERE job_type_id = $1 AND error_id = $2`,
			[jt.id, nodeLost.id]
		);
		expect(res.body.job_counts_6h).toEqual([
			{
				status: "COMPLETED",
				count: 1,
				most_recent: await recent("COMPLETED", 6),
				category: null
			},
			{
				status: "FAILED",
				count: 1,
				most_recent: failed1h.t.toISOString(),
				category: "ALGORITHM"
			},
			{
				status: "FAILED",
				count: 1,
				most_recent: failed3h.t.toISOString(),
				category: "SYSTEM"
			}
		]);
		expect(res.body.job_counts_12h).toEqual([
			{
				status: "COMPLETED",
				count: 1,
				most_recent: await recent("COMPLETED", 12),
				category: null
			},
			{
				status: "FAILED",
				count: 2,
				most_recent: failed1h.t.toISOString(),
				category: "ALGORITHM"
			},
			{
				status: "FAILED",
				count: 1,
				most_recent: failed3h.t.toISOString(),
				category: "SYSTEM"
			}
		]);
		expect(res.body.job_counts_24h).toEqual([
			{
				status: "COMPLETED",
				count: 2,
				most_recent: await recent("COMPLETED", 24),
				category: null
			},
			{
				status: "FAILED",
				count: 2,
				most_recent: failed1h.t.toISOString(),
				category: "ALGORITHM"
			},
			{
				status: "FAILED",
				count: 1,
				most_recent: failed3h.t.toISOString(),
				category: "SYSTEM"
			}
		]);
	});
});

describe("PATCH /job-types/{id}/", () => {
	it("increments revision_num on every edit; only an interface edit writes a revision", async () => {
		const jt = await create(body("edited", { title: "Before", priority: 5 }));
		await sleep(5);
		const titled = await patch(jt.id, {
			title: "After",
			priority: 7,
			max_scheduled: null,
			name: "ignored-name",
			version: "9.9"
		});
		expect(titled.status).toBe(200);
		expect(titled.body).toMatchObject({
			name: "edited",
			version: "1.0",
			title: "After",
			priority: 7,
			revision_num: 2
		});
		expect(titled.body.last_modified > jt.last_modified).toBe(true);
		expect(titled.body.created).toBe(jt.created);
		let revs = await query(
			"SELECT revision_num FROM job_type_rev WHERE job_type_id = $1 ORDER BY revision_num",
			[jt.id]
		);
		expect(revs.map(r => r.revision_num)).toEqual([1]);

		const newInterface = iface({ command: "new_cmd" });
		const edited = await patch(jt.id, { interface: newInterface });
		expect(edited.status).toBe(200);
		expect(edited.body.revision_num).toBe(3);
		expect(edited.body.interface.command).toBe("new_cmd");
		revs = await query(
			"SELECT revision_num, interface FROM job_type_rev WHERE job_type_id = $1 ORDER BY revision_num",
			[jt.id]
		);
		expect(revs.map(r => r.revision_num)).toEqual([1, 3]);
		expect(revs[1].interface).toEqual(edited.body.interface);

		const mapped = await patch(jt.id, {
			error_mapping: { exit_codes: { "5": "bad-header" } }
		});
		expect(mapped.body.revision_num).toBe(4);
		expect(mapped.body.errors.map((e: any) => e.name)).toEqual(["bad-header"]);
		expect(mapped.body.error_mapping).toEqual({
			version: "1.0",
			exit_codes: { "5": "bad-header" }
		});
	});

	it("changes nothing for a body with no editable field", async () => {
		const jt = await create(body("untouched"));
		const res = await patch(jt.id, { name: "x" });
		expect(res.status).toBe(200);
		expect(res.body.warnings).toEqual([
			{ id: "read-only", details: "Job type includes read-only field name, ignored" }
		]);
		expect(res.body.revision_num).toBe(1);
		expect(res.body.last_modified).toBe(jt.last_modified);
	});

	it("pauses and unpauses with the paused timestamp; archives and unarchives", async () => {
		const jt = await create(body("pausable"));
		const paused = await patch(jt.id, { is_paused: true });
		expect(paused.body.is_paused).toBe(true);
		expect(paused.body.paused).toMatch(ISO_MS_Z);
		const again = await patch(jt.id, { is_paused: true, title: "still paused" });
		expect(again.body.paused).toBe(paused.body.paused);
		const resumed = await patch(jt.id, { is_paused: false });
		expect(resumed.body).toMatchObject({ is_paused: false, paused: null });

		const archived = await patch(jt.id, { is_active: false });
		expect(archived.body.is_active).toBe(false);
		expect(archived.body.archived).toMatch(ISO_MS_Z);
		const active = await patch(jt.id, { is_active: true });
		expect(active.body).toMatchObject({ is_active: true, archived: null });
	});

	it("keeps uses_docker in step with docker_image", async () => {
		const jt = await create(body("dockered"));
		const on = await patch(jt.id, { docker_image: "algo:2" });
		expect(on.body).toMatchObject({ uses_docker: true, docker_image: "algo:2" });
		const off = await patch(jt.id, { docker_image: null });
		expect(off.body).toMatchObject({ uses_docker: false, docker_image: null });
	});

	it("replaces, pauses, resumes and removes the trigger rule", async () => {
		const jt = await create(body("ruled", { trigger_rule: parseRule() }));
		const first = jt.trigger_rule.id;

		// Only is_active: in place.
		const paused = await patch(jt.id, { trigger_rule: { is_active: false } });
		expect(paused.status).toBe(200);
		expect(paused.body.trigger_rule).toMatchObject({ id: first, is_active: false });
		expect(paused.body.trigger_rule.archived).toBeNull();
		expect(paused.body.revision_num).toBe(2);

		// The same rule with only is_active changed (as a client sends back what it read): in place.
		const resumed = await patch(jt.id, {
			trigger_rule: { ...paused.body.trigger_rule, is_active: true }
		});
		expect(resumed.status).toBe(200);
		expect(resumed.body.trigger_rule).toMatchObject({ id: first, is_active: true });

		// Another rule: the old one archived, a new row linked.
		const before = await counts();
		const replaced = await patch(jt.id, {
			trigger_rule: parseRule({ type: "INGEST" }, { workspace_name: "products" })
		});
		expect(replaced.status).toBe(200);
		const second = replaced.body.trigger_rule.id;
		expect(second).not.toBe(first);
		expect(replaced.body.trigger_rule).toMatchObject({
			type: "INGEST",
			name: "ruled",
			is_active: true,
			configuration: { data: { workspace_name: "products" } }
		});
		expect((await counts()).rule).toBe(before.rule + 1);
		const [old] = await query("SELECT * FROM trigger_rule WHERE id = $1", [first]);
		expect(old.is_active).toBe(false);
		expect(old.archived).toBeInstanceOf(Date);

		// null removes it.
		const removed = await patch(jt.id, { trigger_rule: null });
		expect(removed.status).toBe(200);
		expect(removed.body.trigger_rule).toBeNull();
		const [gone] = await query("SELECT * FROM trigger_rule WHERE id = $1", [second]);
		expect(gone).toMatchObject({ is_active: false });
		expect(gone.archived).toBeInstanceOf(Date);
		const [row] = await query("SELECT trigger_rule_id FROM job_type WHERE id = $1", [jt.id]);
		expect(row.trigger_rule_id).toBeNull();

		// is_active alone without a rule: nothing to pause.
		const none = await patch(jt.id, { trigger_rule: { is_active: false } });
		expect(none.body.trigger_rule).toBeNull();
	});

	it("refuses an interface the current rule no longer fits, changing nothing", async () => {
		const jt = await create(body("rule-fit", { trigger_rule: parseRule() }));
		const before = await counts();
		const res = await patch(jt.id, {
			title: "new",
			interface: iface({
				command_arguments: "${other}",
				input_data: [{ name: "other", type: "file" }]
			})
		});
		expectJsonError(
			res,
			400,
			/^trigger_rule\.configuration\.data\.input_data_name: "input_file" names no input/
		);
		expect(await counts()).toEqual(before);
		const got = await request("GET", `${api}/job-types/${jt.id}/`);
		expect(got.body).toMatchObject({ title: null, revision_num: 1 });
	});

	const badEdits: [string, Record<string, unknown>, RegExp][] = [
		[
			"a bad interface",
			{ interface: { command: "" } },
			/^interface\.command_arguments: is required$/
		],
		[
			"an unknown error",
			{ error_mapping: { exit_codes: { "1": "nope" } } },
			/^error_mapping\.exit_codes\.1: "nope" is not the name of a registered error$/
		],
		["a zero max_tries", { max_tries: 0 }, /^max_tries: must be >= 1$/],
		[
			"a rule with a missing workspace",
			{ trigger_rule: parseRule({}, { workspace_name: "missing" }) },
			/^trigger_rule\.configuration\.data\.workspace_name: "missing" is not the name of a workspace$/
		],
		[
			"a rule type without configuration",
			{ trigger_rule: { type: "PARSE" } },
			/^trigger_rule: type and configuration are required together$/
		]
	];
	it.each(badEdits)("answers 400 for %s and writes nothing", async (_name, edit, detail) => {
		const jt = await create(body(`bad-edit-${Math.random().toString(36).slice(2, 8)}`));
		const before = await counts();
		expectJsonError(await patch(jt.id, { title: "changed", ...edit }), 400, detail);
		expect(await counts()).toEqual(before);
		const got = await request("GET", `${api}/job-types/${jt.id}/`);
		expect(got.body).toMatchObject({ title: null, revision_num: 1 });
		expect(got.body.last_modified).toBe(jt.last_modified);
	});
});

describe("POST /job-types/validation/", () => {
	it("answers the media_type warning and saves nothing", async () => {
		const before = await counts();
		const res = await request(
			"POST",
			`${api}/job-types/validation/`,
			body("validated", {
				interface: iface({
					input_data: [{ name: "input_file", type: "file", media_types: ["image/tiff"] }]
				}),
				trigger_rule: parseRule()
			})
		);
		expect(res.status).toBe(200);
		expect(res.body).toEqual({
			warnings: [
				{
					id: "media_type",
					details: "Invalid media type for data input: input_file -> image/png"
				}
			]
		});
		expect(await counts()).toEqual(before);
	});

	it("answers no warnings for a good job type, even one that exists", async () => {
		await create(body("exists"));
		for (const name of ["fresh", "exists"]) {
			const res = await request("POST", `${api}/job-types/validation/`, body(name));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ warnings: [] });
		}
	});

	it("warns of a container job type that no active node can run now", async () => {
		const validate = async (extra: Record<string, unknown>) => {
			const res = await request(
				"POST",
				`${api}/job-types/validation/`,
				body("container", { docker_image: "geo/tiler:2", ...extra })
			);
			expect(res.status).toBe(200);
			return res.body.warnings;
		};
		const wait = "its jobs will wait in the queue until one can";
		await query(`DELETE FROM node`);
		expect(await validate({})).toEqual([
			{ id: "docker_image", details: `no active node has a Docker engine: ${wait}` }
		]);
		await query(
			`INSERT INTO node (hostname, slave_id, docker_engine, docker_images)
			 VALUES ('n1', 's1', true, '{docker.io/library/busybox:latest}')`
		);
		expect(await validate({})).toEqual([
			{
				id: "docker_image",
				details: `no active node has the image geo/tiler:2, and none pulls images (AGENT_DOCKER_PULL): ${wait}`
			}
		]);
		await query(
			`INSERT INTO node (hostname, slave_id, docker_engine, docker_images)
			 VALUES ('n2', 's2', true, '{docker.io/geo/tiler:2}')`
		);
		expect(await validate({})).toEqual([]);
		expect(await validate({ docker_privileged: true })).toEqual([
			{
				id: "docker_privileged",
				details: `no active node with the image runs privileged containers (AGENT_DOCKER_PRIVILEGED): ${wait}`
			}
		]);
		await query(`UPDATE node SET docker_privileged = true WHERE slave_id = 's2'`);
		expect(await validate({ docker_privileged: true })).toEqual([]);
		await query(`DELETE FROM node`);
	});

	it("answers 400 with the problem for an invalid job type", async () => {
		const before = await counts();
		const res = await request(
			"POST",
			`${api}/job-types/validation/`,
			body("invalid", { trigger_rule: parseRule({}, { input_data_name: "nope" }) })
		);
		expectJsonError(
			res,
			400,
			/^trigger_rule\.configuration\.data\.input_data_name: "nope" names no input/
		);
		expect(await counts()).toEqual(before);
	});
});

describe("bad create bodies", () => {
	beforeAll(async () => {
		await create(body("taken"));
	});

	const withInputs = (inputs: unknown[]) =>
		iface({ command_arguments: "", input_data: inputs, output_data: [] });
	const cases: [string, Record<string, unknown>, RegExp][] = [
		["missing name", { version: "1.0", interface: iface() }, /^name: is required$/],
		["missing version", { name: "n", interface: iface() }, /^version: is required$/],
		["missing interface", { name: "n", version: "1.0" }, /^interface: is required$/],
		["a name with a slash", body("a/b"), /^name: /],
		["a name too long", body("n".repeat(51)), /^name: /],
		[
			"a duplicate name and version",
			body("taken"),
			/^name: a job type named "taken" with version "1\.0" already exists$/
		],
		[
			"a bad input name",
			body("n", {
				interface: withInputs([
					{ name: "good", type: "property" },
					{ name: "bad/name", type: "property" }
				])
			}),
			/^interface\.input_data\[1\]\.name: must be 1 to 255 letters/
		],
		[
			"an unknown interface version",
			body("n", { interface: iface({ version: "2.0" }) }),
			/^interface\.version: "2\.0" is an unsupported version/
		],
		[
			"an interface that is a string",
			body("n", { interface: "x" }),
			/^interface: must be object$/
		],
		[
			"an unknown error in the mapping",
			body("n", { error_mapping: { version: "1.0", exit_codes: { "1": "no-such-error" } } }),
			/^error_mapping\.exit_codes\.1: "no-such-error" is not the name of a registered error$/
		],
		[
			"a bad trigger type",
			body("n", { trigger_rule: parseRule({ type: "WEEKLY" }) }),
			/^trigger_rule\.type: must be one of INGEST, PARSE, CLOCK$/
		],
		[
			"a trigger configuration without type",
			body("n", { trigger_rule: { configuration: parseRule().configuration } }),
			/^trigger_rule: type and configuration are required together$/
		],
		[
			"a clock schedule with days",
			body("n", {
				trigger_rule: {
					type: "CLOCK",
					name: "scale-job-load",
					configuration: { event_type: "JOB_LOAD", schedule: "P1DT1H" }
				}
			}),
			/^trigger_rule\.configuration\.schedule: .*date part/
		],
		[
			"an unknown clock processor",
			body("n", {
				trigger_rule: {
					type: "CLOCK",
					name: "my-clock",
					configuration: { event_type: "MINE", schedule: "PT1H" }
				}
			}),
			/^trigger_rule\.name: "my-clock" is not a clock event processor/
		],
		[
			"an input_data_name that names no input",
			body("n", { trigger_rule: parseRule({}, { input_data_name: "missing_input" }) }),
			/^trigger_rule\.configuration\.data\.input_data_name: "missing_input" names no input/
		],
		[
			"a missing workspace",
			body("n", { trigger_rule: parseRule({}, { workspace_name: "nowhere" }) }),
			/^trigger_rule\.configuration\.data\.workspace_name: "nowhere" is not the name of a workspace$/
		],
		[
			"trigger_rule a string",
			body("n", { trigger_rule: "PARSE" }),
			/^trigger_rule: must be object,null$/
		],
		["priority 0", body("n", { priority: 0 }), /^priority: must be >= 1$/],
		["priority as text", body("n", { priority: "5" }), /^priority: must be integer$/],
		["a negative timeout", body("n", { timeout: -1 }), /^timeout: must be >= 0$/],
		["a fractional timeout", body("n", { timeout: 1.5 }), /^timeout: must be integer$/],
		["max_tries 0", body("n", { max_tries: 0 }), /^max_tries: must be >= 1$/],
		["max_scheduled 0", body("n", { max_scheduled: 0 }), /^max_scheduled: must be >= 1$/],
		["negative cpus", body("n", { cpus_required: -0.5 }), /^cpus_required: must be >= 0$/],
		["negative mem", body("n", { mem_required: -1 }), /^mem_required: must be >= 0$/],
		["a title too long", body("n", { title: "t".repeat(51) }), /^title: /],
		["is_paused as text", body("n", { is_paused: "true" }), /^is_paused: must be boolean$/]
	];
	it.each(cases)("answers 400 for %s, writing nothing", async (_name, b, detail) => {
		const before = await counts();
		expectJsonError(await request("POST", `${api}/job-types/`, b), 400, detail);
		expect(await counts()).toEqual(before);
	});

	it("answers the same 400 from the validation endpoint", async () => {
		for (const [, b, detail] of cases) {
			if (/taken/.test(JSON.stringify(b))) continue;
			expectJsonError(await request("POST", `${api}/job-types/validation/`, b), 400, detail);
		}
	});
});
