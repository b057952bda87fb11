import fs from "fs";
import os from "os";
import path from "path";
import { ALIASES } from "../../services/api.service";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";

/**
 * Thousands of malformed requests to every route of the gateway (derived from its alias table,
 * so a new route is fuzzed too): wrong methods, junk path parameters and query strings, bodies
 * that are not JSON, not objects, too deep, too large, of the wrong types or with unknown
 * fields. No answer may be a 5xx, and nothing may be written: every table's row count and the
 * workspace's files are the same afterwards. FUZZ_SEED and FUZZ_COUNT change the run.
 */
const SEED = Number(process.env.FUZZ_SEED || Date.now() % 100000);
const COUNT = Number(process.env.FUZZ_COUNT || 3000);
const CONCURRENCY = 8;

// every service but the agent: with no node, what is queued stays queued and nothing runs
const SERVICES = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"job-type-reports",
	"recipe-types",
	"recipes",
	"configuration",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"products",
	"ingest",
	"files",
	"nodes",
	"scheduler",
	"metrics"
];

/** mulberry32: a small seeded PRNG, so a failing run can be repeated with its seed. */
function prng(seed: number): () => number {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

const PARAM_JUNK = [
	"0",
	"-1",
	"abc",
	"99999999999999999999",
	"1.5",
	"1e3",
	"%00",
	"..",
	"%2e%2e",
	"%2F..%2Fetc%2Fpasswd",
	"%F0%9F%98%80",
	"%ZZ",
	"null",
	"[]",
	"%20",
	"x".repeat(3000)
];
const QUERY_KEYS = [
	"page",
	"page_size",
	"started",
	"ended",
	"order",
	"status",
	"job_type_id",
	"job_type_name",
	"job_type_category",
	"error_category",
	"is_operational",
	"is_parsed",
	"file_name",
	"strike_id",
	"choice_id",
	"column",
	"group",
	"use_ingest_time",
	"id",
	"name",
	"category",
	"stream",
	"include_superseded",
	"__proto__",
	"constructor"
];
const VALUE_JUNK = [
	"",
	"-5",
	"0",
	"abc",
	"99999999999999",
	"P-1D",
	"PT",
	"2026-13-45T99:00:00Z",
	"1970-01-01",
	"-last_modified__x__y",
	"job_type__name__id__x",
	"' OR 1=1 --",
	"%00",
	"%",
	"true",
	"null",
	"[1,2]",
	"{}",
	"😀",
	"y".repeat(5000)
];
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

function pick<T>(rnd: () => number, list: readonly T[]): T {
	return list[Math.floor(rnd() * list.length)];
}

/** A value of a type a field does not take, or a hostile one. */
function junkValue(rnd: () => number, depth = 0): unknown {
	const kinds = [
		() => pick(rnd, VALUE_JUNK),
		() => -Math.floor(rnd() * 1e12),
		() => rnd() * 1e308,
		() => null,
		() => true,
		() => [junkValue(rnd, depth + 1)],
		() => (depth < 3 ? junkObject(rnd, depth + 1) : {}),
		() => "z".repeat(Math.floor(rnd() * 100000))
	];
	return pick(rnd, kinds)();
}

function junkObject(rnd: () => number, depth = 0): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	const n = 1 + Math.floor(rnd() * 6);
	const fields = [
		"name",
		"version",
		"title",
		"interface",
		"definition",
		"job_type_id",
		"recipe_type_id",
		"job_data",
		"recipe_data",
		"configuration",
		"json_config",
		"status",
		"is_paused",
		"is_active",
		"hostname",
		"port",
		"job_ids",
		"priority",
		"max_tries",
		"cpus_required",
		"trigger_rule",
		"error_mapping",
		"import",
		"x_unknown",
		"__proto__"
	];
	for (let i = 0; i < n; i++) out[pick(rnd, fields)] = junkValue(rnd, depth);
	return out;
}

/** JSON nested `n` levels deep, as text (JSON.stringify would run out of stack). */
function deep(n: number): string {
	return `${'{"a":'.repeat(n)}{}${"}".repeat(n)}`;
}

/** A request body that no route takes, as text (and its content type). */
function junkBody(rnd: () => number): { text: string; type: string } {
	const kinds: (() => { text: string; type: string })[] = [
		() => ({ text: "{not json", type: "application/json" }),
		() => ({ text: JSON.stringify(junkObject(rnd)), type: "application/json" }),
		() => ({ text: JSON.stringify([junkObject(rnd)]), type: "application/json" }),
		() => ({ text: String(Math.floor(rnd() * 1000)), type: "application/json" }),
		() => ({ text: "null", type: "application/json" }),
		() => ({ text: deep(5000), type: "application/json" }),
		() => ({ text: JSON.stringify({ name: "q".repeat(1_000_000) }), type: "application/json" }),
		() => ({ text: "\u0000\uffff\ud800", type: "application/json; charset=latin1" }),
		() => ({ text: "name=x&version=1", type: "application/x-www-form-urlencoded" }),
		() => ({
			text: "--b\r\nContent-Disposition: form-data\r\n\r\nx",
			type: "multipart/form-data"
		}),
		() => ({ text: JSON.stringify(junkObject(rnd)), type: "text/plain" })
	];
	return pick(rnd, kinds)();
}

function junkQuery(rnd: () => number): string {
	const n = Math.floor(rnd() * 5);
	const parts: string[] = [];
	for (let i = 0; i < n; i++)
		parts.push(`${pick(rnd, QUERY_KEYS)}=${encodeURIComponent(pick(rnd, VALUE_JUNK))}`);
	if (rnd() < 0.1) parts.push("%E0%A4%A=x");
	return parts.length ? `?${parts.join("&")}` : "";
}

interface Case {
	method: string;
	path: string;
	body?: { text: string; type: string };
}

function makeCase(rnd: () => number, routes: [string, string][]): Case {
	const [method, route] = pick(rnd, routes);
	const p = route.replace(/:(\w+)/g, () => pick(rnd, PARAM_JUNK));
	const r = rnd();
	if (r < 0.1) return { method: pick(rnd, METHODS), path: `${p}/${pick(rnd, PARAM_JUNK)}` };
	if (r < 0.2)
		return {
			method: pick(
				rnd,
				METHODS.filter(m => m !== method)
			),
			path: p
		};
	const query = junkQuery(rnd);
	if (method === "GET") return { method, path: `${p}${query}` };
	return { method, path: `${p}${query}`, body: junkBody(rnd) };
}

describe("fuzzing every route", () => {
	let tdb: TestDatabase;
	let svc: TestApi;
	let root: string;

	async function rowCounts(): Promise<Record<string, number>> {
		const [tables] = (await tdb.db.query(
			`SELECT relname AS table_name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY relname`
		)) as [{ table_name: string }[], unknown];
		const counts: Record<string, number> = {};
		for (const { table_name } of tables) {
			const [[row]] = (await tdb.db
				.query(`SELECT count(*)::int AS n FROM "${table_name}"`)
				.catch(err => {
					throw new Error(`${table_name}: ${(err as any).parent?.message ?? err}`);
				})) as any;
			counts[table_name] = row.n;
		}
		return counts;
	}

	function files(dir: string): string[] {
		return fs
			.readdirSync(dir, { recursive: true, withFileTypes: true })
			.map(e => `${path.join(e.parentPath ?? (e as any).path, e.name)}`)
			.sort();
	}

	beforeAll(async () => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "fuzz-"));
		fs.chmodSync(root, 0o755);
		fs.mkdirSync(path.join(root, "ws"));
		fs.mkdirSync(path.join(root, "drop"));
		fs.writeFileSync(path.join(root, "ws", "kept.txt"), "kept\n");
		tdb = await createTestDatabase();
		svc = await startServices(tdb.url, SERVICES, { LOG_LEVEL: "fatal" });
		const ok = async (method: string, p: string, body: unknown) => {
			const res = await request(method, `${svc.api}${p}`, body);
			if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${res.text}`);
			return res.body;
		};
		const ws = await ok("POST", "/workspaces/", {
			name: "ws",
			title: "ws",
			json_config: { broker: { type: "host", host_path: path.join(root, "ws") } }
		});
		const type = await ok("POST", "/job-types/", {
			name: "fuzzed",
			version: "1.0",
			interface: {
				version: "1.0",
				command: "/bin/true",
				command_arguments: "",
				input_data: [],
				output_data: []
			}
		});
		await ok("POST", "/queue/new-job/", {
			job_type_id: type.id,
			job_data: { version: "1.0", input_data: [], output_data: [] }
		});
		await ok("POST", "/recipe-types/", {
			name: "fuzzed-recipe",
			version: "1.0",
			definition: {
				version: "1.0",
				input_data: [],
				jobs: [{ name: "a", job_type: { name: "fuzzed", version: "1.0" } }]
			}
		});
		await ok("POST", "/strike/create/", {
			name: "fuzzed-strike",
			configuration: {
				version: "1.0",
				mount: path.join(root, "drop"),
				transfer_suffix: "_tmp",
				files_to_ingest: [
					{ filename_regex: ".*", workspace_path: "in", workspace_name: ws.name }
				]
			}
		});
	}, 60000);

	afterAll(async () => {
		await svc?.stop();
		await tdb?.drop();
		if (root) fs.rmSync(root, { recursive: true, force: true });
	});

	it("answers no 5xx and writes nothing", async () => {
		const rnd = prng(SEED);
		const routes = Object.keys(ALIASES).map(k => {
			const [method, route] = k.split(" ");
			return [method, `/${route}/`] as [string, string];
		});
		const cases: Case[] = [];
		// every route at least a few times, then at random
		for (const [method, route] of routes)
			for (let i = 0; i < 5; i++) cases.push(makeCase(rnd, [[method, route]]));
		while (cases.length < COUNT) {
			if (rnd() < 0.05) {
				cases.push({
					method: pick(rnd, METHODS),
					path: `/${pick(rnd, PARAM_JUNK)}/${pick(rnd, PARAM_JUNK)}`
				});
			} else cases.push(makeCase(rnd, routes));
		}

		const before = await rowCounts();
		const filesBefore = files(root);
		const statuses = new Map<number, number>();
		const failures: string[] = [];
		const accepted: string[] = [];
		let next = 0;
		const worker = async () => {
			while (next < cases.length) {
				const c = cases[next++];
				let status: number;
				let text = "";
				try {
					const res = await fetch(`${svc.api}${c.path}`, {
						method: c.method,
						headers: c.body ? { "Content-Type": c.body.type } : {},
						body: c.body?.text,
						signal: AbortSignal.timeout(30000)
					});
					status = res.status;
					text = await res.text();
				} catch (err) {
					status = 599;
					text = (err as Error).message;
				}
				statuses.set(status, (statuses.get(status) ?? 0) + 1);
				const what = `${c.method} ${c.path.slice(0, 200)} ${c.body ? c.body.text.slice(0, 200) : ""} -> ${status} ${text.slice(0, 300)}`;
				if (status >= 500) failures.push(what);
				else if (status < 300 && !["GET", "HEAD", "OPTIONS"].includes(c.method))
					accepted.push(what);
			}
		};
		await Promise.all(Array.from({ length: CONCURRENCY }, worker));

		const histogram = [...statuses.entries()]
			.sort((a, b) => a[0] - b[0])
			.map(([s, n]) => `${s}: ${n}`)
			.join(", ");
		process.stdout.write(
			`fuzz: ${cases.length} requests over ${routes.length} routes (seed ${SEED}); statuses ${histogram}\n`
		);
		expect(failures.slice(0, 10)).toEqual([]);
		expect(await rowCounts()).toEqual(before);
		expect(files(root)).toEqual(filesBefore);
		// a write request that was accepted must have changed nothing (checked above); listed for
		// the record when there are any
		if (accepted.length > 0)
			process.stdout.write(
				`accepted writes (no change): ${accepted.slice(0, 5).join("\n")}\n`
			);
	}, 300000);
});
