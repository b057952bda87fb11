import fs from "fs";
import os from "os";
import path from "path";
import { runFsRequest } from "../../../lib/ingest/fs-batch";
import { FsThread } from "../../../lib/ingest/fs-thread";
import { moveAside, moveNoClobber, TargetExists } from "../../../lib/ingest/move";
import { datedFolder } from "../../../lib/ingest/record";
import { Folder } from "../../../lib/ingest/file-paths";

// the compiled worker (npm test builds first): FsThread's calls cross to a thread of their own
const WORKER = path.join(__dirname, "..", "..", "..", "dist", "lib", "ingest", "fs-worker.js");

let dir: string;

beforeEach(() => {
	dir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-move-"));
});

afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
	const p = path.join(dir, name);
	fs.mkdirSync(path.dirname(p), { recursive: true });
	fs.writeFileSync(p, content);
	return p;
}

/** The error `fn` throws. */
function thrown(fn: () => unknown): any {
	try {
		fn();
	} catch (error) {
		return error;
	}
	throw new Error("nothing thrown");
}

describe("moveNoClobber", () => {
	it("moves a file into a directory it makes", () => {
		const from = file("a.txt", "a");
		const to = path.join(dir, "ws", "in", "2026", "01", "02", "a.txt");
		moveNoClobber(from, to);
		expect(fs.readFileSync(to, "utf8")).toBe("a");
		expect(fs.existsSync(from)).toBe(false);
	});

	it("never replaces a file: the target kept, the source left where it was", () => {
		const from = file("a.txt", "new");
		const to = file("ws/a.txt", "old");
		expect(() => moveNoClobber(from, to)).toThrow(TargetExists);
		expect(fs.readFileSync(to, "utf8")).toBe("old");
		expect(fs.readFileSync(from, "utf8")).toBe("new");
	});

	it("fails, changing nothing, when the source is gone or the target cannot be made", () => {
		expect(() => moveNoClobber(path.join(dir, "none"), path.join(dir, "x", "y"))).toThrow(
			expect.objectContaining({ code: "ENOENT" })
		);
		const from = file("b.txt", "b");
		file("blocker", "a file where a directory should be");
		const failure = thrown(() => moveNoClobber(from, path.join(dir, "blocker", "b.txt")));
		expect(failure).not.toBeInstanceOf(TargetExists);
		expect(failure.code).toMatch(/^(EEXIST|ENOTDIR)$/);
		expect(fs.readFileSync(from, "utf8")).toBe("b");
	});
});

describe("moveAside", () => {
	it("keeps the name, or adds the tag when the name is taken", () => {
		const aside = path.join(dir, "deferred");
		expect(moveAside(file("c.dat", "1"), aside, "7")).toBe(path.join(aside, "c.dat"));
		expect(moveAside(file("c.dat", "2"), aside, "8")).toBe(path.join(aside, "c.dat.8"));
		expect(fs.readFileSync(path.join(aside, "c.dat"), "utf8")).toBe("1");
		expect(fs.readFileSync(path.join(aside, "c.dat.8"), "utf8")).toBe("2");
	});
});

describe("datedFolder", () => {
	it("is workspace_path/YYYY/MM/DD/ in UTC, as Scale", () => {
		expect(datedFolder("raw/in", new Date("2026-03-04T23:59:59-05:00"))).toBe(
			"raw/in/2026/03/05/"
		);
		expect(datedFolder(".", new Date("2026-12-31T00:00:00Z"))).toBe("2026/12/31/");
		expect(datedFolder("/a//b/../c/", new Date("2026-12-31T00:00:00Z"))).toBe(
			"/a/c/2026/12/31/"
		);
	});
});

describe("Folder", () => {
	it("answer what path.join answers, for plain names and others", () => {
		const folders = [["/"], ["/srv/in"], ["/srv/in/"], ["rel", "..", "x//y"], [""], ["."]];
		const names = ["a.txt", "b", "..", ".", "c/d", "../e", "", ".hidden"];
		for (const folder of folders)
			for (const name of names)
				for (const join of [path.join, path.posix.join])
					expect(new Folder(join, ...folder).path(name)).toBe(join(...folder, name));
	});
});

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
