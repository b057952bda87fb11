import { promises as fs } from "fs";
import os from "os";
import path from "path";
import {
	movedPath,
	moveSourceFiles,
	planParseUpdates,
	undoMoves,
	type ParseTarget
} from "../../../lib/records/product";

const source = (extra: Partial<ParseTarget> = {}): ParseTarget => ({
	id: 1,
	file_name: "scene.tif",
	file_path: "in/scene.tif",
	workspace_host_path: "/ws",
	is_move_enabled: true,
	...extra
});

describe("movedPath", () => {
	it("joins the new directory and the file name inside the workspace", () => {
		expect(movedPath("parsed/2020", "a.tif")).toBe("parsed/2020/a.tif");
		expect(movedPath("/parsed/", "a.tif")).toBe("parsed/a.tif");
		expect(movedPath("x/../y", "a.tif")).toBe("y/a.tif");
	});

	it("refuses a path that leaves the workspace", () => {
		expect(movedPath("../../etc", "a")).toBe("etc/a");
		expect(movedPath("..", "")).toBeNull();
	});
});

describe("planParseUpdates", () => {
	it("matches results to source inputs by file name (1.1 geo_metadata)", () => {
		const [u] = planParseUpdates(
			[
				{
					filename: "scene.tif",
					data_types: ["a", "b", "a"],
					new_workspace_path: "done",
					geo_metadata: {
						data_started: "2020-01-01T00:00:00Z",
						data_ended: "2020-01-02T00:00:00Z",
						geo_json: {
							type: "Feature",
							properties: { p: 1 },
							geometry: { type: "Point", coordinates: [1, 2] }
						}
					}
				},
				{ filename: "other.tif", data_types: ["z"] }
			],
			[source()]
		);
		expect(u).toEqual({
			id: 1,
			data_started: "2020-01-01T00:00:00Z",
			data_ended: "2020-01-02T00:00:00Z",
			data_types: ["a", "b"],
			geometry: "POINT (1 2)",
			center_point: "POINT (1 2)",
			meta_data: '{"p":1}',
			new_path: "done/scene.tif"
		});
	});

	it("reads the 1.0 form, and keeps the path when the workspace does not allow moves", () => {
		const [u] = planParseUpdates(
			[
				{
					filename: "scene.tif",
					data_started: "2020-01-01T00:00:00Z",
					new_workspace_path: "x"
				}
			],
			[source({ is_move_enabled: false })]
		);
		expect(u).toMatchObject({
			data_started: "2020-01-01T00:00:00Z",
			data_ended: null,
			data_types: [],
			geometry: null,
			meta_data: null,
			new_path: null
		});
	});

	it("ignores bad times and unreadable geo_json", () => {
		const [u] = planParseUpdates(
			[
				{
					filename: "scene.tif",
					geo_metadata: { data_started: "not a date", geo_json: { type: "Nope" } }
				}
			],
			[source()]
		);
		expect(u).toMatchObject({ data_started: null, geometry: null, meta_data: null });
	});
});

describe("moveSourceFiles", () => {
	it("moves files inside the workspace, and undoMoves puts them back", async () => {
		const dir = await fs.mkdtemp(path.join(os.tmpdir(), "parse-move-"));
		try {
			await fs.mkdir(path.join(dir, "in"));
			await fs.writeFile(path.join(dir, "in", "scene.tif"), "x");
			const src = source({ workspace_host_path: dir });
			const updates = planParseUpdates(
				[{ filename: "scene.tif", new_workspace_path: "out/1" }],
				[src]
			);
			const warnings: string[] = [];
			const moves = await moveSourceFiles(updates, [src], m => warnings.push(m));
			expect(warnings).toEqual([]);
			expect(moves).toHaveLength(1);
			await expect(fs.readFile(path.join(dir, "out/1/scene.tif"), "utf8")).resolves.toBe("x");
			await undoMoves(moves);
			await expect(fs.readFile(path.join(dir, "in/scene.tif"), "utf8")).resolves.toBe("x");
		} finally {
			await fs.rm(dir, { recursive: true, force: true });
		}
	});

	it("keeps the old path, with a warning, when the file cannot be moved", async () => {
		const src = source({ workspace_host_path: "/nonexistent-workspace-dir" });
		const updates = planParseUpdates(
			[{ filename: "scene.tif", new_workspace_path: "o" }],
			[src]
		);
		const warnings: string[] = [];
		expect(await moveSourceFiles(updates, [src], m => warnings.push(m))).toEqual([]);
		expect(updates[0].new_path).toBeNull();
		expect(warnings).toHaveLength(1);
	});
});
