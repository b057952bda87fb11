import fs from "fs";
import path from "path";
import {
	DirectLauncher,
	LaunchError,
	LauncherPool,
	launcherScript,
	type Launcher,
	type LaunchRequest
} from "../../../lib/agent/launcher";
import { job, makeJobsExecutable, removeTempDirs, tempDir } from "../../fixtures/agent";

let dir: string;

beforeAll(() => {
	makeJobsExecutable();
	dir = tempDir("launch");
});

afterAll(() => removeTempDirs());

function request(command: string, args: string[], name: string): LaunchRequest {
	return {
		command,
		args,
		cwd: dir,
		env: { PATH: "/usr/bin:/bin", ONLY: "this" },
		stdoutPath: path.join(dir, `${name}.out`),
		stderrPath: path.join(dir, `${name}.err`)
	};
}

/** Whether a process runs (a zombie, killed but not yet reaped by its new parent, does not). */
function alive(pid: number): boolean {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
		return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
	} catch {
		return false;
	}
}

it("finds or builds the launcher script", () => {
	const script = launcherScript();
	expect(fs.existsSync(script)).toBe(true);
	expect(fs.readFileSync(script, "utf8")).toMatch(/spawnTask/);
});

describe.each([
	["a pool of launcher processes", () => new LauncherPool(2)],
	["direct spawning", () => new DirectLauncher()]
])("%s", (_name, make: () => Launcher) => {
	let launcher: Launcher;
	beforeAll(() => {
		launcher = make();
	});
	afterAll(() => launcher.stop());

	it("runs a process with its output in files, its environment and directory", async () => {
		const launched = await launcher.launch(
			request("/bin/sh", ["-c", 'echo "$ONLY $(pwd)"; echo err >&2; exit 4', "sh"], "a")
		);
		expect(launched.pid).toBeGreaterThan(0);
		expect(await launched.exited).toEqual({ code: 4, signal: null });
		expect(fs.readFileSync(path.join(dir, "a.out"), "utf8")).toBe(`this ${dir}\n`);
		expect(fs.readFileSync(path.join(dir, "a.err"), "utf8")).toBe("err\n");
	});

	it("rejects with the errno name when the command cannot be started", async () => {
		const error = await launcher
			.launch(request("/no/such/thing", [], "b"))
			.catch((e: unknown) => e);
		expect(error).toBeInstanceOf(LaunchError);
		expect((error as LaunchError).code).toBe("ENOENT");
		const notExecutable = path.join(dir, "plain.txt");
		fs.writeFileSync(notExecutable, "");
		const denied = await launcher.launch(request(notExecutable, [], "c")).catch(e => e);
		expect((denied as LaunchError).code).toBe("EACCES");
	});

	it("signals the whole process group", async () => {
		const launched = await launcher.launch(request(job("sleep.sh"), ["30"], "d"));
		await new Promise(r => setTimeout(r, 200));
		launched.kill("SIGTERM");
		expect(await launched.exited).toEqual({ code: null, signal: "SIGTERM" });
		expect(alive(launched.pid)).toBe(false);
	});

	it("runs many at once", async () => {
		const all = await Promise.all(
			Array.from({ length: 40 }, (_, i) =>
				launcher.launch(request("/bin/sh", ["-c", `exit ${i % 7}`], `many${i}`))
			)
		);
		const codes = await Promise.all(all.map(l => l.exited.then(s => s.code)));
		expect(codes).toEqual(Array.from({ length: 40 }, (_, i) => i % 7));
	});
});

describe("a launcher process that dies", () => {
	it("loses its tasks (killing them) and is replaced", async () => {
		const pool = new LauncherPool(1);
		try {
			const launched = await pool.launch(request(job("sleep.sh"), ["30"], "e"));
			const child = (pool as any).pool[0].child;
			child.kill("SIGKILL");
			const status = await launched.exited;
			expect(status.code).toBeNull();
			expect(status.lost).toMatch(/launcher process exited/);
			await new Promise(r => setTimeout(r, 100));
			expect(alive(launched.pid)).toBe(false);
			// a new launcher takes its place
			const next = await pool.launch(request("/bin/true", [], "f"));
			expect(await next.exited).toEqual({ code: 0, signal: null });
			expect((pool as any).pool[0].child).not.toBe(child);
		} finally {
			await pool.stop();
		}
	});

	it("terminates its tasks when the agent goes away", async () => {
		const pool = new LauncherPool(1);
		const launched = await pool.launch(request(job("sleep.sh"), ["30"], "g"));
		await pool.stop();
		const deadline = Date.now() + 5000;
		while (alive(launched.pid) && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 50));
		expect(alive(launched.pid)).toBe(false);
		await expect(pool.launch(request("/bin/true", [], "h"))).rejects.toThrow(/stopping/);
	});
});
