import crypto from "crypto";
import fs from "fs";
import path from "path";
import Docker from "dockerode";
import { NodeAgent } from "../../lib/agent/agent";
import { DEFAULT_CONTAINER_SETTINGS, type ContainerSettings } from "../../lib/agent/containers";
import type { ExecutionFinished, ExecutionSpec } from "../../lib/documents/agent-protocol";
import { removeTempDirs, spec, stagedFile, tempDir, type SpecOptions } from "../fixtures/agent";
import { requireTestDocker } from "../helpers/dockerd";

/**
 * Container jobs on a real Docker engine (the one jest's globalSetup started, with the busybox
 * image it built): the node agent as the service runs it, without Moleculer.
 */

const engine = requireTestDocker();
const docker = new Docker({ socketPath: engine.socket });

interface TestAgent {
	agent: NodeAgent;
	node: string;
	workDir: string;
	delivered(id: number): Promise<ExecutionFinished>;
}

const agents: TestAgent[] = [];

function startAgent(settings: Partial<ContainerSettings> = {}, node?: string): TestAgent {
	const reports = new Map<number, ExecutionFinished>();
	const waiters = new Map<number, (report: ExecutionFinished) => void>();
	const id = node ?? `node-${crypto.randomBytes(4).toString("hex")}`;
	const workDir = tempDir("containers");
	fs.chmodSync(workDir, 0o755);
	const agent = new NodeAgent({
		agentId: `agent-${id}`,
		node: id,
		workDir,
		launchers: 1,
		killGraceMs: 1000,
		containers: {
			...DEFAULT_CONTAINER_SETTINGS,
			host: engine.host,
			network: "none",
			...settings
		},
		async sendSteps() {},
		async deliver(report) {
			reports.set(report.jobExeId, report);
			waiters.get(report.jobExeId)?.(report);
		}
	});
	const made: TestAgent = {
		agent,
		node: id,
		workDir,
		delivered: exeId =>
			reports.has(exeId)
				? Promise.resolve(reports.get(exeId)!)
				: new Promise(resolve => waiters.set(exeId, resolve))
	};
	agents.push(made);
	return made;
}

function containerSpec(options: Partial<SpecOptions> & { args: string }): ExecutionSpec {
	return spec({
		command: "/bin/sh",
		commandArguments: options.args,
		...options,
		jobType: {
			usesDocker: true,
			dockerImage: engine.image,
			dockerPrivileged: false,
			...options.jobType
		}
	});
}

async function run(a: TestAgent, s: ExecutionSpec): Promise<ExecutionFinished> {
	expect(a.agent.run(s)).toBe("started");
	return a.delivered(s.jobExeId);
}

/** The containers of a node (by the label the agent sets), running or not. */
function containersOf(node: string): Promise<Docker.ContainerInfo[]> {
	return docker.listContainers({ all: true, filters: { label: [`scale.node=${node}`] } });
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
	const deadline = Date.now() + ms;
	while (!(await check())) {
		if (Date.now() > deadline) throw new Error("timed out");
		await new Promise(r => setTimeout(r, 50));
	}
}

afterAll(async () => {
	for (const a of agents) await a.agent.stop();
	// no path leaves a container behind
	for (const a of agents) expect(await containersOf(a.node)).toEqual([]);
	removeTempDirs();
});

describe("a container job", () => {
	it("runs in its image as the execution's own user, with its input staged and its product stored", async () => {
		const a = startAgent();
		const ws = tempDir("ws");
		const s = containerSpec({
			args: "-c 'id -u; tr a-z A-Z < ${i} > ${job_output_dir}/up.txt; echo ARTIFACT:result:${job_output_dir}/up.txt; echo to-stderr >&2'",
			inputData: [{ name: "i", type: "file" }],
			outputData: [{ name: "result" }],
			inputs: { i: { files: [stagedFile(tempDir("src"), "in.txt", "abc")] } },
			workspaceDir: ws
		});
		const report = await run(a, s);
		expect(report).toMatchObject({ status: "COMPLETED", exitCode: 0, errorName: null });
		const [uid, artifact] = report.stdout.trim().split("\n");
		expect(Number(uid)).toBeGreaterThanOrEqual(1_900_000_000);
		expect(artifact).toMatch(/^ARTIFACT:result:/);
		expect(report.stderr).toBe("to-stderr\n");
		expect(report.products).toEqual([
			expect.objectContaining({ outputName: "result", filePath: "my-job/1.0.0/42/up.txt" })
		]);
		expect(fs.readFileSync(path.join(ws, "my-job/1.0.0/42/up.txt"), "utf8")).toBe("ABC");
		expect(await containersOf(a.node)).toEqual([]);
	});

	it("reads a partial input in its bucket's mount, bound read-only at the same path", async () => {
		const a = startAgent();
		const ws = tempDir("ws");
		// a directory stands in for the s3 workspace's host_path, where the nodes mount its bucket
		const mount = tempDir("bucket-mount");
		fs.chmodSync(mount, 0o755);
		fs.mkdirSync(path.join(mount, "in"), { mode: 0o755 });
		fs.writeFileSync(path.join(mount, "in", "big.txt"), "abc", { mode: 0o644 });
		const s = containerSpec({
			args: "-c 'tr a-z A-Z < ${i} > ${job_output_dir}/up.txt; echo ARTIFACT:result:${job_output_dir}/up.txt; readlink ${i}; if echo x >> ${i}; then echo writable; else echo read-only; fi'",
			inputData: [{ name: "i", type: "file", partial: true }],
			outputData: [{ name: "result" }],
			inputs: {
				i: {
					files: [
						{
							fileId: 1,
							hostPath: "s3://bucket/in/big.txt",
							// no store answers there: the file is read in the mount or not at all
							s3: {
								bucket: "bucket",
								key: "in/big.txt",
								endpoint: "http://127.0.0.1:9"
							},
							mountRoot: mount,
							fileName: "big.txt",
							mediaType: "text/plain",
							size: 3
						}
					]
				}
			},
			workspaceDir: ws
		});
		const report = await run(a, s);
		expect(report).toMatchObject({ status: "COMPLETED", exitCode: 0, errorName: null });
		const [, link, written] = report.stdout.trim().split("\n");
		expect(link).toBe(path.join(fs.realpathSync(mount), "in", "big.txt"));
		expect(written).toBe("read-only");
		expect(fs.readFileSync(path.join(ws, "my-job/1.0.0/42/up.txt"), "utf8")).toBe("ABC");
		expect(fs.readFileSync(path.join(mount, "in", "big.txt"), "utf8")).toBe("abc");
	});

	it("runs as its image's own user where the agent says so, and stores its product", async () => {
		const a = startAgent({ imageUser: true });
		const ws = tempDir("ws");
		const report = await run(
			a,
			containerSpec({
				args: "-c 'id -u; echo x > ${job_output_dir}/x.txt; echo ARTIFACT:result:${job_output_dir}/x.txt'",
				outputData: [{ name: "result" }],
				workspaceDir: ws
			})
		);
		expect(report).toMatchObject({ status: "COMPLETED", errorDetail: null });
		// the busybox image's user is root
		expect(report.stdout.split("\n")[0]).toBe("0");
		expect(fs.readFileSync(path.join(ws, "my-job/1.0.0/42/x.txt"), "utf8")).toBe("x\n");
	});

	it("fails with its exit code for the control plane to map, its stderr kept", async () => {
		const a = startAgent();
		const report = await run(a, containerSpec({ args: "-c 'echo broken >&2; exit 3'" }));
		expect(report).toMatchObject({ status: "FAILED", exitCode: 3, errorName: null });
		expect(report.stderr).toBe("broken\nscale: the process exited with code 3\n");
	});

	it("is limited to its cpus, visible inside as a CFS quota", async () => {
		const a = startAgent();
		const report = await run(
			a,
			containerSpec({
				args: "-c 'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max'",
				resources: { cpus: 0.5 }
			})
		);
		expect(report.status).toBe("COMPLETED");
		const figures = report.stdout.trim().split(/\s+/).map(Number);
		expect(figures[0] / figures[1]).toBeCloseTo(0.5, 5);
	});

	it("killed at its memory limit fails with memory-limit, saying so", async () => {
		const a = startAgent();
		const report = await run(
			a,
			containerSpec({
				args: `-c 'x=$(head -c 200000000 /dev/zero | tr "\\\\0" a); echo survived'`,
				resources: { mem: 32 }
			})
		);
		expect(report).toMatchObject({ status: "FAILED", errorName: "memory-limit" });
		expect(report.errorDetail).toMatch(/killed at its memory limit of 32 MiB \(mem_required\)/);
		expect(report.stderr).toMatch(/scale: the container was killed at its memory limit/);
		expect(report.stdout).not.toContain("survived");
	});

	it("has no network when the agent says none", async () => {
		const a = startAgent({ network: "none" });
		const report = await run(a, containerSpec({ args: "-c 'ls /sys/class/net'" }));
		expect(report.stdout.trim()).toBe("lo");
	});

	it("past its timeout is stopped and removed, failing with timeout", async () => {
		const a = startAgent();
		const started = Date.now();
		const report = await run(a, containerSpec({ args: "-c 'sleep 30'", timeout: 1 }));
		expect(report).toMatchObject({ status: "FAILED", errorName: "timeout" });
		expect(Date.now() - started).toBeLessThan(10_000);
		expect(await containersOf(a.node)).toEqual([]);
	});

	it("canceled is stopped and removed, ending CANCELED", async () => {
		const a = startAgent();
		const s = containerSpec({ args: "-c 'echo started; sleep 30'" });
		expect(a.agent.run(s)).toBe("started");
		await until(async () => (await containersOf(a.node)).some(c => c.State === "running"));
		expect(a.agent.cancel(s.jobExeId)).toBe(true);
		const report = await a.delivered(s.jobExeId);
		expect(report.status).toBe("CANCELED");
		expect(await containersOf(a.node)).toEqual([]);
	});

	it("runs privileged only where the agent allows it", async () => {
		const privileged = { dockerPrivileged: true };
		const args = "-c 'grep CapEff /proc/self/status'";
		const refused = await run(startAgent(), containerSpec({ args, jobType: privileged }));
		expect(refused).toMatchObject({ status: "FAILED", errorName: "docker-task-launch" });
		expect(refused.errorDetail).toMatch(/privileged containers.*AGENT_DOCKER_PRIVILEGED/);
		const allowed = await run(
			startAgent({ privileged: true }),
			containerSpec({ args, jobType: privileged })
		);
		// past the agent's refusal, to the engine: a machine whose own capabilities are bounded
		// (this kind of sandbox) cannot give a container all of them, and runc says so
		if (allowed.status === "COMPLETED")
			expect(allowed.stdout).toMatch(/^CapEff:\s+0*1?f{9,}\s*$/m);
		else expect(allowed.errorDetail).toMatch(/^the container could not be started: .*caps/);
	});

	it("of an image the node lacks fails with docker-task-launch when the agent does not pull", async () => {
		const a = startAgent();
		const report = await run(
			a,
			containerSpec({ args: "-c true", jobType: { dockerImage: "scale-no-such-image:9" } })
		);
		expect(report).toMatchObject({ status: "FAILED", errorName: "docker-task-launch" });
		expect(report.errorDetail).toBe(
			"the image scale-no-such-image:9 is not on this node, and this agent does not pull images (AGENT_DOCKER_PULL)"
		);
		const pulling = await run(
			startAgent({ pull: true }),
			containerSpec({ args: "-c true", jobType: { dockerImage: "scale-no-such-image:9" } })
		);
		expect(pulling).toMatchObject({ status: "FAILED", errorName: "docker-task-launch" });
		expect(pulling.errorDetail).toMatch(/^the image scale-no-such-image:9 could not be pulled/);
	});

	it("fails with docker-task-launch when no engine answers", async () => {
		const a = startAgent({ host: "unix:///nonexistent/docker.sock" });
		const report = await run(a, containerSpec({ args: "-c true" }));
		expect(report).toMatchObject({ status: "FAILED", errorName: "docker-task-launch" });
		expect(report.errorDetail).toMatch(/^no Docker engine answers on this node/);
	});
});

describe("the agent's engine", () => {
	it("lists its images for the control plane", async () => {
		const inventory = await startAgent().agent.containers.inventory();
		expect(inventory).toMatchObject({ engine: true, pull: false, privileged: false });
		expect(inventory.images).toContain(engine.image);
		const none = await startAgent({
			host: "unix:///nonexistent/docker.sock",
			pull: true
		}).agent.containers.inventory();
		expect(none).toEqual({ engine: false, images: [], pull: true, privileged: false });
	});

	it("removes the containers an earlier run of the agent left, by their node label", async () => {
		const first = startAgent();
		const s = containerSpec({ args: "-c 'sleep 30'" });
		expect(first.agent.run(s)).toBe("started");
		await until(async () => (await containersOf(first.node)).some(c => c.State === "running"));
		// another agent of the same node, as after a crash: the container is not its own to keep
		const again = startAgent({}, first.node);
		expect(await again.agent.containers.removeLeftovers()).toBe(1);
		expect(await containersOf(first.node)).toEqual([]);
		// the first agent hears its container end: the execution fails, nothing is left
		const report = await first.delivered(s.jobExeId);
		expect(report.status).toBe("FAILED");
	});
});
