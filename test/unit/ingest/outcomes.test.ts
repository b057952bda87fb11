import fs from "fs";
import os from "os";
import path from "path";
import { Folder } from "../../../lib/ingest/file-paths";
import type { FsMoved } from "../../../lib/ingest/fs-batch";
import { FsThread } from "../../../lib/ingest/fs-thread";
import { copyAcross, outcomeOf, type BatchContext } from "../../../lib/ingest/outcomes";
import type { Decision } from "../../../lib/ingest/protocol";

let root: string;
let watched: string;
let workspace: string;
let files: FsThread;
let warned: string[];
let calls: string[];

beforeEach(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-outcomes-"));
	watched = path.join(root, "incoming");
	workspace = path.join(root, "workspace");
	fs.mkdirSync(path.join(watched, "errored"), { recursive: true });
	fs.mkdirSync(workspace);
	files = new FsThread();
	warned = [];
	calls = [];
});

afterEach(async () => {
	await files.stop();
	fs.rmSync(root, { recursive: true, force: true });
});

function context(answer: unknown = { ok: true }): BatchContext {
	return {
		strikeId: 4,
		directory: watched,
		folder: new Folder(path.join, watched),
		files,
		leaving: new Set(["a.dat"]),
		call: async action => {
			calls.push(action);
			return answer;
		},
		warn: message => warned.push(message)
	};
}

const ingest = (name: string): Decision => ({
	name,
	ingestId: 9,
	action: "ingest",
	target: path.join(workspace, name)
});

describe("outcomeOf", () => {
	it("counts a file moved into its workspace INGESTED at the size it arrived with", async () => {
		const ctx = context();
		expect(await outcomeOf(ctx, ingest("a.dat"), { to: "/ws/a.dat" }, 12)).toEqual({
			ingestId: 9,
			status: "INGESTED",
			size: 12
		});
		expect(ctx.leaving.has("a.dat")).toBe(true);
	});

	it("takes a file an earlier monitor stored already (same size), removing the leftover", async () => {
		fs.writeFileSync(path.join(watched, "a.dat"), "same");
		fs.writeFileSync(path.join(workspace, "a.dat"), "same");
		const ctx = context();
		const error = { code: "EEXIST", message: "exists", targetExists: true };
		expect(await outcomeOf(ctx, ingest("a.dat"), { error }, 4)).toEqual({
			ingestId: 9,
			status: "INGESTED",
			size: 4
		});
		expect(fs.existsSync(path.join(watched, "a.dat"))).toBe(false);
		expect(ctx.leaving.has("a.dat")).toBe(false);
	});

	it("puts a file aside ERRORED when the workspace holds another file under its name", async () => {
		fs.writeFileSync(path.join(watched, "a.dat"), "mine");
		fs.writeFileSync(path.join(workspace, "a.dat"), "another file");
		const error = { code: "EEXIST", message: "exists", targetExists: true };
		expect(await outcomeOf(context(), ingest("a.dat"), { error }, 4)).toEqual({
			ingestId: 9,
			status: "ERRORED",
			reason: `the workspace already holds another file at ${path.join(workspace, "a.dat")}`
		});
		expect(fs.readdirSync(path.join(watched, "errored"))).toHaveLength(1);
		expect(fs.existsSync(path.join(watched, "a.dat"))).toBe(false);
	});

	it("reports a file gone before it could be stored as lost", async () => {
		const error = { code: "ENOENT", message: "no such file", targetExists: false };
		expect(await outcomeOf(context(), ingest("a.dat"), { error }, 4)).toEqual({
			ingestId: 9,
			status: "ERRORED",
			reason: "the file is lost"
		});
	});

	it("leaves a file it cannot put aside in place, warned of, for the next rescan", async () => {
		fs.writeFileSync(path.join(watched, "a.dat"), "x");
		const aside: Decision = { name: "a.dat", ingestId: 9, action: "aside", status: "DEFERRED" };
		const error = { code: "EACCES", message: "permission denied", targetExists: false };
		expect(await outcomeOf(context(), aside, { error }, 1)).toBeNull();
		expect(warned).toEqual([
			`strike 4: cannot move ${path.join(watched, "a.dat")} aside: permission denied; left in place`
		]);
	});
});

describe("copyAcross", () => {
	/** a move left undone: it would have been a copy to another file system */
	const crossDevice = (): FsMoved => ({
		error: { code: "EXDEV", message: "cross-device", targetExists: false, copyNeeded: true }
	});

	it("shows the files to copy INGESTING, then copies them", async () => {
		fs.writeFileSync(path.join(watched, "a.dat"), "across");
		const moved: FsMoved[] = [crossDevice()];
		const waiting = await copyAcross(context(), [ingest("a.dat")], moved);
		expect([...waiting]).toEqual([]);
		expect(calls).toEqual(["ingest.ingesting"]);
		expect(moved[0]).toEqual({ to: path.join(workspace, "a.dat") });
		expect(fs.readFileSync(path.join(workspace, "a.dat"), "utf8")).toBe("across");
	});

	it("leaves them in the directory when the control plane could not be told", async () => {
		fs.writeFileSync(path.join(watched, "a.dat"), "across");
		const ctx = context(null);
		const moved: FsMoved[] = [crossDevice()];
		expect([...(await copyAcross(ctx, [ingest("a.dat")], moved))]).toEqual([0]);
		expect(ctx.leaving.has("a.dat")).toBe(false);
		expect(fs.existsSync(path.join(workspace, "a.dat"))).toBe(false);
	});
});
