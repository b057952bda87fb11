import fs from "fs";
import os from "os";
import path from "path";
import type { ServiceBroker } from "moleculer";
import { sleep, startE2e, until, type E2e } from "../helpers/e2e";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { job as script, makeJobsExecutable } from "../fixtures/agent";

/**
 * Strike ingest and triggers end to end, through the REST API of the process layout `npm start`
 * runs (the whole control plane and one node agent in one broker, real PostgreSQL, real files,
 * real job processes): a strike's job runs its monitor on the agent, files written into its
 * directory are ingested into a workspace, an ingest rule starts a job on each, that job's parse
 * results fire a parse rule.
 */

const SERVICES = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"ingest",
	"triggers",
	"nodes",
	"scheduler",
	"node-agent"
];

let tdb: TestDatabase;
let broker: ServiceBroker;
let root: string;
let strikeDir: string;
let rawDir: string;
let doomedDir: string;
let strikeId: number;

let e2e: E2e;
const call = (method: string, path: string, body?: unknown) => e2e.call(method, path, body);
const ok = (method: string, path: string, body?: unknown, status = 200) =>
	e2e.ok(method, path, body, status);

/** The ingests of a file name, newest first. */
async function ingestsOf(fileName: string): Promise<any[]> {
	return (await ok("GET", `/ingests/?file_name=${encodeURIComponent(fileName)}&order=-id`))
		.results;
}

function ingestStatus(fileName: string, status: string): Promise<any[]> {
	return until(
		`${fileName} to be ${status}`,
		() => ingestsOf(fileName),
		list => list.length > 0 && list[0].status === status
	);
}

/** Writes a file as a transfer would: under the suffix, then renamed. */
function deliver(name: string, content: string): void {
	const temp = path.join(strikeDir, `${name}_tmp`);
	fs.writeFileSync(temp, content);
	fs.renameSync(temp, path.join(strikeDir, name));
}

function today(): string {
	const d = new Date();
	return [
		String(d.getUTCFullYear()),
		String(d.getUTCMonth() + 1).padStart(2, "0"),
		String(d.getUTCDate()).padStart(2, "0")
	].join("/");
}

/** Scale's network mount, recorded; the operator mounted it on `strikeDir`, which is watched. */
const NFS_MOUNT = "nfs-host:/exports/incoming";

function strikeConfiguration(extraRules: Record<string, unknown>[] = []) {
	return {
		version: "1.0",
		mount: NFS_MOUNT,
		mount_on: strikeDir,
		transfer_suffix: "_tmp",
		files_to_ingest: [
			{ filename_regex: "^doomed", workspace_path: "in", workspace_name: "doomed" },
			{
				filename_regex: ".*\\.txt$",
				data_types: ["tagged"],
				workspace_path: "in",
				workspace_name: "raw"
			},
			...extraRules
		]
	};
}

async function workspace(name: string, dir: string): Promise<void> {
	fs.mkdirSync(dir, { recursive: true });
	await ok(
		"POST",
		"/workspaces/",
		{
			name,
			title: name,
			json_config: { version: "1.0", broker: { type: "host", host_path: dir } }
		},
		201
	);
}

async function jobType(
	name: string,
	command: string,
	args: string,
	outputs: Record<string, unknown>[],
	rule: Record<string, unknown>
): Promise<any> {
	return ok(
		"POST",
		"/job-types/",
		{
			name,
			version: "1.0",
			title: name,
			cpus_required: 0.25,
			mem_required: 16,
			disk_out_const_required: 0,
			timeout: 60,
			interface: {
				version: "1.0",
				command,
				command_arguments: args,
				input_data: [{ name: "input", type: "file" }],
				output_data: outputs
			},
			trigger_rule: rule
		},
		201
	);
}

/** The jobs of a job type, oldest first. */
async function query<T>(sql: string, bind: unknown[] = []): Promise<T[]> {
	return (await tdb.db.query(sql, { bind }))[0] as T[];
}

async function jobsOf(typeName: string): Promise<any[]> {
	return (await ok("GET", `/jobs/?job_type_name=${typeName}&order=id`)).results;
}

beforeAll(async () => {
	makeJobsExecutable();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-strike-"));
	fs.chmodSync(root, 0o755);
	strikeDir = path.join(root, "incoming");
	rawDir = path.join(root, "raw");
	doomedDir = path.join(root, "doomed");
	// the operator's mount
	fs.mkdirSync(strikeDir);
	tdb = await createTestDatabase();
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "strike");
	broker = e2e.broker;
	await until(
		"the agent's node to register",
		() => ok("GET", "/nodes/"),
		list => list.count === 1
	);
	await workspace("raw", rawDir);
	await workspace("products", path.join(root, "products"));
	await workspace("doomed", doomedDir);
}, 60000);

afterAll(async () => {
	await broker?.stop().catch(() => undefined);
	await tdb?.drop().catch(() => undefined);
	if (root) fs.rmSync(root, { recursive: true, force: true });
}, 30000);

describe("creating a strike", () => {
	it("refuses an unknown workspace, a bad configuration or a taken name, saving nothing", async () => {
		const unknown = strikeConfiguration([
			{ filename_regex: ".*", workspace_path: "x", workspace_name: "nowhere" }
		]);
		const res = await call("POST", "/strike/create/", { name: "s", configuration: unknown });
		expect(res.status).toBe(400);
		expect(res.body.detail).toMatch(
			/^configuration\.files_to_ingest\[2\]\.workspace_name: "nowhere" is not the name of a workspace/
		);
		const badRegex = await call("POST", "/strikes/validation/", {
			name: "s",
			configuration: {
				...strikeConfiguration(),
				files_to_ingest: [
					{ filename_regex: "(", workspace_path: "a", workspace_name: "raw" }
				]
			}
		});
		expect(badRegex.status).toBe(400);
		expect(badRegex.body.detail).toMatch(
			/^configuration\.files_to_ingest\[0\]\.filename_regex: /
		);
		const noName = await call("POST", "/strike/create/", {
			configuration: strikeConfiguration()
		});
		expect(noName.status).toBe(400);
		expect(noName.body.detail).toMatch(/name/);
		const unmounted: Record<string, unknown> = strikeConfiguration();
		delete unmounted.mount_on;
		const noMountOn = await call("POST", "/strike/create/", {
			name: "s",
			configuration: unmounted
		});
		expect(noMountOn.status).toBe(400);
		expect(noMountOn.body.detail).toMatch(
			/^configuration\.mount_on: is required when mount is the network export "nfs-host:\/exports\/incoming"/
		);
		expect(
			await ok("POST", "/strikes/validation/", {
				name: "s",
				configuration: strikeConfiguration()
			})
		).toEqual({
			warnings: []
		});
		expect((await ok("GET", "/strikes/")).count).toBe(0);
		expect((await ok("GET", "/jobs/?job_type_name=scale-strike")).count).toBe(0);
	});

	it("saves the strike and queues its process, which runs on the agent", async () => {
		// the rules first: the events of the first files must find them
		await jobType(
			"upper",
			script("write-output.sh"),
			"${input} ${job_output_dir}",
			[{ name: "result", type: "file", media_type: "text/plain" }],
			{
				type: "INGEST",
				configuration: {
					condition: { media_type: "text/plain", data_types: ["tagged"] },
					data: { input_data_name: "input", workspace_name: "products" }
				}
			}
		);
		await jobType(
			"after-parse",
			script("print-args.sh"),
			"${job_output_dir} ${input}",
			[{ name: "args", type: "file" }],
			{
				type: "PARSE",
				configuration: {
					condition: { data_types: ["parsed"] },
					data: { input_data_name: "input", workspace_name: "products" }
				}
			}
		);
		const created = await ok("POST", "/strike/create/", {
			name: "incoming",
			title: "Incoming",
			description: "the test's feed",
			configuration: strikeConfiguration()
		});
		expect(created).toEqual({ strike_id: expect.any(Number) });
		strikeId = created.strike_id;
		const again = await call("POST", "/strike/create/", {
			name: "incoming",
			configuration: strikeConfiguration()
		});
		expect(again.status).toBe(400);
		expect(again.body.detail).toMatch(/^name: a strike named "incoming" already exists/);

		const strike = await until(
			"the strike's job to run",
			() => ok("GET", `/strikes/${strikeId}/`),
			s => s.job?.status === "RUNNING"
		);
		expect(strike).toMatchObject({
			id: strikeId,
			name: "incoming",
			title: "Incoming",
			description: "the test's feed",
			job: { job_type: { name: "scale-strike", is_system: true, is_long_running: true } },
			configuration: { mount: NFS_MOUNT, mount_on: strikeDir, transfer_suffix: "_tmp" }
		});
		const list = await ok("GET", "/strikes/");
		expect(list.count).toBe(1);
		expect(list.results[0]).toMatchObject({ id: strikeId, job: { id: strike.job.id } });
		expect(list.results[0].configuration).toBeUndefined();
		expect((await call("GET", "/strikes/999999/")).status).toBe(404);
	});
});

describe("a file through the strike", () => {
	it("is TRANSFERRING while it has the suffix, then INGESTED into the workspace under YYYY/MM/DD", async () => {
		const temp = path.join(strikeDir, "a.txt_tmp");
		fs.writeFileSync(temp, "hello ");
		const [transferring] = await ingestStatus("a.txt", "TRANSFERRING");
		expect(transferring.bytes_transferred).toBe(6);
		expect(transferring.transfer_started).not.toBeNull();
		fs.appendFileSync(temp, "world\n");
		await until(
			"the transfer's progress",
			() => ingestsOf("a.txt"),
			list => list[0].bytes_transferred === 12
		);
		fs.renameSync(temp, path.join(strikeDir, "a.txt"));
		const [ingest] = await ingestStatus("a.txt", "INGESTED");
		expect(ingest).toMatchObject({
			file_name: "a.txt",
			strike: { id: strikeId, name: "incoming" },
			bytes_transferred: 12,
			file_size: 12,
			media_type: "text/plain",
			data_type: ["tagged"],
			source_file: { file_name: "a.txt", media_type: "text/plain", file_size: 12 }
		});
		for (const field of [
			"transfer_started",
			"transfer_ended",
			"ingest_started",
			"ingest_ended"
		])
			expect(ingest[field]).not.toBeNull();
		const stored = path.join(rawDir, "in", today(), "a.txt");
		expect(fs.readFileSync(stored, "utf8")).toBe("hello world\n");
		expect(fs.existsSync(path.join(strikeDir, "a.txt"))).toBe(false);

		const details = await ok("GET", `/ingests/${ingest.id}/`);
		expect(details).toMatchObject({
			file_path: `in/${today()}/a.txt`,
			transfer_path: path.join(strikeDir, "a.txt"),
			strike: {
				id: strikeId,
				job: { status: "RUNNING" },
				configuration: { mount: NFS_MOUNT, mount_on: strikeDir }
			}
		});
		expect((await ok("GET", "/ingests/a.txt/")).id).toBe(ingest.id);
	});

	it("starts the ingest rule's job, whose parse results start the parse rule's job", async () => {
		const [upper] = await until(
			"the ingest rule's job to complete",
			() => jobsOf("upper"),
			list => list.length > 0 && list[0].status === "COMPLETED"
		);
		const job = await ok("GET", `/jobs/${upper.id}/`);
		expect(job.event).toMatchObject({ type: "INGEST", rule: { type: "INGEST" } });
		expect(job.inputs[0].value).toMatchObject({ file_name: "a.txt" });
		const source = await until(
			"the source file to be parsed",
			() => ok("GET", "/sources/a.txt/"),
			s => s.is_parsed === true
		);
		expect(source.data_type).toEqual(["tagged", "parsed"]);
		const [after] = await until(
			"the parse rule's job to complete",
			() => jobsOf("after-parse"),
			list => list.length > 0 && list[0].status === "COMPLETED"
		);
		expect((await ok("GET", `/jobs/${after.id}/`)).event).toMatchObject({
			type: "PARSE",
			rule: { type: "PARSE" }
		});
		// one job per rule and file: no event was processed twice
		await sleep(500);
		expect(await jobsOf("upper")).toHaveLength(1);
		expect(await jobsOf("after-parse")).toHaveLength(1);
	});

	it("defers a file no rule matches, moving it aside", async () => {
		deliver("b.dat", "bee");
		await ingestStatus("b.dat", "DEFERRED");
		expect(fs.readFileSync(path.join(strikeDir, "deferred", "b.dat"), "utf8")).toBe("bee");
		expect(fs.existsSync(path.join(strikeDir, "b.dat"))).toBe(false);
	});

	it("marks a file whose name and size a source file has a DUPLICATE, moving it aside", async () => {
		deliver("a.txt", "hello again\n");
		const list = await until(
			"the second a.txt to be DUPLICATE",
			() => ingestsOf("a.txt"),
			l => l.length === 2 && l[0].status === "DUPLICATE"
		);
		expect(list[1].status).toBe("INGESTED");
		expect(fs.readFileSync(path.join(strikeDir, "duplicate", "a.txt"), "utf8")).toBe(
			"hello again\n"
		);
		// the stored one is untouched
		expect(fs.readFileSync(path.join(rawDir, "in", today(), "a.txt"), "utf8")).toBe(
			"hello world\n"
		);
	});

	it("marks a file ERRORED with the reason when its workspace has vanished, moving it aside", async () => {
		fs.rmSync(doomedDir, { recursive: true, force: true });
		fs.writeFileSync(doomedDir, "not a directory any more");
		deliver("doomed.txt", "d");
		const [ingest] = await ingestStatus("doomed.txt", "ERRORED");
		const details = await ok("GET", `/ingests/${ingest.id}/`);
		expect(details.error).toMatch(/cannot store it at /);
		expect(fs.readFileSync(path.join(strikeDir, "errored", "doomed.txt"), "utf8")).toBe("d");
	});

	it("takes up a new configuration without losing a file", async () => {
		const res = await ok("PATCH", `/strikes/${strikeId}/`, {
			title: "Incoming, all of it",
			configuration: strikeConfiguration([
				{ filename_regex: ".*\\.csv$", workspace_path: "tables", workspace_name: "raw" }
			])
		});
		expect(res).toMatchObject({ title: "Incoming, all of it" });
		deliver("c.csv", "1,2\n");
		await ingestStatus("c.csv", "INGESTED");
		expect(fs.existsSync(path.join(rawDir, "tables", today(), "c.csv"))).toBe(true);
		const bad = await call("PATCH", `/strikes/${strikeId}/`, {
			configuration: { ...strikeConfiguration(), transfer_suffix: "" }
		});
		expect(bad.status).toBe(400);
		expect(bad.body.detail).toMatch(/^configuration\.transfer_suffix/);
	});

	it("answers the web UI's ingest calls", async () => {
		const ended = new Date(Date.now() + 60_000).toISOString();
		const started = new Date(Date.now() - 3600_000).toISOString();
		const list = await ok(
			"GET",
			`/ingests/?started=${started}&ended=${ended}&order=-ingest_started&page=1&page_size=25`
		);
		expect(list.count).toBeGreaterThanOrEqual(5);
		const status = await ok(
			"GET",
			`/ingests/status/?started=${started}&ended=${ended}&page_size=1000&use_ingest_time=true`
		);
		const mine = status.results.find((r: any) => r.strike.id === strikeId);
		expect(mine.files).toBe(2);
		expect(mine.values.reduce((n: number, v: any) => n + v.files, 0)).toBe(2);
	});
});

describe("the triggers service", () => {
	it("is not needed for an ingest's jobs: they are created in the ingest's transaction", async () => {
		const triggers = broker.getLocalService("triggers")!;
		const schema = (triggers as any).originalSchema;
		await broker.destroyService(triggers);
		try {
			for (let i = 0; i < 5; i++) deliver(`late-${i}.txt`, `late ${i}`);
			for (let i = 0; i < 5; i++) await ingestStatus(`late-${i}.txt`, "INGESTED");
			const jobs = await jobsOf("upper");
			expect(jobs).toHaveLength(6);
			const inputs = await Promise.all(
				jobs
					.slice(1)
					.map(async j => (await ok("GET", `/jobs/${j.id}/`)).inputs[0].value.file_name)
			);
			expect(inputs.sort()).toEqual([0, 1, 2, 3, 4].map(i => `late-${i}.txt`));
			const [{ waiting }] = await query<{ waiting: number }>(
				`SELECT count(*)::int AS waiting FROM trigger_event
				 WHERE type = 'INGEST' AND processed IS NULL`
			);
			expect(waiting).toBe(0);
		} finally {
			broker.createService(schema);
			await broker.waitForServices(["triggers"]);
		}
	});

	it("processes events recorded while it was down when it comes back, once each", async () => {
		const triggers = broker.getLocalService("triggers")!;
		const schema = (triggers as any).originalSchema;
		await broker.destroyService(triggers);
		// an event written unprocessed, as a scan or a watched bucket writes its files' events
		const [file] = await query<{ id: number }>(
			`SELECT id FROM scale_file WHERE file_name = 'late-0.txt' AND file_type = 'SOURCE'`
		);
		await query(
			`INSERT INTO trigger_event (type, description, occurred)
			 VALUES ('INGEST', jsonb_build_object('version', '1.0', 'file_id', $1::int,
				'file_name', 'late-0.txt'), now())`,
			[file.id]
		);
		await sleep(300);
		expect(await jobsOf("upper")).toHaveLength(6);
		broker.createService(schema);
		await broker.waitForServices(["triggers"]);
		await until(
			"the waiting event's job",
			() => jobsOf("upper"),
			list => list.length === 7
		);
		await sleep(500);
		const jobs = await jobsOf("upper");
		expect(jobs).toHaveLength(7);
		expect((await ok("GET", `/jobs/${jobs[6].id}/`)).inputs[0].value.file_name).toBe(
			"late-0.txt"
		);
		await until(
			"the jobs to complete",
			() => jobsOf("upper"),
			list => list.every(j => j.status === "COMPLETED")
		);
	});

	it("runs the clock's processors once per slice however many ticks", async () => {
		const before = await ok("GET", "/load/?started=PT5M");
		const ticks = await Promise.all([1, 2, 3].map(() => broker.call("triggers.tick")));
		const fired = (ticks as any[]).flat();
		// the job load rule fires at most once this minute (once if no tick before did)
		expect(fired.filter(f => f.rule === "scale-job-load").length).toBeLessThanOrEqual(1);
		const after = await ok("GET", "/load/?started=PT5M");
		expect(after.count).toBeGreaterThanOrEqual(Math.max(1, before.count));
		const metrics = fired.filter(f => f.rule === "scale-daily-metrics");
		expect(metrics.length).toBeLessThanOrEqual(1);
		const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
		const next = (await broker.call("triggers.tick", { now: tomorrow })) as any[];
		const daily = next.find(f => f.rule === "scale-daily-metrics");
		const today = new Date().toISOString().slice(0, 10);
		expect(daily.result.days).toEqual([today]);
		// today's metrics computed: the job types whose jobs ended today (upper, after-parse,
		// and the strike's own type is still running), the strike's ingests
		expect(daily.result.rows.jobTypes).toBeGreaterThanOrEqual(2);
		expect(daily.result.rows.ingests).toBe(1);
		const [[row]] = (await tdb.db.query(
			`SELECT completed_count FROM metrics_job_type m JOIN job_type t ON t.id = m.job_type_id
			 WHERE t.name = 'upper' AND m.occurred = $1::date`,
			{ bind: [today] }
		)) as any;
		expect(row.completed_count).toBe(7);
	});
});

describe("file names an attacker chooses", () => {
	// last: the ingest rule starts a job for each of these files
	it("ingests files with hostile names as plain names, inside the workspace", async () => {
		const names = [
			"$(touch pwned).txt",
			"`touch pwned`.txt",
			"x; rm -rf y.txt",
			"-rf.txt",
			"dots..and...txt",
			'sp ace\'s "q" | & > <.txt'
		];
		for (const name of names) deliver(name, `content of ${name}\n`);
		for (const name of names) {
			const [ingest] = await ingestStatus(name, "INGESTED");
			expect(ingest.source_file.file_name).toBe(name);
			const stored = path.join(rawDir, "in", today(), name);
			expect(fs.readFileSync(stored, "utf8")).toBe(`content of ${name}\n`);
			expect(path.dirname(stored)).toBe(path.join(rawDir, "in", today()));
		}
		// a hidden name is another tool's temporary file: left where it is
		deliver("..hidden.txt", "hidden\n");
		// `.` does not match a newline: no rule takes this name, and the file is set aside
		deliver("new\nline.txt", "nl\n");
		await ingestStatus("new\nline.txt", "DEFERRED");
		expect(fs.readFileSync(path.join(strikeDir, "deferred", "new\nline.txt"), "utf8")).toBe(
			"nl\n"
		);
		expect(fs.readFileSync(path.join(strikeDir, "..hidden.txt"), "utf8")).toBe("hidden\n");
		expect(await ingestsOf("..hidden.txt")).toEqual([]);
		// no name was ever given to a shell
		for (const dir of [root, strikeDir, rawDir, process.cwd()])
			expect(fs.existsSync(path.join(dir, "pwned"))).toBe(false);
		expect(fs.existsSync(path.join(strikeDir, "y.txt"))).toBe(false);
	});
});

describe("Scale's strike configurations", () => {
	it("watches a Scale configuration's NFS export where NFS_MOUNT_ROOT says the nodes mount it", async () => {
		// Scale 3.0's configuration names only the export; the operator mounts it (autofs's /net).
		// Refused without NFS_MOUNT_ROOT (above); the running service is given one here.
		(broker.getLocalService("ingest") as any).settings.nfsMountRoot = path.join(root, "net");
		const mounted = path.join(root, "net", "nfs-host", "exports", "scale");
		fs.mkdirSync(mounted, { recursive: true });
		const scale = {
			version: "1.0",
			mount: "nfs-host:/exports/scale",
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{ filename_regex: ".*[.]nfs$", workspace_path: "nfs", workspace_name: "raw" }
			]
		};
		expect(
			await ok("POST", "/strikes/validation/", { name: "x", configuration: scale })
		).toEqual({ warnings: [] });
		const created = await ok(
			"POST",
			"/strikes/",
			{ name: "scale-nfs", configuration: scale },
			201
		);
		expect(created.configuration).toMatchObject({
			mount: "nfs-host:/exports/scale",
			mount_on: mounted
		});
		fs.writeFileSync(path.join(mounted, "n.nfs_tmp"), "nfs\n");
		fs.renameSync(path.join(mounted, "n.nfs_tmp"), path.join(mounted, "n.nfs"));
		const ingest = await until(
			"n.nfs to be INGESTED",
			async () => (await ok("GET", "/ingests/?file_name=n.nfs")).results[0],
			i => i?.status === "INGESTED"
		);
		expect(ingest.strike.id).toBe(created.id);
		expect(fs.readFileSync(path.join(rawDir, "nfs", today(), "n.nfs"), "utf8")).toBe("nfs\n");
		expect(fs.existsSync(path.join(mounted, "n.nfs"))).toBe(false);
	});
});

describe("a 2.0 configuration with a dir-watcher monitor", () => {
	it("refuses a workspace that is unknown or not a host one and a monitor without its suffix, naming the field", async () => {
		const landing = path.join(root, "landing");
		await workspace("landing", landing);
		const given = (monitor: Record<string, unknown>, rule: Record<string, unknown> = {}) => ({
			name: "dw",
			configuration: {
				version: "2.0",
				workspace: "landing",
				monitor: { type: "dir-watcher", ...monitor },
				files_to_ingest: [{ filename_regex: ".*", ...rule }]
			}
		});
		const cases: [unknown, RegExp][] = [
			[given({}), /^configuration\.monitor\.transfer_suffix: is required/],
			[
				given({ transfer_suffix: "_tmp" }, { new_workspace: "nowhere" }),
				/^configuration\.files_to_ingest\[0\]\.new_workspace: "nowhere" is not the name of a workspace/
			],
			[
				given({ transfer_suffix: "_tmp", sqs_name: "q" }),
				/^configuration\.monitor\.sqs_name: /
			],
			[
				given({ transfer_suffix: "_tmp" }, { new_file_path: "../out" }),
				/^configuration\.files_to_ingest\[0\]\.new_file_path: "\.\.\/out" leads outside the workspace/
			]
		];
		for (const [body, detail] of cases) {
			const answer = await call("POST", "/strikes/validation/", body);
			expect(answer.status).toBe(400);
			expect(answer.body.detail).toMatch(detail);
		}
		expect((await ok("GET", "/strikes/?name=dw")).count).toBe(0);
	});

	it("watches its workspace's directory and moves each file per its rule into YYYY/MM/DD", async () => {
		const landing = path.join(root, "landing");
		const configuration = {
			version: "2.0",
			workspace: "landing",
			monitor: { type: "dir-watcher", transfer_suffix: "_part" },
			files_to_ingest: [
				{
					filename_regex: ".*[.]dw$",
					data_types: ["watched"],
					new_workspace: "raw",
					new_file_path: "/dw/in"
				},
				{ filename_regex: ".*[.]stay$" }
			]
		};
		expect(await ok("POST", "/strikes/validation/", { name: "dw", configuration })).toEqual({
			warnings: []
		});
		const created = await ok("POST", "/strikes/", { name: "dw", configuration }, 201);
		// answered as given, not as the 1.0 configuration the watcher runs
		expect(created.configuration).toEqual({
			...configuration,
			files_to_ingest: [
				{ ...configuration.files_to_ingest[0], new_file_path: "dw/in" },
				{ filename_regex: ".*[.]stay$", data_types: [] }
			]
		});
		const arrive = (name: string, content: string) => {
			fs.writeFileSync(path.join(landing, `${name}_part`), content);
			fs.renameSync(path.join(landing, `${name}_part`), path.join(landing, name));
		};
		arrive("one.dw", "one\n");
		arrive("two.stay", "two\n");
		arrive("three.other", "three\n");
		const [one] = await ingestStatus("one.dw", "INGESTED");
		const [two] = await ingestStatus("two.stay", "INGESTED");
		await ingestStatus("three.other", "DEFERRED");
		expect(one.strike.id).toBe(created.id);
		expect(await ok("GET", `/ingests/${one.id}/`)).toMatchObject({
			file_path: `dw/in/${today()}/one.dw`,
			source_file: { workspace: { name: "raw" }, data_type: ["watched"] }
		});
		expect(fs.readFileSync(path.join(rawDir, "dw", "in", today(), "one.dw"), "utf8")).toBe(
			"one\n"
		);
		expect(await ok("GET", `/ingests/${two.id}/`)).toMatchObject({
			file_path: `${today()}/two.stay`,
			source_file: { workspace: { name: "landing" } }
		});
		expect(fs.readFileSync(path.join(landing, today(), "two.stay"), "utf8")).toBe("two\n");
		expect(fs.readFileSync(path.join(landing, "deferred", "three.other"), "utf8")).toBe(
			"three\n"
		);
		for (const name of ["one.dw", "two.stay", "three.other"])
			expect(fs.existsSync(path.join(landing, name))).toBe(false);
	});

	it("ingests a different file under a reused name beside the first, and its ingest names the first", async () => {
		const landing = path.join(root, "landing");
		const [first] = await ingestsOf("one.dw");
		fs.writeFileSync(path.join(landing, "one.dw_part"), "one, again\n");
		fs.renameSync(path.join(landing, "one.dw_part"), path.join(landing, "one.dw"));
		const [reused] = await until(
			"the second one.dw to be INGESTED",
			() => ingestsOf("one.dw"),
			l => l.length === 2 && l[0].status === "INGESTED"
		);
		const details = await ok("GET", `/ingests/${reused.id}/`);
		expect(details.file_path).toBe(`dw/in/${today()}/11/one.dw`);
		expect(details.source_file).toMatchObject({ file_name: "one.dw", file_size: 11 });
		expect(details.shares_name_with).toMatchObject({
			id: first.source_file.id,
			file_name: "one.dw",
			file_size: 4
		});
		expect((await ok("GET", `/ingests/${first.id}/`)).shares_name_with).toBeNull();
		expect(
			fs.readFileSync(path.join(rawDir, "dw", "in", today(), "11", "one.dw"), "utf8")
		).toBe("one, again\n");
	});
});
