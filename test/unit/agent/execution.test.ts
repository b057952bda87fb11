import fs from "fs";
import path from "path";
import { Containers, DEFAULT_CONTAINER_SETTINGS } from "../../../lib/agent/containers";
import { Execution, type ExecutionContext } from "../../../lib/agent/execution";
import { LauncherPool, PacedLauncher, type LauncherKind } from "../../../lib/agent/launcher";
import { nativeLauncherBinary } from "../../../lib/agent/native-launcher";
import type { ExecutionFinished, ExecutionStep } from "../../../lib/documents/agent-protocol";
import {
	job,
	makeJobsExecutable,
	removeTempDirs,
	spec,
	stagedFile,
	tempDir,
	type SpecOptions
} from "../../fixtures/agent";

let launcher: LauncherPool;
let workDir: string;
let sources: string;

beforeAll(() => {
	makeJobsExecutable();
	launcher = new LauncherPool(1);
	workDir = tempDir("work");
	sources = tempDir("sources");
});

afterAll(async () => {
	await launcher.stop();
	removeTempDirs();
});

function context(steps: ExecutionStep[], overrides: Partial<ExecutionContext> = {}) {
	const ctx: ExecutionContext = {
		agentId: "agent-1",
		workDir,
		launcher,
		contained: false,
		identities: null,
		// an engine nobody runs: container jobs fail here (test/service/containers.test.ts has a real one)
		containers: new Containers(
			{ ...DEFAULT_CONTAINER_SETTINGS, host: "unix:///nonexistent/docker.sock" },
			"node-1"
		),
		killGraceMs: 300,
		logCapBytes: 1024 * 1024,
		taskPath: process.env.PATH ?? "/usr/bin:/bin",
		onStep: step => steps.push(step),
		...overrides
	};
	return ctx;
}

interface Ran {
	report: ExecutionFinished;
	steps: ExecutionStep[];
	execution: Execution;
	ms: number;
}

function nativeKind(): LauncherKind {
	const binary = nativeLauncherBinary();
	if ("problem" in binary) throw new Error(binary.problem);
	return { kind: "native", binary: binary.path };
}

async function run(options: SpecOptions, overrides: Partial<ExecutionContext> = {}): Promise<Ran> {
	const steps: ExecutionStep[] = [];
	const execution = new Execution(spec(options), context(steps, overrides));
	const started = Date.now();
	const report = await execution.run();
	return { report, steps, execution, ms: Date.now() - started };
}

/** The steps' events in order, as "pre started", "pre completed 0"... */
function stepTrail(steps: ExecutionStep[]): string[] {
	return steps.map(s =>
		[s.step, s.event, s.exitCode === undefined ? "" : String(s.exitCode)].join(" ").trim()
	);
}

function read(file: string): string {
	return fs.readFileSync(file, "utf8");
}

/** Whether a process runs (a zombie does not). */
function running(pid: number): boolean {
	try {
		const stat = read(`/proc/${pid}/stat`);
		return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
	} catch {
		return false;
	}
}

/** Live pids whose process group is `pgid` (from /proc). */
function processGroup(pgid: number): number[] {
	const found: number[] = [];
	for (const name of fs.readdirSync("/proc")) {
		if (!/^\d+$/.test(name)) continue;
		try {
			const stat = read(`/proc/${name}/stat`);
			const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
			// fields[0] is the state, fields[2] the process group
			if (Number(fields[2]) === pgid && fields[0] !== "Z") found.push(Number(name));
		} catch {
			// gone
		}
	}
	return found;
}

/**
 * The group's live processes once they are gone, or after 3 s: a SIGKILL sent to a group reaches
 * each member on its own, so one may still be dying when the process that was waited for is
 * reaped (seen under load).
 */
async function processGroupAfterKill(pgid: number): Promise<number[]> {
	const deadline = Date.now() + 3000;
	let found = processGroup(pgid);
	while (found.length > 0 && Date.now() < deadline) {
		await new Promise(resolve => setTimeout(resolve, 50));
		found = processGroup(pgid);
	}
	return found;
}

async function waitFor(check: () => boolean | Promise<boolean>, ms = 10000): Promise<void> {
	const deadline = Date.now() + ms;
	while (!(await check())) {
		if (Date.now() > deadline) throw new Error("timed out waiting");
		await new Promise(r => setTimeout(r, 25));
	}
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe.each([
	["Node launchers", () => new LauncherPool(1)],
	["native launchers", () => new LauncherPool(1, nativeKind())]
])("a task that ends leaving a process in its group (%s)", (_name, make) => {
	it("has that process killed", async () => {
		const own = make();
		try {
			const { report } = await run(
				{ command: "/bin/sh", commandArguments: '-c "sleep 30 & echo left $!"' },
				{ launcher: own }
			);
			expect(report.status).toBe("COMPLETED");
			const left = Number(/left (\d+)/.exec(report.stdout)![1]);
			await waitFor(() => !running(left), 2000);
			expect(running(left)).toBe(false);
		} finally {
			await own.stop();
		}
	});
});

describe("the main step's start", () => {
	it("is when its process started, not when its launch was asked (which may wait behind others)", async () => {
		// each launch waits 300 ms before the launcher is asked, as one behind a backlog would
		const { report, steps } = await run(
			{ command: "/bin/true", commandArguments: "" },
			{ launcher: new PacedLauncher(launcher, 300) }
		);
		expect(report.errorDetail).toBeNull();
		expect(report.status).toBe("COMPLETED");
		const at = (step: string, event: string) =>
			Date.parse(steps.find(s => s.step === step && s.event === event)!.at);
		expect(at("main", "started") - at("pre", "completed")).toBeGreaterThanOrEqual(300);
		expect(at("main", "completed")).toBeGreaterThanOrEqual(at("main", "started"));
	});
});

describe("a successful execution", () => {
	it("stages the input, runs, reads the 1.1 manifest and copies the product", async () => {
		const ws = tempDir("ws");
		const input = stagedFile(path.join(sources, "a"), "input.txt", "hello world\n");
		const { report, steps, execution } = await run({
			command: job("write-output.sh"),
			commandArguments: "${input_file} ${job_output_dir}",
			inputData: [{ name: "input_file", type: "file" }],
			outputData: [{ name: "result", type: "file" }],
			inputs: { input_file: { files: [input] } },
			workspaceDir: ws
		});
		expect(report.errorDetail).toBeNull();
		expect(report.status).toBe("COMPLETED");
		expect(report.exitCode).toBe(0);
		expect(report.errorName).toBeNull();
		expect(report.agentId).toBe("agent-1");
		expect(report.jobExeId).toBe(execution.spec.jobExeId);

		// the staged copy is where the command line said, the workspace file untouched
		const staged = path.join(execution.taskDir, "inputs", "input_file", "input.txt");
		expect(read(staged)).toBe("hello world\n");
		expect(fs.existsSync(input.hostPath)).toBe(true);

		expect(report.products).toEqual([
			{
				outputName: "result",
				workspaceId: 7,
				filePath: `my-job/1.0.0/42/result.txt`,
				fileName: "result.txt",
				mediaType: "text/plain",
				size: 12,
				dataStarted: "2024-01-02T03:04:05Z",
				dataEnded: "2024-01-02T04:04:05Z",
				geoJson: { type: "Point", coordinates: [1, 2, 3] }
			}
		]);
		expect(read(path.join(ws, "my-job/1.0.0/42/result.txt"))).toBe("HELLO WORLD\n");
		// no temporary file is left beside it
		expect(fs.readdirSync(path.join(ws, "my-job/1.0.0/42"))).toEqual(["result.txt"]);

		expect(report.resultsManifest).toMatchObject({
			version: "1.1",
			output_data: [{ name: "result" }]
		});
		expect(report.parseResults).toEqual([{ filename: "input.txt", data_types: ["parsed"] }]);
		expect(report.stdout).toBe(`wrote ${execution.outputDir}/result.txt\n`);
		expect(report.stderr).toBe("a warning\n");

		expect(stepTrail(steps)).toEqual([
			"pre started",
			"pre completed 0",
			"main started",
			"main completed 0",
			"post started",
			"post completed 0"
		]);
		expect(steps[1].commandArguments).toBe(`${staged} ${execution.outputDir}`);
		expect(steps.every(s => ISO.test(s.at) && s.agentId === "agent-1")).toBe(true);
		const times = steps.map(s => Date.parse(s.at));
		expect([...times].sort((a, b) => a - b)).toEqual(times);
		for (const step of ["pre", "main", "post"] as const) {
			expect(report.steps[step]!.started).toMatch(ISO);
			expect(report.steps[step]!.completed).toMatch(ISO);
			expect(report.steps[step]!.exitCode).toBe(0);
		}
		expect(await execution.logs()).toEqual({
			stdout: report.stdout,
			stderr: report.stderr,
			is_finished: true
		});
	});

	it("reads a 1.0 manifest with relative paths into a files output", async () => {
		const ws = tempDir("ws");
		const { report } = await run({
			command: job("manifest-1-0.sh"),
			commandArguments: "${job_output_dir}",
			outputData: [{ name: "tables", type: "files" }],
			workspaceDir: ws
		});
		expect(report.status).toBe("COMPLETED");
		expect(report.products.map(p => [p.outputName, p.filePath, p.mediaType, p.size])).toEqual([
			["tables", "my-job/1.0.0/42/table.csv", "text/csv", 8],
			["tables", "my-job/1.0.0/42/doc.xml", "application/xml", 4]
		]);
		expect(report.products[0].dataStarted).toBeNull();
		expect(report.resultsManifest).toMatchObject({
			version: "1.1",
			output_data: [{ name: "tables", files: [{ path: "table.csv" }, { path: "doc.xml" }] }]
		});
		expect(report.parseResults).toEqual([
			{ filename: "in.txt", geo_metadata: { data_started: "2024-01-02T03:04:05Z" } }
		]);
		expect(read(path.join(ws, "my-job/1.0.0/42/table.csv"))).toBe("a,b\n1,2\n");
	});

	it("takes outputs from ARTIFACT lines, with the interface's media type", async () => {
		const ws = tempDir("ws");
		const { report } = await run({
			command: job("artifacts.sh"),
			commandArguments: "${job_output_dir}",
			outputData: [
				{ name: "result", type: "file", media_type: "application/x-custom" },
				{ name: "many", type: "files" }
			],
			workspaceDir: ws
		});
		expect(report.status).toBe("COMPLETED");
		expect(report.products.map(p => [p.outputName, p.fileName, p.mediaType])).toEqual([
			["result", "a.json", "application/x-custom"],
			["many", "m1.txt", "text/plain"],
			["many", "m2.txt", "text/plain"]
		]);
		expect(report.resultsManifest).toMatchObject({
			version: "1.1",
			output_data: [
				{ name: "result", file: { path: expect.stringMatching(/a\.json$/) } },
				{ name: "many", files: [{ path: "m1.txt" }, { path: expect.any(String) }] }
			],
			parse_results: []
		});
		expect(read(path.join(ws, "my-job/1.0.0/42/m2.txt"))).toBe("two\n");
	});

	it("lets the manifest win over an ARTIFACT line for the same output", async () => {
		const ws = tempDir("ws");
		const { report } = await run({
			command: job("artifacts.sh"),
			commandArguments: "${job_output_dir} conflict",
			outputData: [
				{ name: "result", type: "file" },
				{ name: "many", type: "files", required: false }
			],
			workspaceDir: ws
		});
		expect(report.status).toBe("COMPLETED");
		const result = report.products.filter(p => p.outputName === "result");
		expect(result.map(p => [p.fileName, p.mediaType])).toEqual([
			["b.json", "application/json"]
		]);
		expect(read(path.join(ws, "my-job/1.0.0/42/b.json"))).toBe('{"b": 2}\n');
	});

	it("ignores a long-running job type's timeout", async () => {
		const { report } = await run({
			command: "/bin/sh",
			commandArguments: "-c 'sleep 1.2'",
			timeout: 1,
			jobType: { isLongRunning: true }
		});
		expect(report.status).toBe("COMPLETED");
		expect(report.resultsManifest).toBeNull();
		expect(report.products).toEqual([]);
	});
});

describe("the command line", () => {
	it("substitutes values without splitting or interpreting them", async () => {
		const ws = tempDir("ws");
		const many = [
			stagedFile(path.join(sources, "m"), "one.txt", "1", 11),
			stagedFile(path.join(sources, "m"), "two.txt", "2", 12)
		];
		const { report, steps, execution } = await run({
			command: job("print-args.sh"),
			commandArguments:
				"${job_output_dir} ${greeting} '${-n :name}' ${-o :optional} ${--dir:many files} x${optional}y end",
			inputData: [
				{ name: "greeting" },
				{ name: "name" },
				{ name: "optional", required: false },
				{ name: "many files", type: "files" }
			],
			outputData: [{ name: "args", type: "file" }],
			inputs: {
				greeting: { value: "hello   world; $(rm -rf /) `id` *" },
				name: { value: 'it\'s "quoted"' },
				"many files": { files: many }
			},
			workspaceDir: ws
		});
		expect(report.status).toBe("COMPLETED");
		const dir = path.join(execution.taskDir, "inputs", "many files");
		expect(read(path.join(execution.outputDir, "args.txt"))).toBe(
			[
				"[hello   world; $(rm -rf /) `id` *]",
				"[-n]",
				`[it's "quoted"]`,
				"[--dir]",
				`[${dir}]`,
				"[xy]",
				"[end]",
				""
			].join("\n")
		);
		expect(fs.readdirSync(dir).sort()).toEqual(["one.txt", "two.txt"]);
		expect(steps[1].commandArguments).toBe(
			`${execution.outputDir} hello   world; $(rm -rf /) \`id\` * -n it's "quoted" --dir ${dir} xy end`
		);
		// a minimal environment, the task directory as home and working directory
		const env = read(path.join(execution.outputDir, "env.txt"));
		expect(env).toContain(`HOME=${execution.taskDir}\n`);
		expect(env).toContain(`SCALE_JOB_EXE_ID=${execution.spec.jobExeId}\n`);
		expect(env).toContain(`PATH=${process.env.PATH}\n`);
		expect(env).not.toContain("JEST_WORKER_ID");
		expect(read(path.join(execution.outputDir, "pwd.txt"))).toBe(`${execution.taskDir}\n`);
	});

	it("fails with task-launch when the arguments cannot be split", async () => {
		const { report, steps } = await run({
			command: "/bin/echo",
			commandArguments: "'unclosed"
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("task-launch");
		expect(report.errorDetail).toMatch(/unclosed single quote/);
		expect(report.exitCode).toBeNull();
		expect(stepTrail(steps)).toEqual(["pre started", "pre completed 1"]);
		expect(report.steps.pre!.exitCode).toBe(1);
		expect(report.steps.main).toBeUndefined();
	});

	it("fails with task-launch when a required input has no value", async () => {
		const { report } = await run({
			command: "/bin/echo",
			commandArguments: "${needed}",
			inputData: [{ name: "needed" }]
		});
		expect(report.errorName).toBe("task-launch");
		expect(report.errorDetail).toMatch(/required input "needed"/);
	});

	it("fails with task-launch when a required output's workspace has no host path", async () => {
		const s = spec({
			command: "/bin/true",
			commandArguments: "",
			outputData: [{ name: "result" }]
		});
		s.outputWorkspaces.result = { workspaceId: 8, hostPath: "" };
		const steps: ExecutionStep[] = [];
		const report = await new Execution(s, context(steps)).run();
		expect(report.errorName).toBe("task-launch");
		expect(report.errorDetail).toMatch(/workspace 8 of the output "result" has no host path/);
		expect(stepTrail(steps)).toEqual(["pre started", "pre completed 1"]);
		delete s.outputWorkspaces.result;
		const missing = await new Execution(
			{ ...s, jobExeId: s.jobExeId + 100000 },
			context([])
		).run();
		expect(missing.errorDetail).toBe('the output "result" has no output workspace');
	});

	it("fails with task-launch when the command does not exist", async () => {
		const { report, steps } = await run({
			command: "/no/such/command",
			commandArguments: "a"
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("task-launch");
		expect(report.errorDetail).toMatch(/\/no\/such\/command" was not found/);
		expect(report.exitCode).toBeNull();
		expect(stepTrail(steps)).toEqual([
			"pre started",
			"pre completed 0",
			"main started",
			"main completed null"
		]);
		expect(report.steps.main!.exitCode).toBeNull();
	});

	it("says why in the report's stderr when its task directory could not be made", async () => {
		const notADirectory = path.join(tempDir("blocked"), "a-file");
		fs.writeFileSync(notADirectory, "");
		const { report } = await run(
			{ command: job("greet.sh"), commandArguments: "" },
			{ workDir: notADirectory }
		);
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("filesystem-io");
		expect(report.errorDetail).toMatch(/could not make the task directory/);
		expect(report.stderr).toBe(`scale: ${report.errorDetail}\n`);
	});

	it("fails with filesystem-io when an input cannot be copied", async () => {
		const { report } = await run({
			command: "/bin/echo",
			commandArguments: "${f}",
			inputData: [{ name: "f", type: "file" }],
			inputs: {
				f: {
					files: [
						{
							fileId: 1,
							hostPath: "/no/such/file.txt",
							fileName: "file.txt",
							mediaType: "text/plain",
							size: 1
						}
					]
				}
			}
		});
		expect(report.errorName).toBe("filesystem-io");
		expect(report.errorDetail).toMatch(/could not stage the input "f".*ENOENT/);
	});

	it("refuses staged file names that would leave the input directory", async () => {
		const input = stagedFile(path.join(sources, "b"), "ok.txt", "x");
		const { report } = await run({
			command: "/bin/echo",
			commandArguments: "${f}",
			inputData: [{ name: "f", type: "file" }],
			inputs: { f: { files: [{ ...input, fileName: "../../escape.txt" }] } }
		});
		expect(report.errorName).toBe("task-launch");
		expect(report.errorDetail).toMatch(/not a plain file name/);
	});
});

describe("a failing algorithm", () => {
	it("reports a non-zero exit code without an error name, and skips post", async () => {
		const { report, steps, execution } = await run({
			command: job("exit-3.sh"),
			commandArguments: "",
			outputData: [{ name: "result" }],
			workspaceDir: tempDir("ws")
		});
		expect(report.status).toBe("FAILED");
		expect(report.exitCode).toBe(3);
		expect(report.errorName).toBeNull();
		expect(report.errorDetail).toBe("the process exited with code 3");
		expect(report.stdout).toBe("about to fail\n");
		// the algorithm's own stderr, then why the execution failed, also in the file
		expect(report.stderr).toBe("something went wrong\nscale: the process exited with code 3\n");
		expect(read(execution.stderrPath)).toBe(report.stderr);
		expect(stepTrail(steps)).toEqual([
			"pre started",
			"pre completed 0",
			"main started",
			"main completed 3"
		]);
		expect(report.steps.main!.exitCode).toBe(3);
		expect(report.steps.post).toBeUndefined();
	});

	it("reports a process killed by someone else with no exit code", async () => {
		const { report } = await run({
			command: "/bin/sh",
			commandArguments: "-c 'kill -KILL $$'"
		});
		expect(report.status).toBe("FAILED");
		expect(report.exitCode).toBeNull();
		expect(report.errorName).toBeNull();
		expect(report.errorDetail).toBe("the process was killed by SIGKILL");
	});

	it("fails (exit code 0, no error name) when a required output is missing", async () => {
		const ws = tempDir("ws");
		const { report, steps } = await run({
			command: job("no-output.sh"),
			commandArguments: "",
			outputData: [
				{ name: "optional one", required: false },
				{ name: "needed one", type: "files" }
			],
			workspaceDir: ws
		});
		expect(report.status).toBe("FAILED");
		expect(report.exitCode).toBe(0);
		expect(report.errorName).toBeNull();
		expect(report.errorDetail).toMatch(/required output "needed one" was not produced/);
		expect(report.stderr).toBe(`scale: ${report.errorDetail}\n`);
		expect(report.products).toEqual([]);
		expect(stepTrail(steps).slice(-2)).toEqual(["post started", "post completed 1"]);
		expect(fs.readdirSync(ws)).toEqual([]);
	});

	it.each([
		["/etc/hostname", /outside the task directory/],
		["../../../../../../etc/hostname", /outside the task directory/],
		["missing.txt", /"missing.txt" does not exist/]
	])("refuses the manifest path %s", async (given, problem) => {
		const ws = tempDir("ws");
		const { report } = await run({
			command: job("escape.sh"),
			commandArguments: `\${job_output_dir} ${given}`,
			outputData: [{ name: "result" }],
			workspaceDir: ws
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBeNull();
		expect(report.exitCode).toBe(0);
		expect(report.errorDetail).toMatch(problem);
		expect(fs.readdirSync(ws)).toEqual([]);
	});

	it("refuses a symbolic link leading outside the task directory", async () => {
		const { report } = await run({
			command: "/bin/sh",
			commandArguments: `-c 'ln -s /etc/hostname outputs/link.txt && echo ARTIFACT:result:link.txt'`,
			outputData: [{ name: "result" }],
			workspaceDir: tempDir("ws")
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorDetail).toMatch(/leads outside the task directory/);
	});

	it("refuses a product file name too long to be stored", async () => {
		const name = `${"n".repeat(251)}`;
		const { report } = await run({
			command: "/bin/sh",
			commandArguments: `-c 'touch outputs/${name} && echo ARTIFACT:result:${name}'`,
			outputData: [{ name: "result" }],
			workspaceDir: tempDir("ws")
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBeNull();
		expect(report.errorDetail).toMatch(/longer than 250 characters/);
	});

	it("refuses several files for a file output", async () => {
		const { report } = await run({
			command: job("artifacts.sh"),
			commandArguments: "${job_output_dir}",
			outputData: [
				{ name: "result", type: "file" },
				{ name: "many", type: "file" }
			],
			workspaceDir: tempDir("ws")
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBeNull();
		expect(report.errorDetail).toMatch(/"many" is a single file but 2 files/);
	});

	it.each([
		["not JSON", "{nope", /not valid JSON/],
		[
			"of a bad shape",
			'{"output_data": [{"name": "result"}]}',
			/must have either file or files/
		],
		["of an unknown version", '{"version": "9.9"}', /unsupported version/]
	])("fails on a results manifest %s", async (_what, text, problem) => {
		const { report } = await run({
			command: "/bin/sh",
			commandArguments: `-c 'printf "%s" "$1" > outputs/results_manifest.json' sh '${text}'`,
			outputData: [{ name: "result", required: false }],
			workspaceDir: tempDir("ws")
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBeNull();
		expect(report.exitCode).toBe(0);
		expect(report.errorDetail).toMatch(/results manifest/);
		expect(report.errorDetail).toMatch(problem);
	});

	it("fails with filesystem-io when the product cannot be copied", async () => {
		const notADir = path.join(tempDir("ws"), "file");
		fs.writeFileSync(notADir, "");
		const input = stagedFile(path.join(sources, "c"), "in.txt", "abc");
		const { report } = await run({
			command: job("write-output.sh"),
			commandArguments: "${i} ${job_output_dir}",
			inputData: [{ name: "i", type: "file" }],
			outputData: [{ name: "result" }],
			inputs: { i: { files: [input] } },
			workspaceDir: notADir
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("filesystem-io");
		expect(report.errorDetail).toMatch(/could not copy the outputs/);
		expect(report.products).toEqual([]);
	});
});

describe("timeouts and cancels", () => {
	it("ends a timed-out process with SIGTERM", async () => {
		const { report, ms } = await run({
			command: job("sleep.sh"),
			commandArguments: "30",
			timeout: 1
		});
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("timeout");
		expect(report.exitCode).toBeNull();
		expect(report.errorDetail).toMatch(/timeout of 1 s/);
		expect(ms).toBeGreaterThanOrEqual(1000);
		expect(ms).toBeLessThan(1000 + 300 + 1500);
		const pid = Number(/pid (\d+)/.exec(report.stdout)![1]);
		expect(await processGroupAfterKill(pid)).toEqual([]);
	});

	it("kills a process ignoring SIGTERM with SIGKILL after the grace period", async () => {
		const { report, ms, steps } = await run(
			{ command: job("sleep.sh"), commandArguments: "30 ignore-term", timeout: 1 },
			{ killGraceMs: 700 }
		);
		expect(report.errorName).toBe("timeout");
		expect(report.exitCode).toBeNull();
		expect(ms).toBeGreaterThanOrEqual(1700);
		expect(ms).toBeLessThan(1700 + 1500);
		expect(stepTrail(steps)).toContain("main completed null");
		// its sleep, in the same process group, went too
		const pid = Number(/pid (\d+)/.exec(report.stdout)![1]);
		expect(await processGroupAfterKill(pid)).toEqual([]);
	});

	it("cancels a running process and serves its logs while it runs", async () => {
		const steps: ExecutionStep[] = [];
		const execution = new Execution(
			spec({ command: job("sleep.sh"), commandArguments: "30" }),
			context(steps)
		);
		const done = execution.run();
		await waitFor(async () => (await execution.logs()).stdout.includes("sleeping 30"));
		const live = await execution.logs();
		expect(live.is_finished).toBe(false);
		expect(live.stdout).toMatch(/^pid \d+\nsleeping 30\n$/);
		expect(execution.cancel()).toBe(true);
		const report = await done;
		expect(report.status).toBe("CANCELED");
		expect(report.errorName).toBeNull();
		expect(report.stdout).toBe(live.stdout);
		expect(execution.cancel()).toBe(false);
		expect((await execution.logs()).is_finished).toBe(true);
		expect(stepTrail(steps)).toEqual([
			"pre started",
			"pre completed 0",
			"main started",
			"main completed null"
		]);
	});

	it("never starts the process of an execution canceled during pre", async () => {
		const steps: ExecutionStep[] = [];
		const marker = path.join(tempDir("marker"), "ran");
		const execution = new Execution(
			spec({ command: "/usr/bin/touch", commandArguments: marker }),
			context(steps)
		);
		const done = execution.run();
		expect(execution.cancel()).toBe(true);
		const report = await done;
		expect(report.status).toBe("CANCELED");
		expect(stepTrail(steps)).toEqual(["pre started", "pre completed 0"]);
		expect(fs.existsSync(marker)).toBe(false);
	});
});

describe("docker job types", () => {
	const dockerJob = {
		command: "echo",
		commandArguments: "hi",
		jobType: { usesDocker: true, dockerImage: "alpine:3", dockerPrivileged: false }
	};

	it("fail with docker-task-launch when no Docker engine answers", async () => {
		const { report, steps } = await run(dockerJob);
		expect(report.status).toBe("FAILED");
		expect(report.errorName).toBe("docker-task-launch");
		expect(report.errorDetail).toMatch(/^no Docker engine answers on this node/);
		expect(report.exitCode).toBeNull();
		expect(stepTrail(steps)).toEqual([
			"pre started",
			"pre completed 0",
			"main started",
			"main completed null"
		]);
	});

	it("fail with docker-task-launch without an image", async () => {
		const { report } = await run({
			...dockerJob,
			jobType: { usesDocker: true, dockerImage: null }
		});
		expect(report.errorName).toBe("docker-task-launch");
		expect(report.errorDetail).toMatch(/has no docker image/);
	});
});
