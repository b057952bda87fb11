import fs from "fs";
import path from "path";
import { commandOf, prepareTaskDir, readResults } from "../../../lib/agent/steps";
import { removeTempDirs, spec, tempDir } from "../../fixtures/agent";

afterAll(removeTempDirs);

describe("commandOf", () => {
	it("substitutes the inputs and the output directory into the arguments", () => {
		const s = spec({ command: "/bin/echo", commandArguments: "-i ${in} -o ${job_output_dir}" });
		expect(commandOf(s, { in: "/data/a b.txt" }, "/task/outputs")).toEqual({
			command: "/bin/echo",
			args: ["-i", "/data/a b.txt", "-o", "/task/outputs"],
			display: "-i /data/a b.txt -o /task/outputs"
		});
	});

	it("fails the launch when the arguments cannot be split, naming the problem", () => {
		const s = spec({ command: "/bin/echo", commandArguments: "'unclosed" });
		expect(() => commandOf(s, {}, "/task/outputs")).toThrow(
			expect.objectContaining({
				errorName: "task-launch",
				detail: expect.stringMatching(
					/^the command arguments cannot be used: .*unclosed single quote/
				)
			})
		);
	});

	it("fails a container job type without an image as docker-task-launch", () => {
		const s = spec({ command: "run", commandArguments: "", jobType: { usesDocker: true } });
		expect(() => commandOf(s, {}, "/task/outputs")).toThrow(
			expect.objectContaining({
				errorName: "docker-task-launch",
				detail: "the job type my-job 1.0.0 uses Docker but has no docker image"
			})
		);
	});
});

describe("prepareTaskDir", () => {
	it("makes the task and outputs directories, replacing a stale one", async () => {
		const root = tempDir("steps-");
		const taskDir = path.join(root, "tasks", "5");
		fs.mkdirSync(taskDir, { recursive: true });
		fs.writeFileSync(path.join(taskDir, "stale"), "left by an earlier run");
		const outputDir = path.join(taskDir, "outputs");
		expect(await prepareTaskDir(taskDir, outputDir, undefined, null, false)).toBe(false);
		expect(fs.readdirSync(taskDir)).toEqual(["outputs"]);
	});

	it("fails as filesystem-io when the directory cannot be made", async () => {
		const root = tempDir("steps-");
		fs.writeFileSync(path.join(root, "file"), "");
		const taskDir = path.join(root, "file", "5");
		await expect(
			prepareTaskDir(taskDir, path.join(taskDir, "outputs"), undefined, null, false)
		).rejects.toMatchObject({
			errorName: "filesystem-io",
			detail: expect.stringContaining(`could not make the task directory ${taskDir}`)
		});
	});
});

describe("readResults", () => {
	it("answers null when the task left neither a manifest nor ARTIFACT lines", async () => {
		const root = tempDir("steps-");
		fs.mkdirSync(path.join(root, "outputs"));
		fs.writeFileSync(path.join(root, "stdout"), "just output\n");
		expect(await readResults(path.join(root, "outputs"), path.join(root, "stdout"))).toBeNull();
	});

	it("answers the ARTIFACT lines of stdout as a manifest", async () => {
		const root = tempDir("steps-");
		fs.mkdirSync(path.join(root, "outputs"));
		fs.writeFileSync(path.join(root, "stdout"), "ARTIFACT:result:out.txt\n");
		const results = await readResults(path.join(root, "outputs"), path.join(root, "stdout"));
		expect(results?.output_data).toEqual([{ name: "result", file: { path: "out.txt" } }]);
	});
});
