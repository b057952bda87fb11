import fs from "fs";
import os from "os";
import path from "path";
import { spawn, type ChildProcess } from "child_process";
import { controlPlaneOverNats, startAgent } from "../../bench/lib/agent-process";
import { postJson, waitForCount } from "../../bench/lib/cluster";
import { ensureNatsServer } from "../helpers/nats";
import { PROJECT_ROOT } from "../../lib/paths";

/**
 * `npm run repl` joined to a cluster with the operator's NATS identity (its own user, the
 * permissions `npm run cluster` gives it), against a control plane and an agent in processes of
 * their own: `info` prints no credential, and `logs -f` follows a running job's output across
 * NATS (agent → control plane → operator) until the execution ends.
 */

let cluster: Awaited<ReturnType<typeof controlPlaneOverNats>>;
let agent: ChildProcess;
let work: string;

beforeAll(async () => {
	ensureNatsServer();
	work = fs.mkdtempSync(path.join(os.tmpdir(), "repl-cluster-"));
	fs.chmodSync(work, 0o755);
	cluster = await controlPlaneOverNats(work, { NODE_ID: "control-1" }, [
		{ name: "control-1", role: "control" },
		{ name: "agent-1", role: "agent" },
		{ name: "operator", role: "operator" }
	]);
	const agentDir = path.join(work, "agent");
	fs.mkdirSync(agentDir);
	const env = cluster.envOf("agent-1");
	agent = startAgent(env.TRANSPORTER, agentDir, "agent-1", env);
	await waitForCount(
		cluster.db,
		"SELECT count(*) AS n FROM node WHERE agent_id IS NOT NULL AND is_active",
		1,
		60000
	);
}, 120000);

afterAll(async () => {
	if (agent && agent.exitCode === null) {
		agent.kill("SIGTERM");
		await new Promise(r => agent.once("exit", r));
	}
	await cluster?.stop();
});

/** The REPL as the operator starts it; lines typed one by one, each once `ready` says so. */
function startRepl(): { proc: ChildProcess; output: () => string } {
	let out = "";
	const env = cluster.envOf("operator");
	const proc = spawn(process.execPath, [path.join(PROJECT_ROOT, "dist", "bin", "repl.js")], {
		env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "warn", DATA_DIR: work, ...env },
		stdio: ["pipe", "pipe", "pipe"]
	});
	proc.stdout!.on("data", b => (out += b.toString()));
	proc.stderr!.on("data", b => (out += b.toString()));
	return { proc, output: () => out };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60000) {
	const deadline = Date.now() + timeoutMs;
	while (!(await check())) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await new Promise(r => setTimeout(r, 50));
	}
}

it("joins with the operator's identity, prints no credential, and follows a job's output", async () => {
	const flag = path.join(work, "go");
	const type = await postJson(`${cluster.service.api}/job-types/`, {
		name: "talks",
		version: "1",
		cpus_required: 0.1,
		mem_required: 16,
		interface: {
			command: "/bin/sh",
			command_arguments: `-c "echo one; while [ ! -e ${flag} ]; do sleep 0.05; done; echo two"`
		}
	});
	const job = await postJson(`${cluster.service.api}/queue/new-job/`, {
		job_type_id: type.id,
		job_data: { input_data: [], output_data: [] }
	});
	const exeId = job.job_exes[0].id;
	await waitForCount(
		cluster.db,
		`SELECT count(*) AS n FROM job_exe WHERE id = ${exeId} AND status = 'RUNNING'`,
		1,
		30000
	);
	const repl = startRepl();
	try {
		await until("the REPL joined", () =>
			repl.output().includes("joined the cluster as operator")
		);
		repl.proc.stdin!.write("info\n");
		// printed in chunks: the transporter's line comes after "Broker options"
		await until("info printed, with the operator's NATS user", () =>
			/transporter\s+: "NATS .*\(user operator/.test(repl.output())
		);
		const password = cluster.credentials("operator").pass;
		expect(repl.output()).not.toContain(password);
		repl.proc.stdin!.write(`logs ${exeId} -f\n`);
		await until("the first line followed", () => /^(scale \$ )?one$/m.test(repl.output()));
		expect(repl.output()).not.toMatch(/^two$/m);
		fs.writeFileSync(flag, "");
		await until("the end of the execution", () =>
			repl.output().includes(`--- execution ${exeId} ended ---`)
		);
		expect(repl.output()).toMatch(/one\ntwo\n--- execution \d+ ended ---/);
		expect(cluster.violations()).toEqual([]);
	} finally {
		repl.proc.stdin!.write("quit\n");
		await new Promise(r => {
			const t = setTimeout(() => repl.proc.kill("SIGKILL"), 10000);
			repl.proc.once("exit", () => r(clearTimeout(t)));
		});
	}
}, 120000);
