import fs from "fs";
import os from "os";
import path from "path";
import { runFsRequest } from "../../../lib/ingest/fs-batch";
import { FsThread } from "../../../lib/ingest/fs-thread";

// the compiled worker (npm test builds first): the calls cross to a thread of their own
const WORKER = path.join(__dirname, "..", "..", "..", "dist", "lib", "ingest", "fs-worker.js");

let dir: string;

beforeEach(() => {
	dir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-fs-thread-"));
});

afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
	const p = path.join(dir, name);
	fs.mkdirSync(path.dirname(p), { recursive: true });
	fs.writeFileSync(p, content);
	return p;
}

describe("runFsRequest", () => {
	it("answers each path's size and kind, null where nothing is", () => {
		const a = file("a.txt", "four");
		fs.mkdirSync(path.join(dir, "sub"));
		expect(
			runFsRequest({ kind: "lstat", paths: [a, path.join(dir, "sub"), path.join(dir, "no")] })
		).toEqual({
			stats: [{ size: 4, isFile: true }, { size: expect.any(Number), isFile: false }, null]
		});
	});

	it("moves each file, into a workspace or aside, and answers each error with its code", () => {
		const a = file("a.txt", "a");
		const b = file("b.txt", "b");
		const taken = file("ws/c.txt", "old");
		const c = file("c.txt", "new");
		const { moved } = runFsRequest({
			kind: "move",
			moves: [
				{ from: a, to: path.join(dir, "ws", "a.txt") },
				{ from: b, folder: path.join(dir, "deferred"), tag: "9" },
				{ from: c, to: taken },
				{ from: path.join(dir, "gone.txt"), to: path.join(dir, "ws", "gone.txt") }
			]
		}) as { moved: any[] };
		expect(moved[0]).toEqual({ to: path.join(dir, "ws", "a.txt") });
		expect(moved[1]).toEqual({ to: path.join(dir, "deferred", "b.txt") });
		expect(moved[2].error).toMatchObject({ code: "EEXIST", targetExists: true });
		expect(moved[3].error).toMatchObject({ code: "ENOENT", targetExists: false });
		expect(fs.readFileSync(taken, "utf8")).toBe("old");
		expect(fs.readFileSync(c, "utf8")).toBe("new");
		expect(fs.existsSync(a)).toBe(false);
	});
});

describe("FsThread", () => {
	it("makes the calls in a thread of its own, in order, and starts again after a stop", async () => {
		const files = new FsThread(WORKER);
		try {
			const a = file("a.txt", "abc");
			const [stat] = await files.lstat([a]);
			expect(stat).toEqual({ size: 3, isFile: true });
			// the premise: a worker answered, not this thread
			expect((files as unknown as { worker: unknown }).worker).not.toBeNull();
			const moved = await files.move([{ from: a, to: path.join(dir, "ws", "a.txt") }]);
			expect(moved).toEqual([{ to: path.join(dir, "ws", "a.txt") }]);
			await files.stop();
			expect(await files.lstat([a, path.join(dir, "ws", "a.txt")])).toEqual([
				null,
				{ size: 3, isFile: true }
			]);
		} finally {
			await files.stop();
		}
	});
});
