import fs from "fs";
import os from "os";
import path from "path";
import { nextBatch } from "../../../lib/ingest/batches";
import { launchStrikeMonitor, StrikeMonitor, type MonitorLink } from "../../../lib/ingest/monitor";
import type { ArrivedFile, OpenIngest, Settled } from "../../../lib/ingest/protocol";

let root: string;

beforeEach(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-monitor-"));
});

afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe("nextBatch", () => {
	it("takes the marked names in order, at most max of them", () => {
		const names = Array.from({ length: 2500 }, (_, i) => `f-${i}`);
		expect(nextBatch(names, new Set(), 1000)).toEqual(names.slice(0, 1000));
		expect(nextBatch(names.slice(2000), new Set(), 1000)).toEqual(names.slice(2000));
		expect(nextBatch([], new Set(), 1000)).toEqual([]);
	});

	it("leaves out the names a batch under way holds", () => {
		expect(nextBatch(["a", "b", "c", "d"], new Set(["a", "c"]), 1000)).toEqual(["b", "d"]);
		expect(nextBatch(["a", "b", "c"], new Set(["a", "b", "c"]), 1000)).toEqual([]);
		expect(nextBatch(["a", "b", "c", "d"], new Set(["b"]), 2)).toEqual(["a", "c"]);
	});

	it("makes a batch of long names smaller: at most nameChars characters of names", () => {
		const long = Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(250, "x"));
		const same = (name: string) => name;
		expect(nextBatch(long, new Set(), 1000, same, 1000)).toEqual(long.slice(0, 4));
		// a name longer than the limit still goes, alone
		expect(nextBatch(["a".repeat(20), "b"], new Set(), 1000, same, 10)).toEqual([
			"a".repeat(20)
		]);
	});

	it("leaves out a name whose file a batch under way holds under its other name", () => {
		const fileOf = (name: string) => name.replace(/_tmp$/, "");
		expect(nextBatch(["x", "y_tmp", "z"], new Set(["x", "y"]), 1000, fileOf)).toEqual(["z"]);
		// both names of one file may go in one batch
		expect(nextBatch(["x_tmp", "x"], new Set(), 1000, fileOf)).toEqual(["x_tmp", "x"]);
	});
});

describe("StrikeMonitor", () => {
	it("settles an ingest left open at two rescans in a row from where its file is", async () => {
		const watched = path.join(root, "incoming");
		fs.mkdirSync(watched);
		const stored = path.join(root, "ws", "x.txt");
		fs.mkdirSync(path.dirname(stored), { recursive: true });
		fs.writeFileSync(stored, "hello");
		const x: OpenIngest = {
			ingestId: 7,
			fileName: "x.txt",
			status: "INGESTING",
			target: stored
		};
		const y: OpenIngest = {
			ingestId: 8,
			fileName: "y.txt",
			status: "TRANSFERRED",
			target: null
		};
		// what each monitorSetup answers open, in turn: nothing, then x and y, then x alone
		const opens = [[], [x, y], [x]];
		let setups = 0;
		const settled: { results: Settled[]; afterSetups: number }[] = [];
		const link: MonitorLink = {
			async call<T>(action: string, params: Record<string, unknown>): Promise<T> {
				if (action === "ingest.monitorSetup") {
					const open = opens[Math.min(setups, opens.length - 1)];
					setups++;
					return { directory: watched, transferSuffix: "_tmp", open } as T;
				}
				if (action === "ingest.settle") {
					settled.push({ results: params.results as Settled[], afterSetups: setups });
					return { answers: [] } as T;
				}
				throw new Error(`unexpected call ${action}`);
			},
			info: () => undefined,
			warn: () => undefined
		};
		const monitor = new StrikeMonitor({ strikeId: 1, jobExeId: 2 }, link, {
			rescanMs: 20
		});
		const abort = new AbortController();
		const running = monitor.run(abort.signal);
		const deadline = Date.now() + 5000;
		while (settled.length === 0 && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 10));
		abort.abort();
		expect(await running).toBe(0);
		// y was open at one rescan only; x at two, and is found stored
		expect(settled[0]).toEqual({
			results: [{ ingestId: 7, status: "INGESTED", size: 5 }],
			afterSetups: 3
		});
	});

	// another file system than the strike's directory: tmpfs, where the machine has one
	const shm = "/dev/shm";
	const across = fs.existsSync(shm) && fs.statSync(shm).dev !== fs.statSync(os.tmpdir()).dev;
	(across ? it : it.skip)(
		"shows a file to copy to another file system INGESTING before it copies it",
		async () => {
			const watched = path.join(root, "incoming");
			fs.mkdirSync(watched, { recursive: true });
			const workspace = fs.mkdtempSync(path.join(shm, "scale-monitor-ws-"));
			const target = path.join(workspace, "2026", "z.txt");
			const calls: string[] = [];
			const settled: Settled[] = [];
			let sourceAtIngesting: boolean | null = null;
			let targetAtIngesting: boolean | null = null;
			const link: MonitorLink = {
				async call<T>(action: string, params: Record<string, unknown>): Promise<T> {
					calls.push(action);
					if (action === "ingest.monitorSetup")
						return { directory: watched, transferSuffix: "_tmp", open: [] } as T;
					if (action === "ingest.arrived") {
						const [file] = params.files as ArrivedFile[];
						return {
							decisions: [{ name: file.name, ingestId: 3, action: "ingest", target }]
						} as T;
					}
					if (action === "ingest.ingesting") {
						expect(params.ingestIds).toEqual([3]);
						sourceAtIngesting = fs.existsSync(path.join(watched, "z.txt"));
						targetAtIngesting = fs.existsSync(target);
						return { ok: true } as T;
					}
					if (action === "ingest.settle") {
						settled.push(...(params.results as Settled[]));
						return { answers: [] } as T;
					}
					throw new Error(`unexpected call ${action}`);
				},
				info: () => undefined,
				warn: () => undefined
			};
			const monitor = new StrikeMonitor({ strikeId: 1, jobExeId: 2 }, link, {
				rescanMs: 50
			});
			const abort = new AbortController();
			const running = monitor.run(abort.signal);
			try {
				fs.writeFileSync(path.join(watched, "z.txt"), "across");
				const deadline = Date.now() + 5000;
				while (settled.length === 0 && Date.now() < deadline)
					await new Promise(r => setTimeout(r, 10));
				abort.abort();
				expect(await running).toBe(0);
				// told before the copy began, when the file was still in the directory alone
				expect(sourceAtIngesting).toBe(true);
				expect(targetAtIngesting).toBe(false);
				expect(calls.filter(c => c !== "ingest.monitorSetup")).toEqual([
					"ingest.arrived",
					"ingest.ingesting",
					"ingest.settle"
				]);
				expect(settled).toEqual([{ ingestId: 3, status: "INGESTED", size: 6 }]);
				expect(fs.readFileSync(target, "utf8")).toBe("across");
				expect(fs.existsSync(path.join(watched, "z.txt"))).toBe(false);
			} finally {
				abort.abort();
				fs.rmSync(workspace, { recursive: true, force: true });
			}
		}
	);

	it("ends with why, creating nothing, when its directory does not exist (a mount not there yet)", async () => {
		const watched = path.join(root, "nfs", "not-mounted");
		const warned: string[] = [];
		const calls: string[] = [];
		const link: MonitorLink = {
			async call<T>(action: string): Promise<T> {
				calls.push(action);
				return { directory: watched, transferSuffix: "_tmp", open: [] } as T;
			},
			info: () => undefined,
			warn: message => warned.push(message)
		};
		const monitor = new StrikeMonitor({ strikeId: 4, jobExeId: 5 }, link, { rescanMs: 20 });
		const launched = launchStrikeMonitor(monitor);
		const status = await launched.exited;
		expect(status.code).toBe(1);
		expect(status.failed).toBe(
			`strike 4: the directory ${watched} it watches does not exist on this node; mount it (or fix the strike's configuration), then requeue the strike's job`
		);
		expect(warned).toEqual([status.failed]);
		expect(calls).toEqual(["ingest.monitorSetup"]);
		expect(fs.existsSync(path.join(root, "nfs"))).toBe(false);
	});

	it("takes files that arrive during a batch in a batch of their own at once, each name in one batch", async () => {
		const watched = path.join(root, "incoming");
		fs.mkdirSync(watched);
		for (const name of ["a.dat", "b.dat"]) fs.writeFileSync(path.join(watched, name), name);
		const arrivals: string[][] = [];
		let firstPending = false;
		let release: () => void = () => undefined;
		const settled: Settled[] = [];
		let nextId = 1;
		const link = stubLink(watched, settled, async (action, params) => {
			if (action !== "ingest.arrived") throw new Error(`unexpected call ${action}`);
			const files = (params.files as ArrivedFile[]).map(f => f.name);
			arrivals.push(files);
			if (arrivals.length === 1) {
				// the first batch waits until the test lets it go
				firstPending = true;
				await new Promise<void>(r => (release = r));
				firstPending = false;
			}
			return {
				decisions: files.map(name => ({
					name,
					ingestId: nextId++,
					action: "aside",
					status: "DEFERRED"
				}))
			};
		});
		const { abort, running } = startMonitor(link);
		await until(() => firstPending);
		for (const name of ["c.dat", "d.dat"]) fs.writeFileSync(path.join(watched, name), name);
		await until(() => arrivals.length >= 2);
		// taken while the first batch is still under way, not after it
		const secondWhileFirstPending = arrivals.length >= 2 && firstPending;
		release();
		await until(() => settled.length >= 4);
		abort.abort();
		expect(await running).toBe(0);
		expect(secondWhileFirstPending).toBe(true);
		expect(arrivals[0].sort()).toEqual(["a.dat", "b.dat"]);
		expect(arrivals.flat().sort()).toEqual(["a.dat", "b.dat", "c.dat", "d.dat"]);
		expect(settled.map(r => r.status)).toEqual([
			"DEFERRED",
			"DEFERRED",
			"DEFERRED",
			"DEFERRED"
		]);
	});

	it("records a file's arrival only after the batch that saw it under the transfer suffix is done", async () => {
		const watched = path.join(root, "incoming");
		fs.mkdirSync(watched);
		const calls: string[] = [];
		let transferringPending = false;
		let release: () => void = () => undefined;
		const settled: Settled[] = [];
		const link = stubLink(
			watched,
			settled,
			async (action, params) => {
				if (action === "ingest.transferring") {
					transferringPending = true;
					await new Promise<void>(r => (release = r));
					transferringPending = false;
					return { ok: true };
				}
				if (action !== "ingest.arrived") throw new Error(`unexpected call ${action}`);
				const [file] = params.files as ArrivedFile[];
				return {
					decisions: [
						{ name: file.name, ingestId: 1, action: "aside", status: "DEFERRED" }
					]
				};
			},
			calls
		);
		const { abort, running } = startMonitor(link);
		await new Promise(r => setTimeout(r, 50));
		fs.writeFileSync(path.join(watched, "x.dat_tmp"), "x");
		await until(() => transferringPending);
		fs.renameSync(path.join(watched, "x.dat_tmp"), path.join(watched, "x.dat"));
		// time for a worker that would take x.dat beside the batch under way
		await new Promise(r => setTimeout(r, 200));
		const beforeRelease = [...calls];
		release();
		await until(() => settled.length > 0);
		abort.abort();
		expect(await running).toBe(0);
		expect(beforeRelease).toEqual(["ingest.transferring"]);
		expect(calls).toEqual(["ingest.transferring", "ingest.arrived", "ingest.settle"]);
	});
});

/**
 * A monitor's link for the tests of its batches: its setup watches `watched` (transfer suffix
 * `_tmp`), settles are kept in `settled`, every other call goes to `on` (and its action, past the
 * setup, into `calls`).
 */
function stubLink(
	watched: string,
	settled: Settled[],
	on: (action: string, params: Record<string, unknown>) => Promise<unknown>,
	calls: string[] = []
): MonitorLink {
	return {
		async call<T>(action: string, params: Record<string, unknown>): Promise<T> {
			if (action === "ingest.monitorSetup")
				return { directory: watched, transferSuffix: "_tmp", open: [] } as T;
			calls.push(action);
			if (action === "ingest.settle") {
				settled.push(...(params.results as Settled[]));
				return { answers: [] } as T;
			}
			return (await on(action, params)) as T;
		},
		info: () => undefined,
		warn: () => undefined
	};
}

/** Runs a monitor of strike 1 on `link`, rescanning only after a minute. */
function startMonitor(link: MonitorLink): { abort: AbortController; running: Promise<number> } {
	const monitor = new StrikeMonitor({ strikeId: 1, jobExeId: 2 }, link, { rescanMs: 60_000 });
	const abort = new AbortController();
	return { abort, running: monitor.run(abort.signal) };
}

/** Waits until `done` answers true, 5 s at most. */
async function until(done: () => boolean): Promise<void> {
	const deadline = Date.now() + 5000;
	while (!done() && Date.now() < deadline) await new Promise(r => setTimeout(r, 10));
}
