"use strict";
/**
 * The files one job passes through, from `POST /queue/new-job/` to `GET /jobs/{id}/` COMPLETED
 * (docs/architecture.md, "A job's path"): each step names the file and the function or name in
 * it that runs, and this checks that the name is still there, then counts the distinct files of
 * lib/, services/ and moleculer.config.ts, their folders, and how often the path enters a folder.
 *
 *   node scripts/job-path.js               the working tree
 *   node scripts/job-path.js --at <rev>    the same steps at an earlier commit: each file is
 *                                          followed back through the renames git finds since,
 *                                          or, where it was folded into another, to the file
 *                                          that held the name
 */
const fs = require("fs");
const { execFileSync } = require("child_process");

/** [stage, file, name that runs there], in the order a job meets them. */
const STEPS = [
	["POST /queue/new-job/", "services/api.service.ts", "ApiGateway"],
	["POST /queue/new-job/", "services/queue.service.ts", "POST /queue/new-job"],
	["POST /queue/new-job/", "lib/validation/schema.ts", "checkBodyDepth"],
	["POST /queue/new-job/", "services/queue.service.ts", "newJob"],
	["POST /queue/new-job/", "lib/db/run.ts", "MicroBatcher"],
	["POST /queue/new-job/", "lib/jobs/new-job.ts", "queueEachNewJob"],
	["POST /queue/new-job/", "lib/jobs/prepare-job.ts", "prepareEachNewJob"],
	["POST /queue/new-job/", "lib/documents/job-data.ts", "parseJobData"],
	["POST /queue/new-job/", "lib/validation/schema.ts", "compileChecker"],
	["POST /queue/new-job/", "lib/db/run.ts", "writePrepared"],
	["POST /queue/new-job/", "lib/records/job-details.ts", "jobsDetailsFromRows"],
	["placed", "services/scheduler.service.ts", "schedulePass"],
	["placed", "lib/scheduling/claim.ts", "schedulePass"],
	["placed", "lib/scheduling/matching.ts", "matchBatch"],
	["placed", "lib/scheduling/matching.ts", "ImageSets"],
	["placed", "lib/scheduling/dispatch.ts", "PlacedExecutions"],
	["placed", "lib/scheduling/dispatch.ts", "buildSpecs"],
	["placed", "lib/scheduling/dispatch.ts", "dispatchPlaced"],
	["placed", "lib/documents/agent-protocol.ts", "callGroups"],
	["run on an agent", "services/node-agent.service.ts", "RUN_PARAMS"],
	["run on an agent", "lib/documents/agent-protocol.ts", "RUN_PARAMS"],
	["run on an agent", "lib/agent/agent.ts", "NodeAgent"],
	["run on an agent", "lib/agent/execution.ts", "Execution"],
	["run on an agent", "lib/agent/task.ts", "TaskDirs"],
	["run on an agent", "lib/agent/task.ts", "stageInputs"],
	["run on an agent", "lib/agent/launcher.ts", "LauncherPool"],
	["run on an agent", "lib/agent/task.ts", "planProducts"],
	["run on an agent", "lib/documents/results.ts", "parseResultsManifest"],
	["run on an agent", "lib/agent/files.ts", "isPlainFileName"],
	["run on an agent", "lib/agent/reporter.ts", "ExecutionReporter"],
	["finished", "services/scheduler.service.ts", "exeFinished"],
	["finished", "lib/documents/agent-protocol.ts", "FINISHED_PARAMS"],
	["finished", "lib/executions/complete.ts", "writeReportBatch"],
	["finished", "lib/executions/finish.ts", "finishExecutions"],
	["finished", "lib/executions/complete.ts", "collectSteps"],
	["finished", "lib/executions/complete.ts", "complete"],
	["finished", "lib/records/product.ts", "planParseUpdates"],
	["finished", "lib/records/product.ts", "checkProducts"],
	["finished", "lib/documents/results.ts", "buildJobResults"],
	["GET /jobs/{id}/", "services/api.service.ts", "ApiGateway"],
	["GET /jobs/{id}/", "services/jobs.service.ts", "GET /jobs/:id"],
	["GET /jobs/{id}/", "services/jobs.service.ts", "getJobDetails"],
	["GET /jobs/{id}/", "lib/records/job-details.ts", "getJobDetails"],
	["GET /jobs/{id}/", "lib/validation/schema.ts", "formatDatetime"]
];

const git = (...args) =>
	execFileSync("git", args, {
		encoding: "utf8",
		maxBuffer: 1 << 26,
		stdio: ["ignore", "pipe", "ignore"]
	});
const at = process.argv.includes("--at") ? process.argv[process.argv.indexOf("--at") + 1] : null;

/** Current path -> path at `at`, through the renames git finds between them. */
const renamed = new Map();
if (at)
	for (const line of git("diff", "--name-status", "-M", at, "HEAD").split("\n")) {
		const [status, from, to] = line.split("\t");
		if (status && status.startsWith("R")) renamed.set(to, from);
	}
const pathOf = file => (at ? renamed.get(file) || file : file);
const textOf = file => (at ? git("show", `${at}:${file}`) : fs.readFileSync(file, "utf8"));

const counted = file => /^(lib|services)\//.test(file) || file === "moleculer.config.ts";
const files = [];
const entries = new Map();
let previous = null;
let missing = 0;
/**
 * At an earlier commit, the file that defined the step's name there (files were folded together
 * since), else the file followed back through git's renames.
 */
function fileAt(current, name) {
	const file = pathOf(current);
	if (!at || !current.startsWith("lib/")) return file;
	const pattern = `export (async )?(const|function|class) ${name}\\b`;
	let found = [];
	try {
		found = git("grep", "-l", "-E", pattern, at, "--", "lib").split("\n").filter(Boolean);
	} catch {
		// no file defines it: a method or a route, kept in the same file
	}
	return found.length === 1 ? found[0].slice(at.length + 1) : file;
}

for (const [stage, current, name] of STEPS) {
	const file = fileAt(current, name);
	if (!textOf(file).includes(name)) {
		console.error(`missing: ${name} in ${file}`);
		missing++;
	}
	if (!counted(file)) continue;
	if (!files.includes(file)) files.push(file);
	const folder = file.split("/").slice(0, -1).join("/");
	if (folder !== previous) entries.set(folder, (entries.get(folder) || 0) + 1);
	previous = folder;
	if (process.argv.includes("--list")) console.log(`${stage.padEnd(22)} ${file}  (${name})`);
}
console.log(`${at || "working tree"}: ${files.length} distinct files in ${entries.size} folders`);
console.log(
	"entered: " +
		[...entries]
			.sort((a, b) => b[1] - a[1])
			.map(([folder, n]) => `${folder} ${n}`)
			.join(", ")
);
process.exit(missing ? 1 : 0);
