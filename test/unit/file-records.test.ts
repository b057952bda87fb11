import { promises as fs } from "fs";
import os from "os";
import path from "path";
import { productUpdate } from "../../lib/records/product-file";
import {
	downloadUrl,
	notFoundDetail,
	parseFileRef,
	serializeScaleFileBase,
	type ScaleFileRow
} from "../../lib/records/scale-file";
import { sourceUpdate } from "../../lib/records/source-file";
import { contentDisposition, openWorkspaceFile } from "../../lib/storage/download";

const T1 = new Date("2024-01-01T01:00:00.000Z");
const T2 = new Date("2024-01-01T02:00:00.000Z");
const T3 = new Date("2024-01-01T03:00:00.000Z");

describe("parseFileRef", () => {
	it("takes digits for an id and anything else for a file name", () => {
		expect(parseFileRef("12")).toEqual({ id: 12 });
		expect(parseFileRef("2147483647")).toEqual({ id: 2147483647 });
		expect(parseFileRef("scene 1.tif")).toEqual({ fileName: "scene 1.tif" });
		expect(parseFileRef("12.tif")).toEqual({ fileName: "12.tif" });
		expect(parseFileRef("x".repeat(250))).toEqual({ fileName: "x".repeat(250) });
	});

	it("answers null for what can name no file", () => {
		for (const segment of ["0", "2147483648", "", "x".repeat(251), "a/b", "a\0b"])
			expect(parseFileRef(segment)).toBeNull();
	});

	it("says what was not found", () => {
		expect(notFoundDetail("product", { id: 4 })).toBe("No product with id 4");
		expect(notFoundDetail("source file", { fileName: "a.tif" })).toBe(
			'No source file named "a.tif"'
		);
		expect(notFoundDetail("product", null)).toBe("No such product");
	});
});

describe("file URLs", () => {
	const row = {
		id: 7,
		workspace_base_url: null,
		file_path: "a/b.txt",
		created: T1,
		last_modified: T1
	} as unknown as ScaleFileRow;

	it("downloads through the API where the workspace has no base URL", () => {
		expect(downloadUrl("http://h:8000/api/v3", 7)).toBe(
			"http://h:8000/api/v3/files/7/download/"
		);
		expect(downloadUrl("http://h/api/", 7)).toBe("http://h/api/files/7/download/");
		expect(serializeScaleFileBase(row, "http://h/api").url).toBe(
			"http://h/api/files/7/download/"
		);
		expect(serializeScaleFileBase(row).url).toBeNull();
		expect(
			serializeScaleFileBase({ ...row, workspace_base_url: "https://w/" }, "http://h/api").url
		).toBe("https://w/a/b.txt");
	});
});

describe("update records", () => {
	const product = {
		is_deleted: false,
		deleted: null,
		is_published: true,
		published: T1,
		unpublished: null
	};

	it("names a product's last update: deleted, else published, else unpublished", () => {
		expect(productUpdate(product)).toEqual({
			action: "PUBLISHED",
			when: "2024-01-01T01:00:00.000Z"
		});
		expect(productUpdate({ ...product, is_published: false, unpublished: T2 })).toEqual({
			action: "UNPUBLISHED",
			when: "2024-01-01T02:00:00.000Z"
		});
		expect(productUpdate({ ...product, is_deleted: true, deleted: T3 })).toEqual({
			action: "DELETED",
			when: "2024-01-01T03:00:00.000Z"
		});
	});

	it("names a source file's last update: deleted, else parsed, else created", () => {
		const source = {
			is_deleted: false,
			deleted: null,
			is_parsed: false,
			parsed: null,
			created: T1
		};
		expect(sourceUpdate(source)).toEqual({
			action: "CREATED",
			when: "2024-01-01T01:00:00.000Z"
		});
		expect(sourceUpdate({ ...source, is_parsed: true, parsed: T2 })).toEqual({
			action: "PARSED",
			when: "2024-01-01T02:00:00.000Z"
		});
		expect(sourceUpdate({ ...source, is_parsed: true, is_deleted: true, deleted: T3 })).toEqual(
			{ action: "DELETED", when: "2024-01-01T03:00:00.000Z" }
		);
	});
});

describe("contentDisposition", () => {
	it("quotes a plain name and gives any name in UTF-8 as well", () => {
		expect(contentDisposition("a.tif")).toBe(
			`attachment; filename="a.tif"; filename*=UTF-8''a.tif`
		);
		expect(contentDisposition('s"é (1).tif')).toBe(
			`attachment; filename="s__ (1).tif"; filename*=UTF-8''s%22%C3%A9%20%281%29.tif`
		);
	});
});

describe("openWorkspaceFile", () => {
	let root: string;
	let outside: string;

	beforeAll(async () => {
		root = await fs.mkdtemp(path.join(os.tmpdir(), "download-root-"));
		outside = await fs.mkdtemp(path.join(os.tmpdir(), "download-outside-"));
		await fs.mkdir(path.join(root, "d"));
		await fs.writeFile(path.join(root, "d", "f.txt"), "hello");
		await fs.writeFile(path.join(outside, "s.txt"), "secret");
		await fs.symlink(path.join(outside, "s.txt"), path.join(root, "out-link"));
		await fs.symlink(path.join(root, "d", "f.txt"), path.join(root, "in-link"));
	});

	afterAll(async () => {
		await fs.rm(root, { recursive: true, force: true });
		await fs.rm(outside, { recursive: true, force: true });
	});

	async function read(filePath: string, hostPath = root) {
		const opened = await openWorkspaceFile(hostPath, filePath);
		if ("refused" in opened) return opened;
		const chunks: Buffer[] = [];
		for await (const chunk of opened.stream) chunks.push(chunk as Buffer);
		return { size: opened.size, text: Buffer.concat(chunks).toString() };
	}

	it("opens a file under the workspace root, relative or with a leading slash", async () => {
		expect(await read("d/f.txt")).toEqual({ size: 5, text: "hello" });
		expect(await read("/d/f.txt")).toEqual({ size: 5, text: "hello" });
		expect(await read("d/../d/f.txt")).toEqual({ size: 5, text: "hello" });
	});

	it("follows a link that stays inside the workspace", async () => {
		expect(await read("in-link")).toEqual({ size: 5, text: "hello" });
	});

	it("refuses paths leading outside, missing files and what is not a file", async () => {
		const outsideRel = path.posix.join("..", path.basename(outside), "s.txt");
		expect(await read(outsideRel)).toEqual({ refused: "its path leads outside its workspace" });
		expect(await read("out-link")).toEqual({ refused: "its path leads outside its workspace" });
		expect(await read("d/missing.txt")).toEqual({
			refused: "it is missing from its workspace"
		});
		expect(await read("d")).toEqual({ refused: "it is not a regular file in its workspace" });
		expect(await read("d/f\0.txt")).toEqual({ refused: "its path holds a NUL character" });
		expect(await read("d/f.txt", path.join(root, "nowhere"))).toEqual({
			refused: "its workspace directory is not reachable"
		});
	});
});
