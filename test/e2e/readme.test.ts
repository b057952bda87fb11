import { execFile } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { promisify } from "util";
import { startE2e, until, type E2e } from "../helpers/e2e";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { readmeBlocks } from "../helpers/readme";

/**
 * The README's examples, read from README.md and run as written, in order, by bash against a
 * fresh service (the layout `npm start` runs: the whole control plane and a node agent, real
 * PostgreSQL, real job processes). Two things differ from a reader's terminal, both rewritten in
 * the text: the API's address (a free port) and `/tmp/` (a directory of the test's). `curl` is
 * given `-f`, so an error answer fails the block, and like `cat` and `ls` it is tried again for a
 * while, as a reader waits for a job to end before reading what it wrote.
 */

const run = promisify(execFile);

/** The sections whose first `sh` block runs, in the README's order. */
const SECTIONS = [
	"## Try it",
	"### Run a job",
	"### Ingest files with a strike",
	"### Run a recipe"
];

/** Waits for what a reader would wait for; `curl -f` fails on an error answer. */
const PRELUDE = `set -eo pipefail
again() { for i in $(seq 1 150); do "$@" 2>/dev/null && return 0; sleep 0.2; done; "$@"; }
curl() { again command curl -f "$@"; }
cat() { if [ -t 0 ] || [ $# -gt 0 ]; then again command cat "$@"; else command cat "$@"; fi; }
# a glob is expanded again at each try: what it names may not be there yet
ls() { again eval "command ls $*"; }
`;

let tdb: TestDatabase;
let e2e: E2e;
let tmp: string;

beforeAll(async () => {
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), "readme-"));
	// the jobs run as the execution's own uid: the scripts in here must be theirs to read
	fs.chmodSync(tmp, 0o755);
	tdb = await createTestDatabase();
	e2e = await startE2e(tdb.url, ["all"], path.join(tmp, "agent"), "readme");
}, 120000);

afterAll(async () => {
	await e2e?.stop();
	await tdb?.drop();
	fs.rmSync(tmp, { recursive: true, force: true });
});

async function runBlock(block: string): Promise<string> {
	const text = block
		.replaceAll("http://127.0.0.1:8000/api", e2e.api)
		.replaceAll("/tmp/", `${tmp}/`);
	const { stdout } = await run("bash", ["-c", PRELUDE + text], {
		cwd: tmp,
		timeout: 120000,
		maxBuffer: 16 * 1024 * 1024
	});
	return stdout;
}

describe("the README's examples", () => {
	const blocks = readmeBlocks(SECTIONS);

	it("Try it: the status, the errors, a new error and the raw workspace", async () => {
		const out = await runBlock(blocks[0]);
		expect(out).toMatch(/HTTP\/1\.1 201/);
		const raw = await e2e.ok("GET", "/workspaces/1/");
		expect(raw.name).toBe("raw");
	}, 120000);

	it("Run a job: the job completes and its product is in the out workspace", async () => {
		const out = await runBlock(blocks[1]);
		// the cat of the product, read once the job had written it
		expect(out).toContain("hello world\n");
		const job = await until(
			"job 1 to complete",
			() => e2e.ok("GET", "/jobs/1/"),
			j => j.status === "COMPLETED"
		);
		expect(job.outputs[0].value.workspace.name).toBe("out");
		expect(fs.readFileSync(path.join(tmp, "ws-out/hello/1.0/1/hello.txt"), "utf8")).toBe(
			"hello world\n"
		);
	}, 120000);

	it("Ingest files with a strike: a.txt ingested into raw, and the rule's job", async () => {
		const out = await runBlock(blocks[2]);
		expect(out).toMatch(/a\.txt/);
		await until(
			"a.txt to be INGESTED",
			() => e2e.ok("GET", "/ingests/?file_name=a.txt"),
			list => list.results.length === 1 && list.results[0].status === "INGESTED"
		);
		await until(
			"the count job to complete",
			() => e2e.ok("GET", "/jobs/?job_type_name=count"),
			list => list.results.length === 1 && list.results[0].status === "COMPLETED"
		);
	}, 120000);

	it("Run a recipe: both jobs run, the second after the first", async () => {
		await runBlock(blocks[3]);
		const recipe = await until(
			"recipe 1 to complete",
			() => e2e.ok("GET", "/recipes/1/"),
			r => r.completed !== null
		);
		const jobs = recipe.jobs.map((j: any) => [j.job_name, j.job.status]);
		expect(jobs.sort()).toEqual([
			["first", "COMPLETED"],
			["second", "COMPLETED"]
		]);
	}, 120000);
});
