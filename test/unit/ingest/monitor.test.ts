import fs from "fs";
import os from "os";
import path from "path";
import { StrikeMonitor, type MonitorLink } from "../../../lib/ingest/monitor";
import type { OpenIngest, Settled } from "../../../lib/ingest/protocol";

let root: string;

beforeEach(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-monitor-"));
});

afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe("StrikeMonitor", () => {
	it("settles an ingest left open at two rescans in a row from where its file is", async () => {
		const watched = path.join(root, "incoming");
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
});
