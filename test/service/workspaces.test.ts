import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/** The gateway and the workspaces service in one process, over real HTTP and PostgreSQL. */
describe("workspaces service", () => {
	let db: TestDatabase;
	let services: TestApi;
	let api: string;
	let root: string;
	/** DATA_DIR and AGENT_WORK_DIR of the service, under root, which no workspace may use */
	let dataDir: string;
	let agentWorkDir: string;
	/** A real directory under the test's temporary folder, made on first use. */
	function dir(name: string): string {
		const made = path.join(root, name);
		fs.mkdirSync(made, { recursive: true });
		return made;
	}

	function config(hostPath: string, extra: Record<string, unknown> = {}) {
		return { broker: { type: "host", host_path: hostPath }, ...extra };
	}

	async function rows(): Promise<Record<string, any>[]> {
		const [result] = await db.db.query("SELECT * FROM workspace ORDER BY id");
		return result as Record<string, any>[];
	}

	async function create(body: Record<string, unknown>) {
		const res = await request("POST", `${api}/workspaces/`, body);
		expect(res.status).toBe(201);
		return res.body;
	}

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "ws-service-"));
		dataDir = path.join(root, "service-data");
		agentWorkDir = path.join(root, "agent-work");
		fs.symlinkSync("/etc", path.join(root, "to-etc"));
		db = await createTestDatabase();
		services = await startServices(db.url, ["api", "workspaces"], {
			DATA_DIR: dataDir,
			AGENT_WORK_DIR: agentWorkDir
		});
		api = services.api;
	});

	afterAll(async () => {
		await services?.stop();
		await db?.drop();
		if (root) fs.rmSync(root, { recursive: true, force: true });
	});

	describe("create", () => {
		it("answers 201, an absolute Location and the details", async () => {
			const hostPath = dir("raw");
			const res = await request("POST", `${api}/workspaces/`, {
				name: "raw",
				title: "Raw Source",
				description: "Raw Source Workspace",
				base_url: "http://host.com/rs",
				is_active: true,
				json_config: config(hostPath)
			});
			expect(res.status).toBe(201);
			expect(res.headers.get("location")).toBe(`${api}/workspaces/${res.body.id}/`);
			expect(res.body).toEqual({
				id: expect.any(Number),
				name: "raw",
				title: "Raw Source",
				description: "Raw Source Workspace",
				base_url: "http://host.com/rs",
				is_active: true,
				used_size: null,
				total_size: null,
				created: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
				archived: null,
				last_modified: res.body.created,
				json_config: { version: "1.0", broker: { type: "host", host_path: hostPath } }
			});
			const [row] = (await rows()).filter(r => r.id === res.body.id);
			expect(row).toMatchObject({
				name: "raw",
				is_active: true,
				archived: null,
				json_config: { version: "1.0", broker: { type: "host", host_path: hostPath } }
			});
		});

		it("defaults optional fields and is_active to true", async () => {
			const body = await create({ name: "minimal", json_config: config(dir("minimal")) });
			expect(body).toMatchObject({
				name: "minimal",
				title: null,
				description: null,
				base_url: null,
				is_active: true,
				archived: null
			});
		});

		it("archives a workspace created inactive", async () => {
			const body = await create({
				name: "born-archived",
				is_active: false,
				json_config: config(dir("born-archived"), { version: "1.0" })
			});
			expect(body.is_active).toBe(false);
			expect(body.archived).toBe(body.created);
		});

		it("answers used_size and total_size as numbers", async () => {
			const body = await create({ name: "sized", json_config: config(dir("sized")) });
			await db.db.query(
				"UPDATE workspace SET used_size = 5000000000, total_size = 9000000000 WHERE id = $1",
				{ bind: [body.id] }
			);
			const res = await request("GET", `${api}/workspaces/${body.id}/`);
			expect(res.body.used_size).toBe(5000000000);
			expect(res.body.total_size).toBe(9000000000);
			const list = await request("GET", `${api}/workspaces/?name=sized`);
			expect(list.body.results[0]).toMatchObject({
				used_size: 5000000000,
				total_size: 9000000000
			});
		});

		it("works under /api/v3/ too", async () => {
			const v3 = api.replace(/\/api$/, "/api/v3");
			const res = await request("POST", `${v3}/workspaces/`, {
				name: "via-v3",
				json_config: config(dir("via-v3"))
			});
			expect(res.status).toBe(201);
			expect(res.headers.get("location")).toBe(`${v3}/workspaces/${res.body.id}/`);
			const got = await request("GET", `${v3}/workspaces/${res.body.id}/`);
			expect(got.status).toBe(200);
			expect(got.body.name).toBe("via-v3");
			const list = await request("GET", `${v3}/workspaces/?name=via-v3`);
			expect(list.body.count).toBe(1);
			const edited = await request("PATCH", `${v3}/workspaces/${res.body.id}/`, {
				title: "V3"
			});
			expect(edited.status).toBe(200);
			expect(edited.body.title).toBe("V3");
			const valid = await request("POST", `${v3}/workspaces/validation/`, {
				name: "via-v3-check",
				json_config: config(dir("via-v3"))
			});
			expect(valid.status).toBe(200);
			expect(valid.body).toEqual({ warnings: [] });
		});
	});

	describe("bad input", () => {
		let good: string;
		beforeAll(async () => {
			good = dir("good");
			fs.writeFileSync(path.join(root, "a-file"), "x");
			await create({ name: "taken", json_config: config(dir("taken")) });
		});

		const long = "x".repeat(51);
		const cases: [string, () => unknown, RegExp][] = [
			["missing name", () => ({ json_config: config(good) }), /^name: is required$/],
			["missing json_config", () => ({ name: "n1" }), /^json_config: is required$/],
			["name not a string", () => ({ name: 5, json_config: config(good) }), /^name: /],
			["empty name", () => ({ name: "", json_config: config(good) }), /^name: /],
			["name too long", () => ({ name: long, json_config: config(good) }), /^name: /],
			["name with a space", () => ({ name: "a b", json_config: config(good) }), /^name: /],
			[
				"duplicate name",
				() => ({ name: "taken", json_config: config(good) }),
				/^name: a workspace named "taken" already exists$/
			],
			[
				"title not a string",
				() => ({ name: "n1", title: 1, json_config: config(good) }),
				/^title: /
			],
			[
				"title too long",
				() => ({ name: "n1", title: long, json_config: config(good) }),
				/^title: /
			],
			[
				"description too long",
				() => ({ name: "n1", description: "d".repeat(501), json_config: config(good) }),
				/^description: /
			],
			[
				"description with NUL",
				() => ({ name: "n1", description: "a\0b", json_config: config(good) }),
				/^description: must not contain NUL/
			],
			[
				"base_url not a string",
				() => ({ name: "n1", base_url: 7, json_config: config(good) }),
				/^base_url: /
			],
			[
				"base_url not a URL",
				() => ({ name: "n1", base_url: "not a url", json_config: config(good) }),
				/^base_url: must be an absolute http or https URL/
			],
			[
				"is_active not a boolean",
				() => ({ name: "n1", is_active: "false", json_config: config(good) }),
				/^is_active: must be boolean$/
			],
			[
				"json_config not an object",
				() => ({ name: "n1", json_config: "host" }),
				/^json_config: must be object$/
			],
			[
				"json_config an array",
				() => ({ name: "n1", json_config: [config(good)] }),
				/^json_config: must be object$/
			],
			[
				"json_config without broker",
				() => ({ name: "n1", json_config: {} }),
				/^json_config\.broker: is required$/
			],
			[
				"a relative host_path",
				() => ({ name: "n1", json_config: config("relative/dir") }),
				/^json_config\.broker\.host_path: must be an absolute path/
			],
			[
				"a missing directory",
				() => ({ name: "n1", json_config: config(path.join(root, "missing")) }),
				/^json_config\.broker\.host_path: ".*missing" does not exist$/
			],
			[
				"a file instead of a directory",
				() => ({ name: "n1", json_config: config(path.join(root, "a-file")) }),
				/^json_config\.broker\.host_path: ".*a-file" is not a directory$/
			],
			[
				"a '..' segment",
				() => ({ name: "n1", json_config: config(`${good}/../good`) }),
				/^json_config\.broker\.host_path: must be a normalised path/
			],
			[
				"the root directory",
				() => ({ name: "n1", json_config: config("/") }),
				/^json_config\.broker\.host_path: "\/" is a system directory; a workspace may not keep its files there$/
			],
			[
				"a system directory",
				() => ({ name: "n1", json_config: config("/etc") }),
				/^json_config\.broker\.host_path: "\/etc" is a system directory; a workspace may not keep its files there$/
			],
			[
				"a directory inside a system directory",
				() => ({ name: "n1", json_config: config("/proc/self") }),
				/^json_config\.broker\.host_path: "\/proc\/self" is inside the system directory \/proc; /
			],
			[
				"a symbolic link to a system directory",
				() => ({ name: "n1", json_config: config(path.join(root, "to-etc")) }),
				/^json_config\.broker\.host_path: ".*\/to-etc" leads to \/etc, which is a system directory; /
			],
			[
				"the service's data directory",
				() => ({ name: "n1", json_config: config(dataDir) }),
				/^json_config\.broker\.host_path: ".*\/service-data" is the service's data directory; /
			],
			[
				"a directory inside the node agent's work directory",
				() => ({ name: "n1", json_config: config(path.join(agentWorkDir, "tasks")) }),
				/^json_config\.broker\.host_path: ".*\/agent-work\/tasks" is inside the node agent's work directory .*\/agent-work; /
			],
			[
				"a directory holding the service's data directory",
				() => ({ name: "n1", json_config: config(root) }),
				/^json_config\.broker\.host_path: ".*" contains the service's data directory .*\/service-data; a workspace may not keep its files there$/
			],
			[
				"the nfs broker where the nodes mount no exports",
				() => ({ name: "n1", json_config: { broker: { type: "nfs", nfs_path: "h:/p" } } }),
				/^json_config\.broker\.type: an "nfs" workspace needs NFS_MOUNT_ROOT/
			],
			[
				"the s3 broker",
				() => ({ name: "n1", json_config: { broker: { type: "s3" } } }),
				/^json_config\.broker\.type: the "s3" broker is not supported/
			],
			[
				"an unknown broker",
				() => ({ name: "n1", json_config: { broker: { type: "ftp" } } }),
				/^json_config\.broker\.type: unknown broker type "ftp"/
			],
			[
				"an unknown version",
				() => ({ name: "n1", json_config: config(good, { version: "2.0" }) }),
				/^json_config\.version: "2\.0" is an unsupported version \(supported: 1\.0\)$/
			],
			[
				"an unknown configuration field",
				() => ({ name: "n1", json_config: config(good, { mount: "x" }) }),
				/^json_config\.mount: is not allowed$/
			]
		];

		describe.each([
			["create", "workspaces/"],
			["validation", "workspaces/validation/"]
		])("on %s", (action, route) => {
			// Validation takes an existing name as a new configuration for that workspace (Scale).
			const refused = cases.filter(
				([what]) => action === "create" || what !== "duplicate name"
			);
			it.each(refused)(
				"refuses %s with a 400 naming the field",
				async (_what, body, detail) => {
					const before = await rows();
					const res = await request("POST", `${api}/${route}`, body());
					expect(res.status).toBe(400);
					expect(res.body.detail).toMatch(detail);
					expect(await rows()).toEqual(before);
				}
			);

			it("refuses a JSON array body", async () => {
				const before = await rows();
				const res = await request("POST", `${api}/${route}`, [
					{ name: "n1", json_config: config(good) }
				]);
				expect(res.status).toBe(400);
				expect(res.body.detail).toBe("body: must be a JSON object");
				expect(await rows()).toEqual(before);
			});

			it("refuses malformed JSON", async () => {
				const before = await rows();
				const res = await request("POST", `${api}/${route}`, '{"name": "n1", ');
				expect(res.status).toBe(400);
				expect(res.body.detail).toMatch(/^Malformed JSON in the request body/);
				expect(await rows()).toEqual(before);
			});
		});
	});

	describe("list", () => {
		beforeAll(async () => {
			for (const [name, title] of [
				["list-b", "Bravo"],
				["list-a", "Charlie"],
				["list-c", "Alpha"]
			])
				await create({ name, title, json_config: config(dir(name)) });
		});

		it("answers the envelope, ordered by name by default, without json_config", async () => {
			const res = await request("GET", `${api}/workspaces/`);
			expect(res.status).toBe(200);
			const names = res.body.results.map((w: any) => w.name);
			expect(names).toEqual([...names].sort());
			expect(res.body.count).toBe((await rows()).length);
			expect(res.body.next).toBeNull();
			expect(res.body.previous).toBeNull();
			expect(Object.keys(res.body.results[0]).sort()).toEqual(
				[
					"id",
					"name",
					"title",
					"description",
					"base_url",
					"is_active",
					"used_size",
					"total_size",
					"created",
					"archived",
					"last_modified"
				].sort()
			);
		});

		it("filters by one name and by repeated names", async () => {
			const one = await request("GET", `${api}/workspaces/?name=list-a`);
			expect(one.body.count).toBe(1);
			expect(one.body.results.map((w: any) => w.name)).toEqual(["list-a"]);
			const two = await request(
				"GET",
				`${api}/workspaces/?name=list-c&name=list-a&name=nope`
			);
			expect(two.body.count).toBe(2);
			expect(two.body.results.map((w: any) => w.name)).toEqual(["list-a", "list-c"]);
		});

		it("orders by any list field, descending with a dash", async () => {
			const q = "name=list-a&name=list-b&name=list-c";
			const byTitle = await request("GET", `${api}/workspaces/?${q}&order=title`);
			expect(byTitle.body.results.map((w: any) => w.title)).toEqual([
				"Alpha",
				"Bravo",
				"Charlie"
			]);
			const byNameDesc = await request("GET", `${api}/workspaces/?${q}&order=-name`);
			expect(byNameDesc.body.results.map((w: any) => w.name)).toEqual([
				"list-c",
				"list-b",
				"list-a"
			]);
			const byId = await request("GET", `${api}/workspaces/?${q}&order=-id`);
			const ids = byId.body.results.map((w: any) => w.id);
			expect(ids).toEqual([...ids].sort((a: number, b: number) => b - a));
			const bad = await request("GET", `${api}/workspaces/?order=json_config`);
			expect(bad.status).toBe(400);
			expect(bad.body.detail).toMatch(/^order: unknown field "json_config"/);
		});

		it("pages with absolute next and previous links", async () => {
			const q = "name=list-a&name=list-b&name=list-c";
			const first = await request("GET", `${api}/workspaces/?${q}&page_size=2`);
			expect(first.body.count).toBe(3);
			expect(first.body.results.map((w: any) => w.name)).toEqual(["list-a", "list-b"]);
			expect(first.body.previous).toBeNull();
			expect(first.body.next).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/workspaces\/\?/);
			expect(first.body.next).toContain("page=2");
			const second = await request("GET", first.body.next);
			expect(second.body.results.map((w: any) => w.name)).toEqual(["list-c"]);
			expect(second.body.next).toBeNull();
			expect(second.body.previous).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/workspaces\/\?/);
		});

		it("filters on last_modified with started and ended", async () => {
			const future = await request(
				"GET",
				`${api}/workspaces/?started=2999-01-01T00:00:00Z&ended=2999-01-02T00:00:00Z`
			);
			expect(future.status).toBe(200);
			expect(future.body.count).toBe(0);
			const recent = await request("GET", `${api}/workspaces/?started=PT1H&name=list-a`);
			expect(recent.body.count).toBe(1);
			const bad = await request("GET", `${api}/workspaces/?started=yesterday`);
			expect(bad.status).toBe(400);
			expect(bad.body.detail).toMatch(/^started: /);
		});
	});

	describe("details", () => {
		it("answers the details with json_config", async () => {
			const hostPath = dir("details");
			const made = await create({
				name: "details",
				title: "Details",
				json_config: config(hostPath)
			});
			const res = await request("GET", `${api}/workspaces/${made.id}/`);
			expect(res.status).toBe(200);
			expect(res.body).toEqual(made);
			const noSlash = await request("GET", `${api}/workspaces/${made.id}`);
			expect(noSlash.status).toBe(200);
		});

		it("answers 404 for an unknown or non-numeric id", async () => {
			for (const id of ["999999", "abc", "0x1"]) {
				const res = await request("GET", `${api}/workspaces/${id}/`);
				expect(res.status).toBe(404);
				expect(res.body).toHaveProperty("detail");
			}
		});
	});

	describe("edit", () => {
		let id: number;
		let created: Record<string, any>;

		beforeAll(async () => {
			created = await create({
				name: "editable",
				title: "Before",
				description: "Before description",
				base_url: "http://before.example/ws",
				json_config: config(dir("editable"))
			});
			id = created.id;
		});

		async function patch(body: unknown) {
			return request("PATCH", `${api}/workspaces/${id}/`, body);
		}

		it("edits each field, touching last_modified", async () => {
			const other = dir("editable-2");
			const res = await patch({
				title: "After",
				description: "After description",
				base_url: "https://after.example/ws",
				json_config: config(other, { version: "1.0" })
			});
			expect(res.status).toBe(200);
			expect(res.body).toMatchObject({
				id,
				name: "editable",
				title: "After",
				description: "After description",
				base_url: "https://after.example/ws",
				is_active: true,
				created: created.created,
				json_config: { version: "1.0", broker: { type: "host", host_path: other } }
			});
			expect(Date.parse(res.body.last_modified)).toBeGreaterThan(
				Date.parse(created.last_modified)
			);
			const got = await request("GET", `${api}/workspaces/${id}/`);
			expect(got.body).toEqual(res.body);
		});

		it("edits one field and leaves the others alone", async () => {
			const before = (await request("GET", `${api}/workspaces/${id}/`)).body;
			for (const [field, value] of [
				["title", "Only title"],
				["description", "Only description"],
				["base_url", "http://only.example/"]
			]) {
				const res = await patch({ [field]: value });
				expect(res.status).toBe(200);
				expect(res.body[field]).toBe(value);
				expect(res.body.json_config).toEqual(before.json_config);
				expect(res.body.name).toBe("editable");
			}
			const res = await patch({ json_config: config(dir("editable-3")) });
			expect(res.body).toMatchObject({
				title: "Only title",
				description: "Only description",
				base_url: "http://only.example/",
				json_config: { version: "1.0", broker: { host_path: dir("editable-3") } }
			});
		});

		it("clears title, description and base_url with null", async () => {
			const res = await patch({ title: null, description: null, base_url: null });
			expect(res.status).toBe(200);
			expect(res.body).toMatchObject({ title: null, description: null, base_url: null });
		});

		it("ignores name with a warning, and refuses unknown fields", async () => {
			expectJsonError(await patch({ name: "renamed", color: "blue" }), 400, /^color: /);
			const res = await patch({ name: "renamed", id: 12345 });
			expect(res.status).toBe(200);
			expect(res.body.warnings).toEqual([
				{ id: "read-only", details: "Workspace includes read-only field name, ignored" }
			]);
			expect(res.body.name).toBe("editable");
			expect(res.body.id).toBe(id);
			expect((await rows()).some(r => r.name === "renamed")).toBe(false);
		});

		it("archives and unarchives with is_active", async () => {
			const archived = await patch({ is_active: false });
			expect(archived.status).toBe(200);
			expect(archived.body.is_active).toBe(false);
			expect(archived.body.archived).toEqual(expect.any(String));
			const again = await patch({ is_active: false, title: "Still archived" });
			expect(again.body.archived).toBe(archived.body.archived);
			const untouched = await patch({ title: "Edited while archived" });
			expect(untouched.body).toMatchObject({
				is_active: false,
				archived: archived.body.archived
			});
			const active = await patch({ is_active: true });
			expect(active.body).toMatchObject({ is_active: true, archived: null });
		});

		it("refuses bad edits with a 400 naming the field, changing nothing", async () => {
			const bad: [unknown, RegExp][] = [
				[{ title: 5 }, /^title: /],
				[{ title: "t".repeat(51) }, /^title: /],
				[{ description: false }, /^description: /],
				[{ base_url: "ftp://x/" }, /^base_url: /],
				[{ is_active: "yes" }, /^is_active: must be boolean$/],
				[{ json_config: null }, /^json_config: must be object$/],
				[{ json_config: "x" }, /^json_config: must be object$/],
				[{ json_config: config("rel") }, /^json_config\.broker\.host_path: /],
				[
					{ json_config: config(path.join(root, "a-file")) },
					/^json_config\.broker\.host_path: /
				],
				[
					{ json_config: { broker: { type: "nfs" } } },
					/^json_config\.broker\.nfs_path: is required/
				],
				[{ json_config: { broker: { type: "s3" } } }, /^json_config\.broker\.type: /],
				[{ json_config: config(dir("x"), { version: "9" }) }, /^json_config\.version: /],
				[
					{ json_config: config("/etc") },
					/^json_config\.broker\.host_path: "\/etc" is a system directory; a workspace may not keep its files there$/
				],
				[
					{ title: "ok", json_config: config(root) },
					/^json_config\.broker\.host_path: ".*" contains the service's data directory /
				],
				[
					{ title: "ok", json_config: config(`${root}/missing`) },
					/^json_config\.broker\.host_path: /
				],
				[[{ title: "array" }], /^body: must be a JSON object$/]
			];
			for (const [body, detail] of bad) {
				const before = await rows();
				const res = await patch(body);
				expect({ body, status: res.status }).toEqual({ body, status: 400 });
				expect(res.body.detail).toMatch(detail);
				expect(await rows()).toEqual(before);
			}
			const before = await rows();
			const malformed = await patch("{");
			expect(malformed.status).toBe(400);
			expect(await rows()).toEqual(before);
		});

		it("answers 404 for an unknown or non-numeric id", async () => {
			const before = await rows();
			for (const target of ["999999", "abc"]) {
				for (const body of [{ title: "x" }, { json_config: config(dir("editable")) }]) {
					const res = await request("PATCH", `${api}/workspaces/${target}/`, body);
					expect(res.status).toBe(404);
				}
			}
			expect(await rows()).toEqual(before);
		});
	});

	describe("validation", () => {
		it("answers 200 with no warnings for a valid workspace and saves nothing", async () => {
			const before = await rows();
			const res = await request("POST", `${api}/workspaces/validation/`, {
				name: "never-saved",
				title: "Never saved",
				description: "Only validated",
				base_url: "http://host.com/x",
				is_active: true,
				json_config: config(dir("never-saved"))
			});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ warnings: [] });
			expect(await rows()).toEqual(before);
			expect(before.some(r => r.name === "never-saved")).toBe(false);
		});

		it("accepts the name of an existing workspace (checking a new configuration for it)", async () => {
			await create({ name: "validated-existing", json_config: config(dir("ve")) });
			const before = await rows();
			const res = await request("POST", `${api}/workspaces/validation/`, {
				name: "validated-existing",
				json_config: config(dir("ve-2"))
			});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ warnings: [] });
			expect(await rows()).toEqual(before);
		});

		it("warns when the broker type of an existing workspace would change", async () => {
			const made = await create({ name: "was-nfs", json_config: config(dir("was-nfs")) });
			// A workspace from elsewhere (Scale's own database, say) may have another broker.
			await db.db.query(
				`UPDATE workspace SET json_config = '{"version": "1.0", "broker": {"type": "nfs", "nfs_path": "h:/p"}}' WHERE id = $1`,
				{ bind: [made.id] }
			);
			const before = await rows();
			const res = await request("POST", `${api}/workspaces/validation/`, {
				name: "was-nfs",
				json_config: config(dir("was-nfs"))
			});
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				warnings: [
					{
						id: "broker_type",
						details: "Changing the broker type may disrupt queued/running jobs."
					}
				]
			});
			expect(await rows()).toEqual(before);
		});
	});

	describe("Scale's nfs workspaces", () => {
		const nfs = (nfsPath: string) => ({ broker: { type: "nfs", nfs_path: nfsPath } });

		it("are refused, saving nothing, where the nodes mount no exports (no NFS_MOUNT_ROOT)", async () => {
			const before = await rows();
			const res = await request("POST", `${api}/workspaces/`, {
				name: "filer",
				json_config: nfs("filer:/exports/raw")
			});
			expect(res.status).toBe(400);
			expect(res.body.detail).toMatch(
				/^json_config\.broker\.type: an "nfs" workspace needs NFS_MOUNT_ROOT/
			);
			expect(await rows()).toEqual(before);
		});

		it("live where NFS_MOUNT_ROOT says the nodes mount their exports", async () => {
			const net = dir("net");
			const withRoot = await startServices(db.url, ["api", "workspaces"], {
				NFS_MOUNT_ROOT: net
			});
			try {
				const at = withRoot.api;
				const mounted = dir("net/filer/exports/raw");
				const body = { name: "filer", json_config: nfs("filer:/exports/raw") };
				const checked = await request("POST", `${at}/workspaces/validation/`, body);
				expect(checked.body).toEqual({ warnings: [] });
				const made = await request("POST", `${at}/workspaces/`, body);
				expect(made.status).toBe(201);
				expect(made.body.json_config).toEqual({
					version: "1.0",
					broker: { type: "nfs", nfs_path: "filer:/exports/raw", host_path: mounted }
				});
				const missing = await request("PATCH", `${at}/workspaces/${made.body.id}/`, {
					json_config: nfs("filer:/exports/gone")
				});
				expect(missing.status).toBe(400);
				expect(missing.body.detail).toMatch(
					/^json_config\.broker\.nfs_path: "filer:\/exports\/gone" is mounted at .* which does not exist/
				);
			} finally {
				await withRoot.stop();
			}
		});
	});
});
