import fs from "fs";
import os from "os";
import path from "path";
import { batchesOf } from "../../../lib/ingest/batches";
import { launchStrikeMonitor, StrikeMonitor, type MonitorLink } from "../../../lib/ingest/monitor";
import type { ArrivedFile, OpenIngest, Settled } from "../../../lib/ingest/protocol";

let root: string;

beforeEach(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-monitor-"));
});

afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe("batchesOf", () => {
	it("cuts names in order into batches of at most max files", () => {
		const names = Array.from({ length: 2500 }, (_, i) => `f-${i}`);
		const batches = batchesOf(names, 1000);
		expect(batches.map(b => b.length)).toEqual([1000, 1000, 500]);
		expect(batches.flat()).toEqual(names);
	});

	it("makes a batch of long names smaller: at most nameChars characters of names", () => {
		const long = Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(250, "x"));
		expect(batchesOf(long, 1000, 1000).map(b => b.length)).toEqual([4, 4, 2]);
		// a name longer than the limit still goes, alone
		expect(batchesOf(["a".repeat(20), "b"], 1000, 10)).toEqual([["a".repeat(20)], ["b"]]);
		expect(batchesOf([], 1000)).toEqual([]);
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
});
