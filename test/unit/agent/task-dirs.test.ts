import fs from "fs";
import path from "path";
import { TaskDirs } from "../../../lib/agent/task";
import { removeTempDirs, tempDir } from "../../fixtures/agent";

afterAll(() => removeTempDirs());

/** A finished task directory as an execution leaves it: logs and an output directory. */
function finishedTask(workDir: string, id: number, logs = "printed\n"): string {
	const dir = path.join(workDir, "tasks", String(id));
	fs.mkdirSync(path.join(dir, "outputs"), { recursive: true });
	fs.writeFileSync(path.join(dir, "stdout"), logs);
	fs.writeFileSync(path.join(dir, "stderr"), "");
	return dir;
}

const logsOf = (dir: string) => [path.join(dir, "stdout"), path.join(dir, "stderr")];

describe("TaskDirs", () => {
	it("has nothing to give out at first: the caller makes the directory", async () => {
		const workDir = tempDir("spares");
		const dirs = new TaskDirs(workDir);
		expect(await dirs.take(path.join(workDir, "tasks", "1"))).toBe(false);
		expect(fs.existsSync(path.join(workDir, "tasks", "1"))).toBe(false);
	});

	it("keeps an emptied task directory and gives it to the next execution", async () => {
		const workDir = tempDir("spares");
		const dirs = new TaskDirs(workDir);
		const done = finishedTask(workDir, 1);
		expect(await dirs.give(done, logsOf(done))).toBe(true);
		expect(fs.existsSync(done)).toBe(false);

		const next = path.join(workDir, "tasks", "2");
		expect(await dirs.take(next)).toBe(true);
		expect(fs.readdirSync(next).sort()).toEqual(["outputs", "stderr", "stdout"]);
		expect(fs.readdirSync(path.join(next, "outputs"))).toEqual([]);
		// nothing of the earlier execution is left to read
		expect(fs.readFileSync(path.join(next, "stdout"), "utf8")).toBe("");
		expect(await dirs.take(path.join(workDir, "tasks", "3"))).toBe(false);
	});

	it("keeps nothing that holds more than its logs and an empty output directory", async () => {
		const workDir = tempDir("spares");
		const dirs = new TaskDirs(workDir);
		const withOutput = finishedTask(workDir, 1);
		fs.writeFileSync(path.join(withOutput, "outputs", "result.txt"), "x");
		expect(await dirs.give(withOutput, logsOf(withOutput))).toBe(false);
		expect(fs.readFileSync(path.join(withOutput, "outputs", "result.txt"), "utf8")).toBe("x");

		const withInputs = finishedTask(workDir, 2);
		fs.mkdirSync(path.join(withInputs, "inputs"));
		expect(await dirs.give(withInputs, logsOf(withInputs))).toBe(false);
		expect(fs.existsSync(withInputs)).toBe(true);
		expect(await dirs.take(path.join(workDir, "tasks", "3"))).toBe(false);
	});

	it("does not put a spare over a directory that is there already", async () => {
		const workDir = tempDir("spares");
		const dirs = new TaskDirs(workDir);
		const done = finishedTask(workDir, 1);
		await dirs.give(done, logsOf(done));
		const stale = finishedTask(workDir, 2, "stale\n");
		expect(await dirs.take(stale)).toBe(false);
		expect(fs.readFileSync(path.join(stale, "stdout"), "utf8")).toBe("stale\n");
		// the spare is still there for the next one
		expect(await dirs.take(path.join(workDir, "tasks", "3"))).toBe(true);
	});

	it("keeps spares under the names of the spares taken before making new ones", async () => {
		const workDir = tempDir("spares");
		const dirs = new TaskDirs(workDir);
		for (const id of [1, 2]) {
			const done = finishedTask(workDir, id);
			expect(await dirs.give(done, logsOf(done))).toBe(true);
		}
		expect(await dirs.take(path.join(workDir, "tasks", "3"))).toBe(true);
		expect(fs.readdirSync(path.join(workDir, "spare"))).toEqual(["0"]);
		const again = path.join(workDir, "tasks", "3");
		expect(await dirs.give(again, logsOf(again))).toBe(true);
		const done = finishedTask(workDir, 4);
		expect(await dirs.give(done, logsOf(done))).toBe(true);
		expect(fs.readdirSync(path.join(workDir, "spare")).sort()).toEqual(["0", "1", "2"]);
	});

	it("reuses the spares an earlier run of the agent left", async () => {
		const workDir = tempDir("spares");
		const first = new TaskDirs(workDir);
		for (const id of [1, 2]) {
			const done = finishedTask(workDir, id);
			await first.give(done, logsOf(done));
		}
		const second = new TaskDirs(workDir);
		expect(await second.take(path.join(workDir, "tasks", "3"))).toBe(true);
		const done = finishedTask(workDir, 4);
		expect(await second.give(done, logsOf(done))).toBe(true);
		// the name of the spare taken is given to the next one kept
		expect(fs.readdirSync(path.join(workDir, "spare")).sort()).toEqual(["0", "1"]);
		expect(await second.take(path.join(workDir, "tasks", "5"))).toBe(true);
		expect(await second.take(path.join(workDir, "tasks", "6"))).toBe(true);
		expect(await second.take(path.join(workDir, "tasks", "7"))).toBe(false);
	});
});
