import fs from "fs";
import os from "os";
import path from "path";
import { stageInputs } from "../../../lib/agent/task";

let root: string;
let source: string;

beforeAll(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-inputs-"));
	source = path.join(root, "source.txt");
	fs.writeFileSync(source, "data\n");
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const INTERFACE = {
	input_data: [
		{ name: "one", type: "file", required: true },
		{ name: "many", type: "files", required: true },
		{ name: "label", type: "property", required: true },
		{ name: "maybe", type: "file", required: false }
	]
};

function spec(inputs: Record<string, unknown>) {
	return { interface: INTERFACE, inputs } as any;
}

const file = (fileName: string) => ({ fileName, hostPath: source });
const failureOf = (p: Promise<unknown>) =>
	p.then(
		() => null,
		(error: any) => ({ name: error.errorName, message: error.message })
	);

describe("stageInputs", () => {
	it("copies files under their input's folder and answers the substitution values", async () => {
		const dir = path.join(root, "ok");
		const values = await stageInputs(
			spec({
				one: { files: [file("a.txt")] },
				many: { files: [file("b.txt"), file("c.txt")] },
				label: { value: "see" },
				unknown: { value: "ignored" }
			}),
			dir,
			() => false
		);
		expect(values).toEqual({
			one: path.join(dir, "one", "a.txt"),
			many: path.join(dir, "many"),
			label: "see",
			maybe: null
		});
		expect(fs.readdirSync(path.join(dir, "many")).sort()).toEqual(["b.txt", "c.txt"]);
		expect(fs.readFileSync(path.join(dir, "one", "a.txt"), "utf8")).toBe("data\n");
	});

	it("refuses inputs that do not fit the interface (task-launch), naming the input", async () => {
		const base = {
			one: { files: [file("a.txt")] },
			many: { files: [file("b.txt")] },
			label: { value: "see" }
		};
		const dir = path.join(root, "refused");
		const cases: [Record<string, unknown>, RegExp][] = [
			[{ ...base, label: undefined }, /the required input "label" has no value/],
			[{ ...base, many: { files: [] } }, /the required input "many" has no value/],
			[{ ...base, label: { files: [file("x")] } }, /"label" was given files/],
			[{ ...base, one: { value: "x" } }, /the file input "one" was given a value/],
			[{ ...base, one: { files: [file("a"), file("b")] } }, /"one" was given 2 files/],
			[{ ...base, many: { files: [file("d"), file("d")] } }, /two files named "d"/],
			[{ ...base, many: { files: [file("../d")] } }, /not a plain file name/]
		];
		for (const [inputs, message] of cases) {
			const failure = await failureOf(stageInputs(spec(inputs), dir, () => false));
			expect(failure?.name).toBe("task-launch");
			expect(failure?.message).toMatch(message);
		}
	});

	it("fails with filesystem-io when a file cannot be copied", async () => {
		const failure = await failureOf(
			stageInputs(
				spec({
					one: { files: [{ fileName: "a.txt", hostPath: path.join(root, "missing") }] },
					many: { files: [file("b.txt")] },
					label: { value: "see" }
				}),
				path.join(root, "io"),
				() => false
			)
		);
		expect(failure?.name).toBe("filesystem-io");
		expect(failure?.message).toMatch(/could not stage the input "one"/);
	});

	it("stops copying once the execution is abandoned", async () => {
		const dir = path.join(root, "abandoned");
		await stageInputs(
			spec({
				one: { files: [file("a.txt")] },
				many: { files: [file("b.txt"), file("c.txt")] },
				label: { value: "see" }
			}),
			dir,
			() => true
		);
		expect(fs.existsSync(path.join(dir, "one", "a.txt"))).toBe(false);
	});

	it("links a partial input's file in its bucket's mount, never one whose path leaves the mount", async () => {
		const mount = path.join(root, "mount");
		fs.mkdirSync(path.join(mount, "in"), { recursive: true });
		fs.writeFileSync(path.join(mount, "in", "a.txt"), "mounted\n");
		fs.symlinkSync(source, path.join(mount, "in", "away.txt"));
		// no store answers there: a file not read through the mount fails to download
		const s3 = (key: string) => ({
			bucket: "b",
			key,
			endpoint: "http://127.0.0.1:9",
			region: "us-east-1",
			credentials: { accessKeyId: "a", secretAccessKey: "b" }
		});
		const inBucket = (fileName: string, key: string) => ({
			fileName,
			hostPath: `s3://b/${key}`,
			s3: s3(key),
			mountRoot: mount
		});
		const partialSpec = (files: unknown[]) => ({
			interface: {
				input_data: [{ name: "in", type: "files", required: true, partial: true }]
			},
			inputs: { in: { files } }
		});
		const dir = path.join(root, "partial");
		const mounted: string[] = [];
		const values = await stageInputs(
			partialSpec([inBucket("a.txt", "in/a.txt")]) as any,
			dir,
			() => false,
			undefined,
			mounted
		);
		const linked = path.join(dir, "in", "a.txt");
		expect(values).toEqual({ in: path.join(dir, "in") });
		expect(fs.readlinkSync(linked)).toBe(path.join(fs.realpathSync(mount), "in", "a.txt"));
		expect(mounted).toEqual([fs.readlinkSync(linked)]);
		for (const key of ["in/away.txt", "../source.txt", "in/missing.txt"]) {
			const outside = path.join(root, `outside-${mounted.length}-${key.length}`);
			const failure = await failureOf(
				stageInputs(
					partialSpec([inBucket("x.txt", key)]) as any,
					outside,
					() => false,
					undefined,
					mounted
				)
			);
			expect(failure?.name).toBe("filesystem-io");
			expect(fs.existsSync(path.join(outside, "in", "x.txt"))).toBe(false);
		}
		expect(mounted).toHaveLength(1);
	}, 30000);
});
