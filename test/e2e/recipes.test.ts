import fs from "fs";
import os from "os";
import path from "path";
import type { ServiceBroker } from "moleculer";
import { sleep, startE2e, until, type E2e } from "../helpers/e2e";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { job as script, makeJobsExecutable } from "../fixtures/agent";

/**
 * Recipes end to end through the REST API of `npm start`'s process layout (control plane and a
 * node agent in one broker, real PostgreSQL, real processes): A, then B and C in parallel on A's
 * output, C also taking a recipe input.
 */

const SERVICES = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"recipe-types",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"products",
	"files",
	"recipes",
	"triggers",
	"nodes",
	"scheduler",
	"node-agent"
];

let tdb: TestDatabase;
let broker: ServiceBroker;
let root: string;
let wsDir: string;
let workspaceId: number;
let recipeTypeId: number;
let sourceId: number;
let flag: string;

let e2e: E2e;
const call = (method: string, path: string, body?: unknown) => e2e.call(method, path, body);
const ok = (method: string, path: string, body?: unknown, status = 200) =>
	e2e.ok(method, path, body, status);

async function jobType(name: string, args: string, inputs: Record<string, unknown>[]) {
	return ok(
		"POST",
		"/job-types/",
		{
			name,
			version: "1.0",
			cpus_required: 0.25,
			mem_required: 16,
			disk_out_const_required: 0,
			max_tries: 1,
			interface: {
				version: "1.0",
				command: script("recipe-step.sh"),
				command_arguments: args,
				input_data: inputs,
				output_data: [{ name: "out", type: "file", media_type: "text/plain" }]
			}
		},
		201
	);
}

const DEFINITION = {
	version: "1.0",
	input_data: [
		{ name: "image", type: "file", media_types: ["text/plain"] },
		{ name: "label", type: "property" },
		{ name: "flag", type: "property", required: false }
	],
	jobs: [
		{
			name: "A",
			job_type: { name: "ra", version: "1.0" },
			recipe_inputs: [
				{ recipe_input: "image", job_input: "in" },
				{ recipe_input: "flag", job_input: "flag" }
			]
		},
		{
			name: "B",
			job_type: { name: "rb", version: "1.0" },
			dependencies: [{ name: "A", connections: [{ output: "out", input: "in" }] }]
		},
		{
			name: "C",
			job_type: { name: "rc", version: "1.0" },
			recipe_inputs: [{ recipe_input: "label", job_input: "label" }],
			dependencies: [{ name: "A", connections: [{ output: "out", input: "in" }] }]
		}
	]
};

/** A source file in the workspace, as an ingest stores one; answers its id. */
async function sourceFile(name: string, content: string): Promise<number> {
	fs.mkdirSync(path.join(wsDir, "in"), { recursive: true });
	fs.writeFileSync(path.join(wsDir, "in", name), content);
	const [[row]] = (await tdb.db.query(
		`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, file_size,
			uuid)
		 VALUES ('SOURCE', $1, $2::text, $3, 'text/plain', $4, md5($2::text)) RETURNING id`,
		{ bind: [workspaceId, name, `in/${name}`, Buffer.byteLength(content)] }
	)) as any;
	return row.id;
}

function newRecipe(extra: Record<string, unknown>[] = [], file = sourceId) {
	return call("POST", "/queue/new-recipe/", {
		recipe_type_id: recipeTypeId,
		recipe_data: {
			version: "1.0",
			input_data: [
				{ name: "image", file_id: file },
				{ name: "label", value: "see" },
				...extra
			],
			workspace_id: workspaceId
		}
	});
}

/** The recipe's jobs by name, as its details show them. */
async function jobsOf(recipeId: number): Promise<Record<string, any>> {
	const details = await ok("GET", `/recipes/${recipeId}/`);
	return Object.fromEntries(details.jobs.map((j: any) => [j.job_name, j.job]));
}

function statusesOf(recipeId: number, want: Record<string, string>) {
	return until(
		`recipe ${recipeId}'s jobs to be ${JSON.stringify(want)}`,
		async () => {
			const jobs = await jobsOf(recipeId);
			return Object.fromEntries(Object.entries(jobs).map(([n, j]) => [n, j.status]));
		},
		s => Object.entries(want).every(([n, st]) => s[n] === st)
	);
}

/** The text of the product a job made for its output "out". */
async function productText(jobId: number): Promise<string> {
	const job = await ok("GET", `/jobs/${jobId}/`);
	const product = job.outputs.find((o: any) => o.name === "out").value;
	return (await call("GET", `/files/${product.id}/download/`)).text;
}

beforeAll(async () => {
	makeJobsExecutable();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-recipes-"));
	fs.chmodSync(root, 0o755);
	wsDir = path.join(root, "ws");
	fs.mkdirSync(wsDir);
	flag = path.join(root, "flag");
	tdb = await createTestDatabase();
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "recipes");
	broker = e2e.broker;
	await until(
		"the agent's node",
		() => ok("GET", "/nodes/"),
		list => list.count === 1
	);
	workspaceId = (
		await ok(
			"POST",
			"/workspaces/",
			{
				name: "w",
				json_config: { version: "1.0", broker: { type: "host", host_path: wsDir } }
			},
			201
		)
	).id;
	await jobType("ra", "${job_output_dir} ${in} A ${flag}", [
		{ name: "in", type: "file" },
		{ name: "flag", type: "property", required: false }
	]);
	await jobType("rb", "${job_output_dir} ${in} B", [{ name: "in", type: "file" }]);
	await jobType("rc", '${job_output_dir} ${in} "${label}"', [
		{ name: "in", type: "file" },
		{ name: "label", type: "property" }
	]);
	recipeTypeId = (
		await ok(
			"POST",
			"/recipe-types/",
			{ name: "abc", version: "1.0", definition: DEFINITION },
			201
		)
	).id;
	sourceId = await sourceFile("source.txt", "source\n");
}, 60000);

afterAll(async () => {
	await broker?.stop().catch(() => undefined);
	await tdb?.drop().catch(() => undefined);
	if (root) fs.rmSync(root, { recursive: true, force: true });
}, 30000);

describe("POST /queue/new-recipe/", () => {
	it("refuses bad input, naming the field, and writes nothing", async () => {
		const cases: [unknown, RegExp][] = [
			[{ recipe_data: {} }, /recipe_type_id/],
			[{ recipe_type_id: 9999, recipe_data: {} }, /^recipe_type_id: no recipe type/],
			[{ recipe_type_id: recipeTypeId, recipe_data: { input_data: [] } }, /^recipe_data/],
			[
				{
					recipe_type_id: recipeTypeId,
					recipe_data: {
						input_data: [
							{ name: "image", file_id: 424242 },
							{ name: "label", value: "x" }
						],
						workspace_id: workspaceId
					}
				},
				/^recipe_data\.input_data\[0\]\.file_id: file 424242 does not exist/
			],
			[
				{
					recipe_type_id: recipeTypeId,
					recipe_data: {
						input_data: [
							{ name: "image", file_id: sourceId },
							{ name: "label", value: "x" }
						],
						workspace_id: 777
					}
				},
				/^recipe_data\.workspace_id: workspace 777 does not exist/
			]
		];
		for (const [body, detail] of cases) {
			const res = await call("POST", "/queue/new-recipe/", body);
			expect(res.status).toBe(400);
			expect(res.body.detail).toMatch(detail);
		}
		expect((await ok("GET", "/recipes/")).count).toBe(0);
		expect((await ok("GET", "/jobs/")).count).toBe(0);
	});
});

describe("a recipe of three jobs", () => {
	it("runs A, then B and C on A's output, and is completed", async () => {
		const res = await newRecipe();
		expect(res.status).toBe(201);
		expect(res.headers.get("location")).toMatch(new RegExp(`/recipes/${res.body.id}/$`));
		const recipeId = res.body.id;
		const first = Object.fromEntries(res.body.jobs.map((j: any) => [j.job_name, j.job.status]));
		expect(first.A).toMatch(/^(QUEUED|RUNNING|COMPLETED)$/);
		expect(first.B).toBe("PENDING");
		expect(first.C).toBe("PENDING");

		await statusesOf(recipeId, { A: "COMPLETED", B: "COMPLETED", C: "COMPLETED" });
		const details = await until(
			"the recipe to be completed",
			() => ok("GET", `/recipes/${recipeId}/`),
			r => r.completed !== null
		);
		const jobs = await jobsOf(recipeId);
		const a = await ok("GET", `/jobs/${jobs.A.id}/`);
		const b = await ok("GET", `/jobs/${jobs.B.id}/`);
		const c = await ok("GET", `/jobs/${jobs.C.id}/`);
		// queued with the disk their input files need: a file of a few bytes takes 1 MiB, as
		// for A (queued as the recipe is created) so for B (queued when A completed)
		expect([a.disk_in_required, a.num_exes]).toEqual([1, 1]);
		expect([b.disk_in_required, b.num_exes]).toEqual([1, 1]);
		// B and C started after A ended
		expect(Date.parse(b.started)).toBeGreaterThanOrEqual(Date.parse(a.ended));
		expect(Date.parse(c.started)).toBeGreaterThanOrEqual(Date.parse(a.ended));
		// what each was given: A the recipe's file, B and C A's product, C the recipe's label
		expect(a.inputs.find((i: any) => i.name === "in").value.id).toBe(sourceId);
		const aProduct = a.outputs[0].value.id;
		expect(b.inputs.find((i: any) => i.name === "in").value.id).toBe(aProduct);
		expect(c.inputs.find((i: any) => i.name === "in").value.id).toBe(aProduct);
		expect(c.inputs.find((i: any) => i.name === "label").value).toBe("see");
		expect(await productText(a.id)).toBe("source\nA\n");
		expect(await productText(b.id)).toBe("source\nA\nB\n");
		expect(await productText(c.id)).toBe("source\nA\nsee\n");
		expect(details.input_files.map((f: any) => f.id)).toEqual([sourceId]);
		// a recipe job's details name its recipe
		expect(b.recipes.map((r: any) => r.id)).toEqual([recipeId]);
		// B's product goes back to A's product and to the recipe's source file
		const bProduct = await ok("GET", `/products/${b.outputs[0].value.id}/`);
		expect(bProduct.ancestors.map((f: any) => f.id)).toEqual([aProduct]);
		expect(bProduct.sources.map((f: any) => f.id)).toEqual([sourceId]);
	});

	it("blocks B and C when A fails, and runs them once A is requeued and completes", async () => {
		fs.rmSync(flag, { force: true });
		const recipeId = (await newRecipe([{ name: "flag", value: flag }])).body.id;
		const jobs = await statusesOf(recipeId, { A: "FAILED", B: "BLOCKED", C: "BLOCKED" });
		expect(jobs).toEqual({ A: "FAILED", B: "BLOCKED", C: "BLOCKED" });
		expect((await ok("GET", `/recipes/${recipeId}/`)).completed).toBeNull();
		fs.writeFileSync(flag, "");
		const aId = (await jobsOf(recipeId)).A.id;
		await ok("POST", "/queue/requeue-jobs/", { job_ids: [aId] });
		await statusesOf(recipeId, { A: "COMPLETED", B: "COMPLETED", C: "COMPLETED" });
		await until(
			"the recipe to be completed",
			() => ok("GET", `/recipes/${recipeId}/`),
			r => r.completed !== null
		);
	});

	it("goes on without a canceled B: C runs, the recipe is not completed", async () => {
		fs.rmSync(flag, { force: true });
		// A waits for the flag (fails without it): B is canceled while it waits
		const recipeId = (await newRecipe([{ name: "flag", value: flag }])).body.id;
		const bId = (await jobsOf(recipeId)).B.id;
		await ok("PATCH", `/jobs/${bId}/`, { status: "CANCELED" });
		await statusesOf(recipeId, { A: "FAILED", B: "CANCELED", C: "BLOCKED" });
		fs.writeFileSync(flag, "");
		await ok("POST", "/queue/requeue-jobs/", { job_ids: [(await jobsOf(recipeId)).A.id] });
		await statusesOf(recipeId, { A: "COMPLETED", B: "CANCELED", C: "COMPLETED" });
		await sleep(300);
		expect((await ok("GET", `/recipes/${recipeId}/`)).completed).toBeNull();
	});

	it("keeps its recipe type revision when the type is edited after it started", async () => {
		fs.rmSync(flag, { force: true });
		const res = await newRecipe([{ name: "flag", value: flag }]);
		const recipeId = res.body.id;
		const rev = res.body.recipe_type_rev.id;
		await statusesOf(recipeId, { A: "FAILED" });
		// the new revision drops C
		await ok("PATCH", `/recipe-types/${recipeTypeId}/`, {
			definition: { ...DEFINITION, jobs: DEFINITION.jobs.slice(0, 2) }
		});
		fs.writeFileSync(flag, "");
		await ok("POST", "/queue/requeue-jobs/", { job_ids: [(await jobsOf(recipeId)).A.id] });
		await statusesOf(recipeId, { A: "COMPLETED", B: "COMPLETED", C: "COMPLETED" });
		expect((await ok("GET", `/recipes/${recipeId}/`)).recipe_type_rev.id).toBe(rev);
		// a recipe made now has two jobs
		const next = (await newRecipe()).body;
		expect(next.jobs.map((j: any) => j.job_name).sort()).toEqual(["A", "B"]);
		expect(next.recipe_type_rev.id).not.toBe(rev);
		await ok("PATCH", `/recipe-types/${recipeTypeId}/`, { definition: DEFINITION });
	});
});

describe("a recipe started by an ingest rule", () => {
	it("binds the ingested file to the rule's recipe input", async () => {
		const type = await ok(
			"POST",
			"/recipe-types/",
			{
				name: "on-ingest",
				version: "1.0",
				definition: {
					version: "1.0",
					input_data: [{ name: "image", type: "file" }],
					jobs: [
						{
							name: "only",
							job_type: { name: "rb", version: "1.0" },
							recipe_inputs: [{ recipe_input: "image", job_input: "in" }]
						}
					]
				},
				trigger_rule: {
					type: "INGEST",
					configuration: {
						condition: { media_type: "text/plain" },
						data: { input_data_name: "image", workspace_name: "w" }
					}
				}
			},
			201
		);
		const fileId = await sourceFile("ingested.txt", "ingested\n");
		await tdb.db.query(
			`INSERT INTO trigger_event (type, description)
			 VALUES ('INGEST', jsonb_build_object('version', '1.0', 'file_id', $1::int,
				'file_name', 'ingested.txt'))`,
			{ bind: [fileId] }
		);
		await broker.call("triggers.process");
		const list = await until(
			"the rule's recipe",
			() => ok("GET", `/recipes/?type_id=${type.id}`),
			l => l.count === 1
		);
		const recipeId = list.results[0].id;
		const details = await ok("GET", `/recipes/${recipeId}/`);
		expect(details.data.input_data).toEqual([{ name: "image", file_id: fileId }]);
		expect(details.event).toMatchObject({ type: "INGEST" });
		await statusesOf(recipeId, { only: "COMPLETED" });
		expect(await productText((await jobsOf(recipeId)).only.id)).toBe("ingested\nB\n");
	});
});
