import fs from "fs";
import path from "path";
import { NodeAgent, type AgentOptions } from "../../../lib/agent/agent";
import { taskDirOf } from "../../../lib/agent/execution";
import type { ExecutionFinished, ExecutionStep, Rank } from "../../../lib/documents/agent-protocol";
import {
	job,
	makeJobsExecutable,
	removeTempDirs,
	spec,
	stagedFile,
	tempDir,
	processesIn,
	sharedDir
} from "../../fixtures/agent";

beforeAll(() => makeJobsExecutable());
afterAll(() => removeTempDirs());

interface Recorder {
	agent: NodeAgent;
	workDir: string;
	events: string[];
	reports: ExecutionFinished[];
	/** resolves when the report of `id` is delivered */
	delivered(id: number): Promise<ExecutionFinished>;
	/** make deliveries wait until release() */
	hold(): void;
	release(): void;
}

function makeAgent(options: Partial<AgentOptions> = {}): Recorder {
	const workDir = tempDir("agent");
	const events: string[] = [];
	const reports: ExecutionFinished[] = [];
	const waiters = new Map<number, (r: ExecutionFinished) => void>();
	let gate: Promise<void> | null = null;
	let open: () => void = () => undefined;
	const agent = new NodeAgent({
		agentId: "agent-x",
		node: "node-x",
		workDir,
		launchers: 1,
		killGraceMs: 300,
		stepDelayMs: 20,
		async sendSteps(steps: ExecutionStep[]) {
			// a slow peer: steps must still arrive in order, all before the report
			await new Promise(r => setTimeout(r, 5));
			for (const step of steps) events.push(`${step.jobExeId} ${step.step} ${step.event}`);
		},
		async deliver(report: ExecutionFinished) {
			if (gate) await gate;
			events.push(`${report.jobExeId} finished ${report.status}`);
			reports.push(report);
			waiters.get(report.jobExeId)?.(report);
		},
		...options
	});
	return {
		agent,
		workDir,
		events,
		reports,
		delivered: id =>
			new Promise(resolve => {
				const done = reports.find(r => r.jobExeId === id);
				if (done) resolve(done);
				else waiters.set(id, resolve);
			}),
		hold() {
			gate = new Promise(r => (open = r));
		},
		release() {
			gate = null;
			open();
		}
	};
}

async function until(check: () => boolean, ms = 5000) {
	const deadline = Date.now() + ms;
	while (!check()) {
		if (Date.now() > deadline) throw new Error("timed out");
		await new Promise(r => setTimeout(r, 20));
	}
}

it("runs an execution once, however often it is asked", async () => {
	const r = makeAgent();
	try {
		// tasks run as users of their own: this one may write here
		const counter = path.join(sharedDir("count"), "runs");
		const s = spec({ command: "/bin/sh", commandArguments: `-c 'echo run >> ${counter}'` });
		expect(r.agent.run(s)).toBe("started");
		expect(r.agent.run(s)).toBe("known");
		await r.delivered(s.jobExeId);
		expect(r.agent.run(s)).toBe("known");
		await new Promise(res => setTimeout(res, 100));
		expect(fs.readFileSync(counter, "utf8")).toBe("run\n");
		expect(r.reports).toHaveLength(1);
	} finally {
		await r.agent.stop();
	}
});

it("launches its backlog in rank order, not in the order the runs came", async () => {
	// a slow launcher (100 ms a launch): a backlog builds; 16 go to it at once, the rest wait here
	const r = makeAgent({ slowLaunchMs: 100 });
	try {
		const late = Array.from({ length: 20 }, (_, i) => ({
			...spec({ command: "/bin/true", commandArguments: "" }),
			rank: [100, 2000 + i, 10 + i] as Rank
		}));
		for (const s of late) r.agent.run(s);
		// the first has run: 16 more are with the launcher
		await until(() => r.reports.length > 0);
		// a recipe's next job, queued with its recipe (earlier): placed after, ranked ahead
		const next = {
			...spec({ command: "/bin/true", commandArguments: "" }),
			rank: [100, 1000, 99] as Rank
		};
		r.agent.run(next);
		const reports = await Promise.all([...late, next].map(s => r.delivered(s.jobExeId)));
		const started = (report: ExecutionFinished) => report.steps.main!.started!;
		const order = [...reports]
			.sort((a, b) => started(a).localeCompare(started(b)))
			.map(report => report.jobExeId);
		// behind only the 17 launched or handed to the launcher before it came (in the order
		// their staging ended); the rest after it, in rank order
		const at = order.indexOf(next.jobExeId);
		expect(at).toBeLessThanOrEqual(17);
		const rest = order.slice(at + 1);
		expect(rest.length).toBeGreaterThanOrEqual(3);
		expect(rest).toEqual([...rest].sort((a, b) => a - b));
	} finally {
		await r.agent.stop();
	}
});

it("sends the steps of a running execution in order before its result", async () => {
	const r = makeAgent();
	try {
		const s = spec({ command: "/bin/sleep", commandArguments: "0.3" });
		r.agent.run(s);
		const report = await r.delivered(s.jobExeId);
		const id = s.jobExeId;
		// pre and main's start were sent while it slept; the rest ride with the report
		expect(r.events).toEqual([
			`${id} pre started`,
			`${id} pre completed`,
			`${id} main started`,
			`${id} finished COMPLETED`
		]);
		expect(Object.keys(report.steps).sort()).toEqual(["main", "post", "pre"]);
		expect(report.steps.main).toMatchObject({ exitCode: 0 });
		expect(report.commandArguments).toBe("0.3");
	} finally {
		await r.agent.stop();
	}
});

it("sends no steps of an execution that ends before they go: its report carries them", async () => {
	const r = makeAgent({ stepDelayMs: 5000 });
	try {
		const s = spec({ command: "/bin/true", commandArguments: "a b" });
		r.agent.run(s);
		const report = await r.delivered(s.jobExeId);
		expect(r.events).toEqual([`${s.jobExeId} finished COMPLETED`]);
		for (const step of ["pre", "main", "post"] as const) {
			expect(report.steps[step]!.started).toMatch(/^\d{4}-/);
			expect(report.steps[step]!.completed).toMatch(/^\d{4}-/);
			expect(report.steps[step]!.exitCode).toBe(0);
		}
		expect(report.commandArguments).toBe("a b");
	} finally {
		await r.agent.stop();
	}
});

it("still reports the result when the steps cannot be reported", async () => {
	const warnings: string[] = [];
	const r = makeAgent({
		sendSteps: () => Promise.reject(new Error("no scheduler")),
		warn: m => warnings.push(m)
	});
	try {
		const s = spec({ command: "/bin/sleep", commandArguments: "0.2" });
		r.agent.run(s);
		expect((await r.delivered(s.jobExeId)).status).toBe("COMPLETED");
		// the step events go in batches: one of three, or (under load) more batches of fewer
		const pattern = new RegExp(
			`^(\\d+) step events of executions ${s.jobExeId} were not reported: no scheduler$`
		);
		for (const warning of warnings) expect(warning).toMatch(pattern);
		const counted = warnings.map(w => Number(pattern.exec(w)![1]));
		expect(counted.reduce((a, b) => a + b, 0)).toBe(3);
	} finally {
		await r.agent.stop();
	}
});

it("reuses a completed execution's emptied task directory for the next one", async () => {
	const r = makeAgent();
	try {
		const first = spec({ command: "/bin/echo", commandArguments: "first" });
		r.agent.run(first);
		expect((await r.delivered(first.jobExeId)).stdout).toBe("first\n");
		const spare = path.join(r.workDir, "spare");
		await until(() => fs.existsSync(spare) && fs.readdirSync(spare).length === 1);
		expect(fs.existsSync(taskDirOf(r.workDir, first.jobExeId))).toBe(false);

		const second = spec({ command: "/bin/echo", commandArguments: "second" });
		r.agent.run(second);
		const report = await r.delivered(second.jobExeId);
		expect(report).toMatchObject({ status: "COMPLETED", stdout: "second\n" });
		// taken for the second, then kept again
		await until(() => fs.readdirSync(spare).length === 1);
		expect(fs.readdirSync(path.join(r.workDir, "tasks"))).toEqual([]);
	} finally {
		await r.agent.stop();
	}
});

it("holds an execution until its result is acknowledged, then cleans up", async () => {
	const r = makeAgent();
	try {
		const ws = tempDir("ws");
		const input = stagedFile(tempDir("src"), "in.txt", "abc");
		const ok = spec({
			command: job("write-output.sh"),
			commandArguments: "${i} ${job_output_dir}",
			inputData: [{ name: "i", type: "file" }],
			outputData: [{ name: "result" }],
			inputs: { i: { files: [input] } },
			workspaceDir: ws
		});
		const bad = spec({ command: job("exit-3.sh"), commandArguments: "" });
		r.hold();
		r.agent.run(ok);
		r.agent.run(bad);
		expect(r.agent.running().sort()).toEqual([ok.jobExeId, bad.jobExeId].sort());
		await new Promise(res => setTimeout(res, 300));
		// finished, not yet acknowledged: still held (the heartbeat lists them)
		expect(r.agent.running().sort()).toEqual([ok.jobExeId, bad.jobExeId].sort());
		const logs = await r.agent.logs(bad.jobExeId);
		expect(logs).toEqual({
			stdout: "about to fail\n",
			stderr: "something went wrong\nscale: the process exited with code 3\n",
			is_finished: true
		});
		expect(r.agent.cancel(bad.jobExeId)).toBe(false);
		r.release();
		await r.delivered(ok.jobExeId);
		await r.delivered(bad.jobExeId);
		await until(() => r.agent.running().length === 0);
		expect(await r.agent.logs(ok.jobExeId)).toBeNull();
		// completed: its task directory goes; failed: kept for debugging, without its inputs
		await until(() => !fs.existsSync(taskDirOf(r.workDir, ok.jobExeId)));
		const kept = taskDirOf(r.workDir, bad.jobExeId);
		await until(() => !fs.existsSync(path.join(kept, "inputs")));
		expect(fs.readdirSync(kept).sort()).toEqual(["outputs", "stderr", "stdout"]);
		expect(fs.readFileSync(path.join(ws, "my-job/1.0.0/42/result.txt"), "utf8")).toBe("ABC");
	} finally {
		r.release();
		await r.agent.stop();
	}
});

it("cancels a running execution", async () => {
	const r = makeAgent();
	try {
		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		r.agent.run(s);
		await until(() => fs.existsSync(path.join(taskDirOf(r.workDir, s.jobExeId), "stdout")));
		await new Promise(res => setTimeout(res, 100));
		expect(r.agent.cancel(s.jobExeId)).toBe(true);
		expect((await r.delivered(s.jobExeId)).status).toBe("CANCELED");
		expect(r.agent.cancel(s.jobExeId)).toBe(false);
		expect(r.agent.cancel(999999)).toBe(false);
	} finally {
		await r.agent.stop();
	}
});

it("does not start an execution whose cancel came first, and reports it CANCELED", async () => {
	const r = makeAgent();
	try {
		// tasks run as users of their own: this one may write here
		const counter = path.join(sharedDir("count"), "runs");
		const s = spec({ command: "/bin/sh", commandArguments: `-c 'echo run >> ${counter}'` });
		// the cancel overtook the run: nothing to kill yet
		expect(r.agent.cancel(s.jobExeId)).toBe(false);
		r.hold();
		expect(r.agent.run(s)).toBe("canceled");
		// held until the report is acknowledged, as any other
		expect(r.agent.running()).toEqual([s.jobExeId]);
		expect(r.agent.run(s)).toBe("known");
		expect(r.agent.cancel(s.jobExeId)).toBe(false);
		r.release();
		const report = await r.delivered(s.jobExeId);
		expect(report).toEqual({
			jobExeId: s.jobExeId,
			agentId: "agent-x",
			status: "CANCELED",
			exitCode: null,
			errorName: null,
			errorDetail: "canceled before it reached the agent: not started",
			products: [],
			resultsManifest: null,
			parseResults: [],
			stdout: "",
			stderr: "",
			steps: {}
		});
		await until(() => r.agent.running().length === 0);
		expect(r.agent.run(s)).toBe("known");
		await new Promise(res => setTimeout(res, 100));
		expect(fs.existsSync(counter)).toBe(false);
		expect(fs.existsSync(taskDirOf(r.workDir, s.jobExeId))).toBe(false);
		expect(r.events).toEqual([`${s.jobExeId} finished CANCELED`]);
	} finally {
		r.release();
		await r.agent.stop();
	}
});

it("forgets a cancel of an execution it never had after cancelMemoryMs", async () => {
	const r = makeAgent({ cancelMemoryMs: 50 });
	try {
		const s = spec({ command: "/bin/true", commandArguments: "" });
		expect(r.agent.cancel(s.jobExeId)).toBe(false);
		await new Promise(res => setTimeout(res, 100));
		expect(r.agent.run(s)).toBe("started");
		expect((await r.delivered(s.jobExeId)).status).toBe("COMPLETED");
	} finally {
		await r.agent.stop();
	}
});

it("cancels the executions the control plane has ended, telling which were news", async () => {
	const r = makeAgent();
	try {
		const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
		const other = spec({ command: job("sleep.sh"), commandArguments: "30" });
		r.agent.run(s);
		r.agent.run(other);
		await until(() => fs.existsSync(path.join(taskDirOf(r.workDir, s.jobExeId), "stdout")));
		expect(r.agent.cancel(other.jobExeId)).toBe(true);
		// the one canceled already is no news; an id never seen is remembered, not news
		expect(r.agent.cancelEnded([s.jobExeId, other.jobExeId, 999998])).toEqual([s.jobExeId]);
		expect(r.agent.cancelEnded([s.jobExeId])).toEqual([]);
		expect((await r.delivered(s.jobExeId)).status).toBe("CANCELED");
		expect((await r.delivered(other.jobExeId)).status).toBe("CANCELED");
		expect(
			r.agent.run(spec({ command: "/bin/true", commandArguments: "", jobExeId: 999998 }))
		).toBe("canceled");
	} finally {
		await r.agent.stop();
	}
});

it("prunes kept task directories once old enough", async () => {
	const r = makeAgent({ keepFailedMs: 60_000 });
	try {
		const tasks = path.join(r.workDir, "tasks");
		for (const id of ["5", "6"])
			fs.mkdirSync(path.join(tasks, id, "outputs"), { recursive: true });
		const old = new Date(Date.now() - 120_000);
		fs.utimesSync(path.join(tasks, "5"), old, old);
		await r.agent.prune();
		expect(fs.readdirSync(tasks)).toEqual(["6"]);
	} finally {
		await r.agent.stop();
	}
});

it("stops: terminates running processes and reports nothing more", async () => {
	const r = makeAgent();
	const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
	r.agent.run(s);
	const stdout = path.join(taskDirOf(r.workDir, s.jobExeId), "stdout");
	await until(() => fs.existsSync(stdout) && /pid \d+/.test(fs.readFileSync(stdout, "utf8")));
	// the task's own pid may be one of its PID namespace: it is found by its directory
	const taskDir = taskDirOf(r.workDir, s.jobExeId);
	expect(processesIn(taskDir)).not.toEqual([]);
	const started = Date.now();
	await r.agent.stop();
	expect(Date.now() - started).toBeLessThan(2000);
	expect(processesIn(taskDir)).toEqual([]);
	expect(r.reports).toEqual([]);
	expect(r.agent.run(spec({ command: "/bin/true", commandArguments: "" }))).toBe("stopping");
});

describe("draining", () => {
	/** waits until the execution's process has written its pid (it runs) */
	async function running(r: Recorder, id: number) {
		const stdout = path.join(taskDirOf(r.workDir, id), "stdout");
		await until(() => fs.existsSync(stdout) && /pid \d+/.test(fs.readFileSync(stdout, "utf8")));
	}

	it("lets an execution end within the drain time, then stops the rest as node-shutdown", async () => {
		const r = makeAgent();
		try {
			const short = spec({ command: job("sleep.sh"), commandArguments: "0.3" });
			const long = spec({ command: job("sleep.sh"), commandArguments: "30" });
			r.agent.run(short);
			r.agent.run(long);
			await running(r, long.jobExeId);
			const started = Date.now();
			const outcome = await r.agent.drain({
				why: "the agent received SIGTERM",
				waitMs: 1000,
				reportMs: 1000
			});
			// the drain time, then the process stopped at SIGTERM, well within the kill grace
			expect(Date.now() - started).toBeGreaterThanOrEqual(950);
			expect(Date.now() - started).toBeLessThan(2500);
			expect(outcome).toEqual({
				ended: 1,
				stopped: 1,
				handedBack: 0,
				undelivered: 0,
				undone: false
			});
			expect((await r.delivered(short.jobExeId)).status).toBe("COMPLETED");
			const report = await r.delivered(long.jobExeId);
			expect(report).toMatchObject({ status: "FAILED", errorName: "node-shutdown" });
			expect(report.errorDetail).toBe(
				"the node was shut down (the agent received SIGTERM) and the execution had not ended within the drain time of 1 s: stopped while its process ran"
			);
			expect(report.stderr).toMatch(
				/(^|\n)scale: the node was shut down \(the agent received SIGTERM\) and the execution had not ended within the drain time of 1 s: stopped while its process ran\n$/
			);
			expect(processesIn(taskDirOf(r.workDir, long.jobExeId))).toEqual([]);
			expect(r.agent.running()).toEqual([]);
		} finally {
			await r.agent.stop();
		}
	});

	it("ends at once when nothing runs, and hands back the runs that arrive afterwards", async () => {
		const r = makeAgent();
		try {
			const started = Date.now();
			const outcome = await r.agent.drain({
				why: "a user drains the node",
				waitMs: 60_000,
				reportMs: 1000
			});
			expect(Date.now() - started).toBeLessThan(500);
			expect(outcome).toMatchObject({ ended: 0, stopped: 0, handedBack: 0 });
			expect(r.agent.draining).toBe(true);
			const late = spec({ command: "/bin/true", commandArguments: "" });
			expect(r.agent.run(late)).toBe("handed back");
			expect(r.agent.running()).toEqual([late.jobExeId]);
			const report = await r.delivered(late.jobExeId);
			expect(report).toMatchObject({
				status: "FAILED",
				errorName: "node-shutdown",
				errorDetail:
					"the node is draining (a user drains the node): handed back before it started",
				stderr: "scale: the node is draining (a user drains the node): handed back before it started\n",
				exitCode: null,
				products: []
			});
			expect(fs.existsSync(taskDirOf(r.workDir, late.jobExeId))).toBe(false);
			// a repeat of the run is known; a drain asked for again answers the first one
			expect(r.agent.run(late)).toBe("known");
			expect(await r.agent.drain({ why: "again", waitMs: 0, reportMs: 0 })).toBe(outcome);
			// called off: runs are taken again
			r.agent.undrain();
			expect(r.agent.draining).toBe(false);
			const next = spec({ command: "/bin/true", commandArguments: "" });
			expect(r.agent.run(next)).toBe("started");
			expect((await r.delivered(next.jobExeId)).status).toBe("COMPLETED");
		} finally {
			await r.agent.stop();
		}
	});

	it("stops long-running executions at once, and waits for the others", async () => {
		const r = makeAgent();
		try {
			const monitor = spec({
				command: job("sleep.sh"),
				commandArguments: "30",
				jobType: { isLongRunning: true }
			});
			const other = spec({ command: job("sleep.sh"), commandArguments: "1" });
			r.agent.run(monitor);
			r.agent.run(other);
			await running(r, monitor.jobExeId);
			const drained = r.agent.drain({
				why: "the agent received SIGTERM",
				waitMs: 10_000,
				reportMs: 1000
			});
			const report = await r.delivered(monitor.jobExeId);
			expect(report).toMatchObject({ status: "FAILED", errorName: "node-shutdown" });
			expect(report.errorDetail).toMatch(
				/^the node was shut down \(the agent received SIGTERM\); a long-running execution is stopped at once: stopped /
			);
			expect(r.reports.find(x => x.jobExeId === other.jobExeId)).toBeUndefined();
			expect(await drained).toMatchObject({ ended: 1, stopped: 1 });
			expect((await r.delivered(other.jobExeId)).status).toBe("COMPLETED");
		} finally {
			await r.agent.stop();
		}
	});

	it("kills what runs at once when hurried, even a process that ignores SIGTERM", async () => {
		const r = makeAgent({ killGraceMs: 10_000 });
		try {
			const stubborn = spec({ command: job("sleep.sh"), commandArguments: "30 ignore-term" });
			r.agent.run(stubborn);
			await running(r, stubborn.jobExeId);
			const started = Date.now();
			const drained = r.agent.drain({
				why: "the agent received SIGTERM",
				waitMs: 30_000,
				reportMs: 10_000
			});
			await new Promise(res => setTimeout(res, 200));
			r.agent.hurry("the agent received SIGINT again");
			const outcome = await drained;
			expect(Date.now() - started).toBeLessThan(3000);
			expect(outcome).toMatchObject({ ended: 0, stopped: 1, undelivered: 0 });
			const report = await r.delivered(stubborn.jobExeId);
			expect(report).toMatchObject({
				status: "FAILED",
				errorName: "node-shutdown",
				errorDetail:
					"the node was shut down at once (the agent received SIGINT again): stopped while its process ran"
			});
			expect(processesIn(taskDirOf(r.workDir, stubborn.jobExeId))).toEqual([]);
		} finally {
			await r.agent.stop();
		}
	});

	it("gives up waiting for reports the control plane does not acknowledge", async () => {
		const r = makeAgent();
		try {
			const s = spec({ command: job("sleep.sh"), commandArguments: "30" });
			r.agent.run(s);
			await running(r, s.jobExeId);
			r.hold();
			const started = Date.now();
			const outcome = await r.agent.drain({
				why: "the agent received SIGTERM",
				waitMs: 100,
				reportMs: 300
			});
			// the drain time, the kill grace (300 ms here) and the reports' time
			expect(Date.now() - started).toBeGreaterThanOrEqual(650);
			expect(Date.now() - started).toBeLessThan(2000);
			expect(outcome).toMatchObject({ stopped: 1, undelivered: 1 });
			expect(r.agent.running()).toEqual([s.jobExeId]);
			r.release();
			expect((await r.delivered(s.jobExeId)).errorName).toBe("node-shutdown");
		} finally {
			await r.agent.stop();
		}
	});

	it("calls off a drain under way: nothing more is stopped", async () => {
		const r = makeAgent();
		try {
			const s = spec({ command: job("sleep.sh"), commandArguments: "1" });
			r.agent.run(s);
			await running(r, s.jobExeId);
			const drained = r.agent.drain({
				why: "a user drains the node",
				waitMs: 300,
				reportMs: 300
			});
			r.agent.undrain();
			expect(await drained).toMatchObject({ undone: true, stopped: 0 });
			await new Promise(res => setTimeout(res, 500));
			expect((await r.delivered(s.jobExeId)).status).toBe("COMPLETED");
		} finally {
			await r.agent.stop();
		}
	});
});
