import fs from "fs";
import path from "path";
import {
	artifactLines,
	copyAtomically,
	isPlainFileName,
	readTail,
	SMALL_FILE,
	resolveConfined
} from "../../../lib/agent/files";
import { isInside } from "../../../lib/paths";
import { mediaTypeOf } from "../../../lib/documents/media-types";
import { removeTempDirs, tempDir } from "../../fixtures/agent";

afterAll(() => removeTempDirs());

describe("paths", () => {
	it("tells what lies inside a directory", () => {
		expect(isInside("/a/b", "/a/b")).toBe(true);
		expect(isInside("/a/b", "/a/b/c/d")).toBe(true);
		expect(isInside("/a/b", "/a/bc")).toBe(false);
		expect(isInside("/a/b", "/a")).toBe(false);
		expect(isInside("/a/b", "/a/b/../c")).toBe(false);
		expect(isInside("/a/b", "/a/b/..data")).toBe(true);
	});

	it("accepts plain file names only", () => {
		for (const name of ["a.txt", "with space", "..x", ".hidden"])
			expect(isPlainFileName(name)).toBe(true);
		for (const name of ["", ".", "..", "a/b", "/abs", "nul\0"])
			expect(isPlainFileName(name)).toBe(false);
	});

	it("confines registered paths to the task directory", async () => {
		const task = tempDir("task");
		const out = path.join(task, "outputs");
		fs.mkdirSync(out);
		fs.writeFileSync(path.join(out, "a.txt"), "a");
		fs.writeFileSync(path.join(task, "stdout"), "");
		fs.mkdirSync(path.join(out, "sub"));
		fs.symlinkSync(path.join(out, "a.txt"), path.join(out, "inner-link"));
		fs.symlinkSync("/etc/hostname", path.join(out, "outer-link"));
		const resolve = (given: string) => resolveConfined(given, out, task);
		expect(await resolve("a.txt")).toEqual({ path: path.join(out, "a.txt") });
		expect(await resolve(path.join(out, "a.txt"))).toEqual({ path: path.join(out, "a.txt") });
		expect(await resolve("../stdout")).toEqual({ path: path.join(task, "stdout") });
		expect(await resolve("inner-link")).toEqual({ path: path.join(out, "a.txt") });
		expect(await resolve("outer-link")).toEqual({
			refused: expect.stringMatching(/leads outside/)
		});
		expect(await resolve("../../x")).toEqual({
			refused: expect.stringMatching(/outside the task/)
		});
		expect(await resolve("/etc/hostname")).toEqual({
			refused: expect.stringMatching(/outside/)
		});
		expect(await resolve("nope")).toEqual({ refused: expect.stringMatching(/does not exist/) });
		expect(await resolve("sub")).toEqual({
			refused: expect.stringMatching(/not a regular file/)
		});
	});
});

describe("copyAtomically", () => {
	it("makes the directories and leaves only the final file", async () => {
		const dir = tempDir("copy");
		const from = path.join(dir, "from.bin");
		fs.writeFileSync(from, Buffer.alloc(70000, 7));
		const to = path.join(dir, "x", "y", "to.bin");
		expect(await copyAtomically(from, to)).toBe(70000);
		expect(fs.readFileSync(to).equals(fs.readFileSync(from))).toBe(true);
		expect(fs.readdirSync(path.dirname(to))).toEqual(["to.bin"]);
	});

	it("leaves nothing behind when the copy fails", async () => {
		const dir = tempDir("copy");
		await expect(
			copyAtomically(path.join(dir, "missing"), path.join(dir, "o", "to"))
		).rejects.toThrow(/ENOENT/);
		expect(fs.readdirSync(path.join(dir, "o"))).toEqual([]);
	});
});

describe("readTail", () => {
	it("answers a small file whole and a missing one as empty", async () => {
		const dir = tempDir("tail");
		fs.writeFileSync(path.join(dir, "f"), "one\ntwo\n");
		expect(await readTail(path.join(dir, "f"), 100)).toBe("one\ntwo\n");
		expect(await readTail(path.join(dir, "missing"), 100)).toBe("");
	});

	it("keeps the last bytes from a whole line on, saying what was left out", async () => {
		const dir = tempDir("tail");
		const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join("\n") + "\n";
		fs.writeFileSync(path.join(dir, "f"), lines);
		const tail = await readTail(path.join(dir, "f"), 100);
		const [note, ...rest] = tail.split("\n");
		const kept = rest.join("\n");
		expect(lines.endsWith(kept)).toBe(true);
		expect(kept.startsWith("line ")).toBe(true);
		expect(Buffer.byteLength(kept)).toBeLessThanOrEqual(100);
		expect(note).toBe(
			`[... ${Buffer.byteLength(lines) - Buffer.byteLength(kept)} earlier bytes are in the task's stdout/stderr file ...]`
		);
	});

	it("drops NUL characters", async () => {
		const dir = tempDir("tail");
		fs.writeFileSync(path.join(dir, "f"), "a\0b");
		expect(await readTail(path.join(dir, "f"), 100)).toBe("ab");
		fs.writeFileSync(path.join(dir, "big"), "a\0b".repeat(SMALL_FILE));
		expect(await readTail(path.join(dir, "big"), 4 * SMALL_FILE)).toBe("ab".repeat(SMALL_FILE));
	});

	it("reads a file larger than a small one whole when the cap allows", async () => {
		const dir = tempDir("tail");
		const text = "0123456789\n".repeat(SMALL_FILE / 5);
		fs.writeFileSync(path.join(dir, "f"), text);
		expect(await readTail(path.join(dir, "f"), 1024 * 1024)).toBe(text);
		// at the edge: a small file longer than the cap is cut
		fs.writeFileSync(path.join(dir, "g"), "first\nsecond\n");
		expect(await readTail(path.join(dir, "g"), 8)).toBe(
			"[... 6 earlier bytes are in the task's stdout/stderr file ...]\nsecond\n"
		);
	});
});

describe("artifactLines", () => {
	it("scans a large stdout for ARTIFACT lines only", async () => {
		const dir = tempDir("art");
		const file = path.join(dir, "stdout");
		const noise = "x".repeat(1000) + "\n";
		fs.writeFileSync(
			file,
			noise.repeat(3000) + "ARTIFACT:a:/p/1\r\n" + noise + " ARTIFACT:no:/x\nARTIFACT:b:c:d"
		);
		expect(await artifactLines(file)).toBe("ARTIFACT:a:/p/1\nARTIFACT:b:c:d");
		expect(await artifactLines(path.join(dir, "missing"))).toBe("");
		const small = path.join(dir, "small");
		fs.writeFileSync(small, "x\nARTIFACT:a:/p/1\r\n ARTIFACT:no:/x\nARTIFACT:b:c:d");
		expect(await artifactLines(small)).toBe("ARTIFACT:a:/p/1\nARTIFACT:b:c:d");
		fs.writeFileSync(small, "");
		expect(await artifactLines(small)).toBe("");
		// between a small file and a streamed one
		fs.writeFileSync(small, noise.repeat(100) + "ARTIFACT:c:/p/2\n" + noise);
		expect(await artifactLines(small)).toBe("ARTIFACT:c:/p/2");
	});
});

describe("media types", () => {
	it("come from the extension, else application/octet-stream", () => {
		expect(mediaTypeOf("a.TXT")).toBe("text/plain");
		expect(mediaTypeOf("x.tar.gz")).toBe("application/gzip");
		expect(mediaTypeOf("img.tif")).toBe("image/tiff");
		expect(mediaTypeOf("data.h5")).toBe("image/x-hdf5-image");
		expect(mediaTypeOf("noext")).toBe("application/octet-stream");
		expect(mediaTypeOf("odd.zzz")).toBe("application/octet-stream");
	});

	it("are the registered types for the geospatial formats", () => {
		expect(mediaTypeOf("a.geojson")).toBe("application/vnd.geo+json");
		expect(mediaTypeOf("a.NTF")).toBe("image/x-nitf-image");
		expect(mediaTypeOf("a.nitf")).toBe("image/x-nitf-image");
		expect(mediaTypeOf("a.jp2")).toBe("image/jp2");
		expect(mediaTypeOf("a.kml")).toBe("application/vnd.google-earth.kml+xml");
		expect(mediaTypeOf("a.kmz")).toBe("application/vnd.google-earth.kmz");
		expect(mediaTypeOf("a.nc")).toBe("application/x-netcdf");
		expect(mediaTypeOf("a.hdf5")).toBe("image/x-hdf5-image");
		expect(mediaTypeOf("a.shp")).toBe("application/vnd.shp");
	});

	it("read only the extension, not a bare name", () => {
		expect(mediaTypeOf("json")).toBe("application/octet-stream");
		expect(mediaTypeOf(".tif")).toBe("application/octet-stream");
		expect(mediaTypeOf("dir.d/file")).toBe("application/octet-stream");
	});
});
