import fs from "fs";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type Reply, type TestApi } from "../helpers/broker";

const VERSION = JSON.parse(
	fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")
).version;

let tdb: TestDatabase;

beforeAll(async () => {
	tdb = await createTestDatabase();
});

afterAll(async () => {
	await tdb?.drop();
});

async function errorCount(): Promise<number> {
	const [rows] = await tdb.db.query("SELECT count(*)::int AS n FROM error");
	return (rows as { n: number }[])[0].n;
}

function expectJsonError(reply: Reply, status: number, detail?: RegExp) {
	expect(reply.status).toBe(status);
	expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
	expect(Object.keys(reply.body)).toEqual(["detail"]);
	expect(typeof reply.body.detail).toBe("string");
	if (detail) expect(reply.body.detail).toMatch(detail);
}

/** A JSON object body of about `bytes` bytes (a long description). */
function bodyOfSize(bytes: number): string {
	const head = '{"name":"big","category":"DATA","description":"';
	const tail = '"}';
	return head + "x".repeat(bytes - head.length - tail.length) + tail;
}

describe("without API tokens", () => {
	let app: TestApi;
	let origin: string;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors", "status"]);
		origin = new URL(app.api).origin;
	});

	afterAll(async () => {
		await app?.stop();
	});

	it.each([
		["an unknown path under /api", "GET", "/api/no-such-thing/"],
		["an unknown path under /api/v3", "GET", "/api/v3/no-such-thing/"],
		["a path outside /api", "GET", "/no-such-thing"],
		["the root", "GET", "/"],
		["an unrouted method on a known path", "DELETE", "/api/errors/1/"],
		["an internal action by name", "GET", "/api/errors/list"],
		["a Moleculer internal action", "GET", "/api/~node/actions"]
	])("answers 404 JSON for %s", async (_, method, url) => {
		expectJsonError(await request(method, `${origin}${url}`), 404);
	});

	it("answers malformed JSON with 400 JSON", async () => {
		const before = await errorCount();
		const reply = await request("POST", `${app.api}/errors/`, '{"name": "x", "category":');
		expectJsonError(reply, 400, /JSON/);
		expect(await errorCount()).toBe(before);
	});

	it.each([
		["an array", '[{"name": "x", "category": "DATA"}]'],
		["a number", "5"],
		["null", "null"],
		["a string", '"x"']
	])("answers a JSON body that is %s with 400", async (_, body) => {
		const before = await errorCount();
		expectJsonError(await request("POST", `${app.api}/errors/`, body), 400);
		expect(await errorCount()).toBe(before);
	});

	it("answers a body over 1 MB with 413 and one under it normally", async () => {
		const before = await errorCount();
		const big = await request("POST", `${app.api}/errors/`, bodyOfSize(1024 * 1024 + 100));
		expectJsonError(big, 413);
		// Just under the limit the body is read and judged on its fields (description too long).
		const under = await request("POST", `${app.api}/errors/`, bodyOfSize(1000 * 1000));
		expectJsonError(under, 400, /^description: /);
		expect(await errorCount()).toBe(before);
	});

	it("echoes X-Request-ID when sent, on success and on error", async () => {
		const ok = await request("GET", `${app.api}/errors/`, undefined, {
			"X-Request-ID": "abc-123"
		});
		expect(ok.status).toBe(200);
		expect(ok.headers.get("x-request-id")).toBe("abc-123");
		const bad = await request("GET", `${app.api}/errors/?page_size=0`, undefined, {
			"X-Request-ID": "def-456"
		});
		expect(bad.status).toBe(400);
		expect(bad.headers.get("x-request-id")).toBe("def-456");
		const missing = await request("GET", `${origin}/nowhere`, undefined, {
			"X-Request-ID": "ghi-789"
		});
		expect(missing.status).toBe(404);
		expect(missing.headers.get("x-request-id")).toBe("ghi-789");
	});

	it("generates a distinct X-Request-ID when none is sent", async () => {
		const replies = [
			await request("GET", `${app.api}/errors/`),
			await request("GET", `${app.api}/errors/`),
			await request("GET", `${app.api}/errors/abc/`),
			await request("POST", `${app.api}/errors/`, "{"),
			await request("GET", `${origin}/nowhere`)
		];
		const ids = replies.map(r => r.headers.get("x-request-id"));
		for (const id of ids) expect(id).toMatch(/^\S{8,}$/);
		expect(new Set(ids).size).toBe(ids.length);
	});

	it("never answers the errors endpoints in text/plain", async () => {
		const replies = [
			await request("GET", `${app.api}/errors/`),
			await request("GET", `${app.api}/errors/1/`),
			await request("GET", `${app.api}/errors/999999/`),
			await request("GET", `${app.api}/errors/?order=bogus`),
			await request("POST", `${app.api}/errors/`, { name: "bad name", category: "DATA" }),
			await request("POST", `${app.api}/errors/`, "{"),
			await request("PATCH", `${app.api}/errors/1/`, { title: "x" }),
			await request("PATCH", `${app.api}/errors/999999/`, { title: "x" })
		];
		expect(replies.map(r => r.status)).toEqual([200, 200, 404, 400, 400, 400, 400, 404]);
		for (const reply of replies) {
			expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
			expect(reply.body).toBeDefined();
		}
	});

	it("answers GET /api/version/ with the package version", async () => {
		for (const root of [app.api, `${app.api}/v3`]) {
			const reply = await request("GET", `${root}/version/`);
			expect(reply.status).toBe(200);
			expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
			expect(reply.body).toEqual({ version: VERSION });
		}
		expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
	});

	it("answers 503 JSON for a route whose service is not running", async () => {
		// The workspaces routes exist, but this broker runs no workspaces service.
		const reply = await request("GET", `${app.api}/workspaces/`);
		expectJsonError(reply, 503);
	});
});

describe("request bodies", () => {
	let app: TestApi;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors"]);
	});

	afterAll(async () => {
		await app?.stop();
	});

	it("takes a write's fields from the body, never from the query string", async () => {
		const res = await request("POST", `${app.api}/errors/?name=from-query&category=SYSTEM`, {
			name: "from-body",
			category: "DATA"
		});
		expect(res.status).toBe(201);
		expect(res.body).toMatchObject({ name: "from-body", category: "DATA" });
		const patched = await request("PATCH", `${app.api}/errors/${res.body.id}/?title=q`, {
			description: "d"
		});
		expect(patched.status).toBe(200);
		expect(patched.body).toMatchObject({ title: null, description: "d" });
	});

	it("keeps the path id over an id in the body", async () => {
		const made = await request("POST", `${app.api}/errors/`, {
			name: "path-id",
			category: "DATA"
		});
		const res = await request("PATCH", `${app.api}/errors/${made.body.id}/`, {
			id: 1,
			title: "t"
		});
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ id: made.body.id, name: "path-id", title: "t" });
	});

	it.each([
		[
			"a NUL character",
			'{"name":"nul","category":"DATA","title":"a\\u0000b"}',
			/^title: .*NUL/
		],
		[
			"an unpaired surrogate",
			'{"name":"sur","category":"DATA","title":"a\\ud800b"}',
			/^title: /
		],
		["a __proto__ key", '{"name":"pro","category":"DATA","__proto__":{"x":1}}', /^__proto__: /]
	])("refuses %s with a 400 naming the field and writes nothing", async (_what, body, detail) => {
		const before = await errorCount();
		const res = await request("POST", `${app.api}/errors/`, body);
		expectJsonError(res, 400, detail);
		expect(await errorCount()).toBe(before);
	});
});

describe("text/plain errors where the spec asks", () => {
	let app: TestApi;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "jobs", "nodes"]);
	});

	afterAll(async () => {
		await app?.stop();
	});

	it.each([
		["PATCH", "/jobs/abc/", undefined, 404],
		["PATCH", "/v3/jobs/0/", undefined, 404],
		["PATCH", "/jobs/1/", "{bad", 400],
		["PATCH", "/jobs/1/", "[1]", 400],
		["GET", "/nodes/abc/", undefined, 404],
		["PUT", "/nodes/1/", "{bad", 400],
		["PATCH", "/nodes/x/", undefined, 404]
	])("%s %s with body %s answers %s in text/plain", async (method, path, body, status) => {
		const res = await request(method, `${app.api}${path}`, body);
		expect(res.status).toBe(status);
		expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
		expect(res.text.length).toBeGreaterThan(0);
		expect(res.body?.detail).toBeUndefined();
	});

	it("keeps JSON errors for the node list and status", async () => {
		const res = await request("GET", `${app.api}/nodes/status/?page_size=0`);
		expect(res.headers.get("content-type")).toMatch(/^application\/json/);
	});
});

describe("with API_TOKENS", () => {
	let app: TestApi;
	const good = { Authorization: "Bearer t2" };

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors", "status"], { API_TOKENS: "t1,t2" });
	});

	afterAll(async () => {
		await app?.stop();
	});

	function expectUnauthorized(reply: Reply) {
		expectJsonError(reply, 401);
		expect(reply.headers.get("www-authenticate")).toMatch(/^Bearer /);
	}

	it("answers 401 with WWW-Authenticate without an Authorization header", async () => {
		expectUnauthorized(await request("GET", `${app.api}/errors/`));
		expectUnauthorized(await request("GET", `${app.api}/v3/status/`));
		expectUnauthorized(await request("GET", `${app.api}/version/`));
	});

	it.each([
		["a wrong token", "Bearer t3"],
		["a token's prefix", "Bearer t"],
		["an empty bearer", "Bearer "],
		["two tokens", "Bearer t1 t2"],
		["another scheme", "Basic dDE6dDE="],
		["the bare token", "t1"]
	])("answers 401 for %s", async (_, authorization) => {
		expectUnauthorized(
			await request("GET", `${app.api}/errors/`, undefined, { Authorization: authorization })
		);
	});

	it("answers 200 with either right token", async () => {
		for (const token of ["t1", "t2"]) {
			const reply = await request("GET", `${app.api}/errors/`, undefined, {
				Authorization: `Bearer ${token}`
			});
			expect(reply.status).toBe(200);
			expect(reply.body.count).toBeGreaterThanOrEqual(12);
		}
		const status = await request("GET", `${app.api}/status/`, undefined, good);
		expect(status.status).toBe(200);
	});

	it("answers a bad body without a token with 401, not 400 or 413", async () => {
		const before = await errorCount();
		for (const body of [
			{ name: 5 },
			{ name: "no-token", category: "SYSTEM" },
			'{"name": ',
			"[1]",
			bodyOfSize(1024 * 1024 + 100)
		])
			expectUnauthorized(await request("POST", `${app.api}/errors/`, body));
		expectUnauthorized(await request("PATCH", `${app.api}/errors/1/`, { title: 5 }));
		expectUnauthorized(await request("GET", `${app.api}/errors/?page_size=0`));
		expect(await errorCount()).toBe(before);
	});

	it("with a token, judges the body as usual", async () => {
		const before = await errorCount();
		expectJsonError(
			await request("POST", `${app.api}/errors/`, { name: 5, category: "DATA" }, good),
			400,
			/^name: /
		);
		expectJsonError(await request("POST", `${app.api}/errors/`, "{", good), 400);
		expect(await errorCount()).toBe(before);
		const created = await request(
			"POST",
			`${app.api}/errors/`,
			{ name: "with-token", category: "DATA" },
			good
		);
		expect(created.status).toBe(201);
		expect(created.headers.get("location")).toBe(`${app.api}/errors/${created.body.id}/`);
		expect(await errorCount()).toBe(before + 1);
	});
});
