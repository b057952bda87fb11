import fs from "fs";
import path from "path";
import { NodeAgent } from "../../lib/agent/agent";
import type { ExecutionFinished, ExecutionSpec } from "../../lib/documents/agent-protocol";
import { processesIn, removeTempDirs, spec, tempDir } from "../fixtures/agent";

/**
 * A process job tries each way out of its containment, as an attacker's job would, and fails to:
 * the agent (root, as a node agent runs) gives each execution a uid of its own and a PID
 * namespace of its own, launchers with an environment of nothing but PATH, and reads and
 * copies only the files the job itself wrote in its task directory.
 */

if (process.geteuid?.() !== 0)
	throw new Error("the containment tests need root, as the node agent has (CI runs as root)");

const SECRET = "nats://scale:s3cret-in-the-agents-environment@127.0.0.1:4222";
let agent: NodeAgent;
let workDir: string;
const reports = new Map<number, ExecutionFinished>();
const waiters = new Map<number, (report: ExecutionFinished) => void>();

beforeAll(() => {
	// what the agent's environment holds (TRANSPORTER with its password, as `npm run agent`)
	process.env.SCALE_TEST_TRANSPORTER = SECRET;
	workDir = tempDir("contained");
	fs.chmodSync(workDir, 0o755);
	agent = new NodeAgent({
		agentId: "agent-contained",
		node: "node-contained",
		workDir,
		launchers: 1,
		launcher: "native",
		killGraceMs: 500,
		async sendSteps() {},
		async deliver(report) {
			reports.set(report.jobExeId, report);
			waiters.get(report.jobExeId)?.(report);
		}
	});
});

afterAll(async () => {
	await agent.stop();
	delete process.env.SCALE_TEST_TRANSPORTER;
	removeTempDirs();
});

function delivered(id: number): Promise<ExecutionFinished> {
	return reports.has(id)
		? Promise.resolve(reports.get(id)!)
		: new Promise(resolve => waiters.set(id, resolve));
}

function shell(script: string, more: Partial<Parameters<typeof spec>[0]> = {}): ExecutionSpec {
	return spec({ command: "/bin/sh", commandArguments: `-c '${script}'`, ...more });
}

async function run(s: ExecutionSpec): Promise<ExecutionFinished> {
	expect(agent.run(s)).toBe("started");
	return delivered(s.jobExeId);
}

describe("a process job", () => {
	it("runs as a uid of its own, neither root nor the agent's", async () => {
		const a = await run(shell("id -u; id -g; id -G"));
		const b = await run(shell("id -u"));
		const [uid, gid, groups] = a.stdout.trim().split("\n");
		expect(Number(uid)).toBeGreaterThanOrEqual(1_900_000_000);
		expect(gid).toBe(uid);
		expect(groups).toBe(uid);
		expect(b.stdout.trim()).not.toBe(uid);
	});

	it("cannot read the environment of any of its ancestors", async () => {
		// up the real ancestry, by the host's pids (/proc/self/status), trying each environ
		const report = await run(
			shell(
				// /proc is the host's: /proc/self (awk's own) is where the host's pids begin
				'p=$(awk "/^PPid:/ {print \\$2}" /proc/self/status); ' +
					'while [ "$p" -gt 1 ]; do p=$(awk "/^PPid:/ {print \\$2}" /proc/$p/status); ' +
					'echo "ancestor $p"; cat /proc/$p/environ 2>/dev/null | tr "\\0" "\\n"; done; ' +
					"env"
			)
		);
		expect(report.status).toBe("COMPLETED");
		// it did walk up to the agent (this process) and beyond
		expect(report.stdout).toContain(`ancestor ${process.pid}\n`);
		expect(report.stdout).not.toContain("s3cret");
		expect(report.stdout).not.toContain("SCALE_TEST_TRANSPORTER");
	});

	it("cannot read /etc/shadow, nor write outside its task directory", async () => {
		const outside = tempDir("outside");
		fs.chmodSync(outside, 0o755);
		const report = await run(
			shell(
				`cat /etc/shadow; touch ${outside}/x; touch ${workDir}/x; echo x > ${workDir}/slave_id; ` +
					`touch ${workDir}/tasks/x; touch $HOME/mine && echo wrote-own`
			)
		);
		expect(report.stderr).toMatch(
			/cat: can't open '\/etc\/shadow': Permission denied|cat: \/etc\/shadow: Permission denied/
		);
		expect(report.stdout).toBe("wrote-own\n");
		expect(fs.readdirSync(outside)).toEqual([]);
		expect(fs.existsSync(path.join(workDir, "x"))).toBe(false);
		expect(fs.existsSync(path.join(workDir, "tasks", "x"))).toBe(false);
	});

	it("cannot enter the task directory of another job", async () => {
		const victim = shell("echo started; sleep 30");
		expect(agent.run(victim)).toBe("started");
		const victimDir = path.join(workDir, "tasks", String(victim.jobExeId));
		const deadline = Date.now() + 5000;
		while (processesIn(victimDir).length === 0 && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 20));
		const attack = await run(
			shell(
				`ls ${victimDir} || echo cannot-list; echo evil > ${victimDir}/outputs/x || echo cannot-write; ` +
					`kill -9 -1; kill -9 ${processesIn(victimDir)[0]} || echo cannot-kill`
			)
		);
		expect(attack.stdout).toBe("cannot-list\ncannot-write\ncannot-kill\n");
		expect(processesIn(victimDir)).not.toEqual([]);
		expect(fs.existsSync(path.join(victimDir, "outputs", "x"))).toBe(false);
		expect(agent.cancel(victim.jobExeId)).toBe(true);
		expect((await delivered(victim.jobExeId)).status).toBe("CANCELED");
	});

	it("leaves nothing running once it ends, `setsid` daemons included", async () => {
		const report = await run(
			shell(
				'setsid sleep 301.5 & (trap "" HUP TERM; nohup sleep 302.5 >/dev/null 2>&1 &); echo launched'
			)
		);
		expect(report).toMatchObject({ status: "COMPLETED", stdout: "launched\n" });
		const survivors = () =>
			fs
				.readdirSync("/proc")
				.filter(name => /^\d+$/.test(name))
				.filter(name => {
					try {
						return /sleep\0(301|302)\.5/.test(
							fs.readFileSync(`/proc/${name}/cmdline`, "utf8")
						);
					} catch {
						return false;
					}
				});
		expect(survivors()).toEqual([]);
	});

	it("cannot publish a file that is not its own: a symbolic or a hard link", async () => {
		const ws = tempDir("ws");
		const product = (script: string) =>
			run(
				shell(script, {
					outputData: [{ name: "result" }],
					workspaceDir: ws
				})
			);
		const symlink = await product(
			"ln -s /etc/shadow $HOME/outputs/shadow; echo ARTIFACT:result:$HOME/outputs/shadow"
		);
		expect(symlink).toMatchObject({ status: "FAILED", errorName: null, exitCode: 0 });
		expect(symlink.errorDetail).toMatch(/leads outside the task directory/);
		const hard = await product(
			"ln /etc/passwd $HOME/outputs/passwd || echo refused >&2; echo ARTIFACT:result:$HOME/outputs/passwd"
		);
		expect(hard.status).toBe("FAILED");
		expect(hard.stderr).toMatch(/refused/);
		const twoNames = await product(
			"echo mine > $HOME/outputs/a; ln $HOME/outputs/a $HOME/outputs/b; echo ARTIFACT:result:$HOME/outputs/b"
		);
		expect(twoNames.status).toBe("FAILED");
		expect(twoNames.errorDetail).toMatch(/is a hard link/);
		expect(fs.readdirSync(ws)).toEqual([]);
	});

	it("cannot make the agent read or write through its log files", async () => {
		const report = await run(
			shell(
				"rm -f $HOME/stdout $HOME/stderr; ln -s /etc/shadow $HOME/stdout; ln -s /etc/passwd $HOME/stderr; exit 4"
			)
		);
		const passwd = fs.readFileSync("/etc/passwd", "utf8");
		expect(report.status).toBe("FAILED");
		expect(report.stdout).toBe("[stdout was replaced by the task: not read]\n");
		expect(report.stdout).not.toMatch(/root:/);
		// the failure's note did not go into /etc/passwd through the link
		expect(passwd).not.toContain("scale: the process exited");
		expect(report.stderr).toContain("scale: the process exited with code 4");
	});

	it("runs where it can reach its directory when the work directory is under a closed folder", async () => {
		const closed = tempDir("closed");
		fs.chmodSync(closed, 0o700);
		const warnings: string[] = [];
		const other = new NodeAgent({
			agentId: "agent-closed",
			node: "node-closed",
			workDir: path.join(closed, "data", "agent"),
			launchers: 1,
			launcher: "native",
			async sendSteps() {},
			async deliver(report) {
				reports.set(report.jobExeId, report);
				waiters.get(report.jobExeId)?.(report);
			},
			warn: message => warnings.push(message)
		});
		try {
			expect(other.taskRoot).toMatch(/^\/var\/lib\/scale-agent\/[0-9a-f]{12}$/);
			expect(warnings).toEqual([
				expect.stringContaining(`${closed} cannot be passed through`)
			]);
			const s = shell("echo reached > $HOME/outputs/x; cat $HOME/outputs/x");
			expect(other.run(s)).toBe("started");
			expect(await delivered(s.jobExeId)).toMatchObject({
				status: "COMPLETED",
				stdout: "reached\n"
			});
		} finally {
			await other.stop();
			fs.rmSync(other.taskRoot, { recursive: true, force: true });
		}
	});
});
