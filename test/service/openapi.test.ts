import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";
import { readmeShellBlocks } from "../helpers/readme";
import { ALIASES } from "../../services/api.service";

/**
 * The OpenAPI document over real HTTP: generated from the routes and params schemas the gateway
 * serves and checks, it holds every route, its schemas are JSON Schema 2020-12, every request the
 * README shows validates against it (and a typo does not), and its page is served locally.
 */

let tdb: TestDatabase;
let app: TestApi;
let doc: any;

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api"]);
	const reply = await request("GET", `${app.api}/openapi.json`);
	expect(reply.status).toBe(200);
	doc = reply.body;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
const queryAjv = new Ajv2020({ strict: false, coerceTypes: "array" });

/** A parameter's schema as the property `v` of an object (ajv coerces no root value). */
const wrapped = (schema: unknown) => ({ type: "object", properties: { v: schema } });

/** `jobs/:id` (an alias's path) as the document's `/jobs/{id}/`. */
const documented = (path: string) =>
	`/${path.replace(/:(\w+)/g, "{$1}").replace(/\/+$/, "")}/`.replace(/^\/\//, "/");

/** The document's operation for a request path, and its path parameters. */
function operationFor(method: string, urlPath: string) {
	const path = `${urlPath.replace(/\/+$/, "")}/`;
	for (const [template, ops] of Object.entries<any>(doc.paths)) {
		const names: string[] = [];
		const pattern = template.replace(/\{(\w+)\}/g, (_m, name) => {
			names.push(name);
			return "([^/]+)";
		});
		const match = new RegExp(`^${pattern}$`).exec(path);
		if (match && ops[method.toLowerCase()]) return { op: ops[method.toLowerCase()], template };
	}
	return null;
}

/** The problems of a request against its operation: body and query parameters. */
function problems(method: string, url: URL, body: unknown): string[] {
	const found = operationFor(method, url.pathname.replace(/^\/api/, ""));
	if (!found) return [`${method} ${url.pathname} is not in the document`];
	const out: string[] = [];
	const schema = found.op.requestBody?.content?.["application/json"]?.schema;
	if (body !== undefined) {
		if (!schema) out.push(`${method} ${found.template} takes no body`);
		else if (!ajv.validate(schema, body)) out.push(ajv.errorsText(ajv.errors));
	}
	for (const [name, value] of url.searchParams) {
		const param = found.op.parameters.find((p: any) => p.in === "query" && p.name === name);
		if (!param) out.push(`query ${name} is not a parameter of ${found.template}`);
		// a query's values are text: read as the gateway's query validator reads them
		else if (!queryAjv.validate(wrapped(param.schema), { v: value }))
			out.push(queryAjv.errorsText(queryAjv.errors));
	}
	return out;
}

/** The curl commands of the README: method, URL and JSON body. */
function readmeRequests(): { method: string; url: URL; body?: unknown; text: string }[] {
	const requests = [];
	for (const block of readmeShellBlocks()) {
		for (const command of shellCommands(block)) {
			const words = shellWords(command);
			if (words[0] !== "curl") continue;
			const url = words.find(w => w.startsWith("http://127.0.0.1:8000/api/"));
			if (!url) continue;
			const x = words.indexOf("-X");
			const d = words.indexOf("-d");
			requests.push({
				method: x >= 0 ? words[x + 1] : "GET",
				url: new URL(url),
				body: d >= 0 ? JSON.parse(words[d + 1]) : undefined,
				text: command
			});
		}
	}
	return requests;
}

/** A block's commands: lines joined where a quote is open or a line ends with `\`. */
function shellCommands(block: string): string[] {
	const commands: string[] = [];
	let current = "";
	let quote: string | null = null;
	for (const line of block.split("\n")) {
		current += (current ? "\n" : "") + line;
		for (let i = 0; i < line.length; i++) {
			const c = line[i];
			if (quote) {
				if (c === quote) quote = null;
				else if (c === "\\" && quote === '"') i++;
			} else if (c === "'" || c === '"') quote = c;
			else if (c === "\\") i++;
			else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]))) break;
		}
		if (quote || current.endsWith("\\")) continue;
		commands.push(current.trim());
		current = "";
	}
	return commands.filter(c => c !== "");
}

/** The words of a command as the shell splits them (quotes removed, comments dropped). */
function shellWords(command: string): string[] {
	const words: string[] = [];
	let word: string | null = null;
	for (let i = 0; i < command.length; i++) {
		const c = command[i];
		if (c === "'") {
			const end = command.indexOf("'", i + 1);
			word = (word ?? "") + command.slice(i + 1, end);
			i = end;
		} else if (c === '"') {
			let j = i + 1;
			let text = "";
			for (; command[j] !== '"'; j++) text += command[j] === "\\" ? command[++j] : command[j];
			word = (word ?? "") + text;
			i = j;
		} else if (c === "\\" && command[i + 1] === "\n") i++;
		else if (/\s/.test(c)) {
			if (word !== null) words.push(word);
			word = null;
		} else if (c === "#" && word === null) break;
		else word = (word ?? "") + c;
	}
	if (word !== null) words.push(word);
	return words;
}

describe("GET /api/openapi.json", () => {
	it("is an OpenAPI 3.1 document whose schemas are JSON Schema 2020-12", () => {
		expect(doc.openapi).toBe("3.1.0");
		expect(doc.servers).toEqual([{ url: "/api" }]);
		for (const [path, ops] of Object.entries<any>(doc.paths))
			for (const [method, op] of Object.entries<any>(ops)) {
				const schemas = [
					...op.parameters.map((p: any) => p.schema),
					op.requestBody?.content["application/json"].schema
				].filter(Boolean);
				for (const schema of schemas)
					expect([method, path, ajv.validateSchema(schema)]).toEqual([
						method,
						path,
						true
					]);
			}
	});

	it("holds every route the gateway serves, and nothing else", () => {
		const routes = Object.keys(ALIASES)
			.map(key => {
				const [method, path] = key.split(" ");
				return `${method.toLowerCase()} ${documented(path)}`;
			})
			.sort();
		const inDoc = Object.entries<any>(doc.paths)
			.flatMap(([path, ops]) => Object.keys(ops).map(method => `${method} ${path}`))
			.sort();
		expect(inDoc).toEqual(routes);
		expect(routes.length).toBeGreaterThan(50);
	});

	it("gives a route's path, query and body parameters from its params schema", () => {
		const job = doc.paths["/jobs/{id}/"].get;
		expect(job.parameters).toEqual([
			{ name: "id", in: "path", required: true, schema: { type: "integer", minimum: 1 } }
		]);
		const list = doc.paths["/jobs/"].get.parameters.map((p: any) => p.name);
		expect(list).toEqual(expect.arrayContaining(["page", "page_size", "order", "status"]));
		const newJob = doc.paths["/queue/new-job/"].post.requestBody.content["application/json"];
		expect(newJob.schema.required).toEqual(["job_type_id"]);
		expect(newJob.schema.additionalProperties).toBe(false);
		// Scale's parse_int: a string of digits too
		expect(ajv.validate(newJob.schema, { job_type_id: "2" })).toBe(true);
	});

	it("validates every request the README shows, and refuses a typo in one", () => {
		const requests = readmeRequests();
		expect(requests.length).toBeGreaterThan(15);
		expect(requests.filter(r => r.body !== undefined).length).toBeGreaterThan(8);
		for (const r of requests)
			expect([r.text, problems(r.method, r.url, r.body)]).toEqual([r.text, []]);
		const jobType = requests.find(r => r.url.pathname === "/api/job-types/")!;
		const typo = { ...(jobType.body as object), cpus_requried: 4 };
		expect(problems("POST", jobType.url, typo)).toEqual([
			expect.stringContaining("must NOT have additional properties")
		]);
	});
});

describe("GET /api/docs/", () => {
	it("serves the documentation page and its files from this machine", async () => {
		const page = await request("GET", `${app.api}/docs/`);
		expect(page.status).toBe(200);
		expect(page.headers.get("content-type")).toMatch(/^text\/html/);
		for (const src of page.text.match(/(?<=(src|href)=")[^"]+/g)!) {
			expect(src).not.toMatch(/^(https?:)?\/\//);
			const asset = await request("GET", `${app.api}/docs/${src}`);
			expect([src, asset.status]).toEqual([src, 200]);
		}
		const script = await request("GET", `${app.api}/docs/docs.js`);
		expect(script.text).toContain('url: "../openapi.json"');
		expect((await request("GET", `${app.api}/docs/package.json`)).status).toBe(404);
		expect((await request("GET", `${app.api}/docs/../package.json`)).status).toBe(404);
	});
});
