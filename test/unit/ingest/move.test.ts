import fs from "fs";
import os from "os";
import path from "path";
import { moveAside, moveNoClobber, TargetExists } from "../../../lib/ingest/move";
import { datedPath } from "../../../lib/ingest/record";

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

describe("datedPath", () => {
	it("is workspace_path/YYYY/MM/DD/name in UTC, as Scale", () => {
		expect(datedPath("raw/in", new Date("2026-03-04T23:59:59-05:00"), "a.h5")).toBe(
			"raw/in/2026/03/05/a.h5"
		);
		expect(datedPath(".", new Date("2026-12-31T00:00:00Z"), "b")).toBe("2026/12/31/b");
	});
});
