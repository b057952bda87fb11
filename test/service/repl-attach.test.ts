import fs from "fs";
import os from "os";
import path from "path";
import { spawnSync } from "child_process";
import { ServiceBroker } from "moleculer";
import { Command } from "commander";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startE2e, until, type E2e, JOB_SERVICES } from "../helpers/e2e";
import { COMMANDS } from "../../lib/repl/commands";
import { parseArguments, type CommandArgs } from "../../lib/repl/command";
import { ReplSocketClient, replSocketPath, serveReplSocket } from "../../lib/launch/repl-socket";

/**
 * `npm run repl` attached to a running service through its REPL socket (as to `npm start`),
 * its commands driven as an operator types them: the line parsed as moleculer-repl hands it to
 * the command (commander, with our parse hook), then run against the attached broker.
 */

const SERVICES = JOB_SERVICES;

let tdb: TestDatabase;
let e2e: E2e;
let root: string;
let dataDir: string;
let stopSocket: () => Promise<void>;
let client: ReplSocketClient;
let repl: ServiceBroker;

/** Parses `line` as the REPL does and runs the command on the attached broker; what it printed. */
async function type(line: string): Promise<string> {
	const [name, ...words] = line.split(" ");
	const def = COMMANDS.find(c => c.command.split(" ")[0] === name);
	if (!def) throw new Error(`no command ${name}`);
	const program = new Command();
	program.exitOverride();
	const cmd = program.command(def.command);
	for (const o of def.options ?? []) cmd.option(o.option, o.description);
	let args: CommandArgs = {};
	cmd.hook("preAction", c => parseArguments.call(null, c as any));
	cmd.action(function (this: any) {
		args = this.params;
	});
	await program.parseAsync([name, ...words], { from: "user" });
	const printed: string[] = [];
	await def.run(
		{ broker: repl, print: t => printed.push(`${t}\n`), write: t => printed.push(t) },
		args
	);
	return printed.join("");
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "repl-attach-"));
	fs.chmodSync(root, 0o755);
	dataDir = path.join(root, "data");
	fs.mkdirSync(path.join(root, "flags"), { mode: 0o777 });
	fs.chmodSync(path.join(root, "flags"), 0o777);
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "attach");
	stopSocket = await serveReplSocket(e2e.broker, dataDir);
	client = (await ReplSocketClient.connect(replSocketPath(dataDir)))!;
	repl = new ServiceBroker({ logger: false, middlewares: [client.middleware()] });
	await repl.start();
	await until(
		"the agent's node",
		async () => (await e2e.ok("GET", "/nodes/")).results,
		(r: any[]) => r.length === 1
	);
}, 30000);

afterAll(async () => {
	await repl?.stop();
	client?.close();
	await stopSocket?.();
	await e2e?.stop();
	await tdb?.drop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

it("makes a socket only its user may open (the kernel checks, mode 0600)", () => {
	const stat = fs.statSync(replSocketPath(dataDir));
	expect(stat.isSocket()).toBe(true);
	expect(stat.mode & 0o777).toBe(0o600);
	expect(stat.uid).toBe(process.getuid!());
	if (process.getuid!() !== 0) return;
	// another user is refused by the kernel
	const other = spawnSync(
		"setpriv",
		[
			"--reuid=65534",
			"--regid=65534",
			"--clear-groups",
			process.execPath,
			"-e",
			`require("net").connect(${JSON.stringify(replSocketPath(dataDir))}).on("error", e => { console.log(e.code); process.exit(0) }).on("connect", () => { console.log("connected"); process.exit(0) })`
		],
		{ encoding: "utf8" }
	);
	expect(other.stdout.trim()).toBe("EACCES");
});

it("attaches, lists jobs with their node and duration, and says why one waits", async () => {
	const big = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name: "too-big",
			version: "1",
			cpus_required: 64,
			mem_required: 16,
			interface: { command: "/bin/true", command_arguments: "" }
		},
		201
	);
	const small = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name: "fine",
			version: "1",
			cpus_required: 0.1,
			mem_required: 16,
			interface: { command: "/bin/true", command_arguments: "" }
		},
		201
	);
	const waiting = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{ job_type_id: big.id, job_data: { input_data: [], output_data: [] } },
		201
	);
	const done = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{ job_type_id: small.id, job_data: { input_data: [], output_data: [] } },
		201
	);
	await until(
		"the small job COMPLETED",
		async () => (await e2e.ok("GET", `/jobs/${done.id}/`)).status,
		s => s === "COMPLETED"
	);
	const why = await until(
		"a reason",
		() => type(`why ${waiting.id}`),
		t => t.includes("RESOURCES")
	);
	expect(why).toMatch(/waits: it needs 64 cpus.*more than any online node offers/);
	const jobs = await type("jobs --limit 5");
	expect(jobs).toMatch(
		/^id\s+job type\s+status\s+node\s+duration\s+tries\s+priority\s+changed$/m
	);
	expect(jobs).toMatch(
		new RegExp(
			`^\\s*${done.id}\\s+fine 1\\s+COMPLETED\\s+\\S+ \\(\\d+\\)\\s+\\d+ m?s\\s+1\\s+100\\s+\\d+ (ms|s) ago$`,
			"m"
		)
	);
	expect(jobs).toMatch(new RegExp(`^\\s*${waiting.id}\\s+too-big 1\\s+QUEUED\\s+-\\s+-`, "m"));
	// a refusal is said as one
	expect(await type(`requeue ${done.id}`)).toBe(
		`refused: job ${done.id} is COMPLETED; only FAILED or CANCELED jobs are requeued\n`
	);
	expect(await type(`why ${done.id}`)).toBe(`job ${done.id} is COMPLETED: it is not waiting\n`);
});

it("keeps a multi-word reason whole", async () => {
	const [node] = (await e2e.ok("GET", "/nodes/")).results;
	expect(await type(`node-pause ${node.id} disk full on /data`)).toBe(
		`node ${node.id} (${node.hostname}): paused: disk full on /data\n`
	);
	expect((await e2e.ok("GET", `/nodes/${node.id}/`)).pause_reason).toBe("disk full on /data");
	await type(`node-resume ${node.id}`);
});

it("follows a running job's output with logs -f until the execution ends", async () => {
	const flags = path.join(root, "flags");
	const t = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name: "talks",
			version: "1",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				command: "/bin/sh",
				command_arguments: `-c "echo one; echo two; while [ ! -e ${flags}/go ]; do sleep 0.05; done; echo three"`
			}
		},
		201
	);
	const job = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{ job_type_id: t.id, job_data: { input_data: [], output_data: [] } },
		201
	);
	const running = await until(
		"the job RUNNING",
		async () => await e2e.ok("GET", `/jobs/${job.id}/`),
		j => j.status === "RUNNING"
	);
	const exeId = running.job_exes[0].id;
	await until(
		"its first lines written",
		async () => await e2e.ok("GET", `/job-executions/${exeId}/logs/`),
		l => String(l.stdout ?? "").includes("two")
	);
	const followed = type(`logs ${exeId} -f --tail 1`);
	// the command follows from the agent while the job runs; the job ends once the flag is there
	const agent = e2e.broker.getLocalService("node-agent") as any;
	await until(
		"the agent following the execution",
		async () => agent.agent.tails.get(exeId)?.followerCount ?? 0,
		n => n === 1
	);
	fs.writeFileSync(path.join(flags, "go"), "");
	expect(await followed).toBe(`two\nthree\n--- execution ${exeId} ended ---\n`);
});
