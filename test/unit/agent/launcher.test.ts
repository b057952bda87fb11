import { spawn } from "child_process";
import fs from "fs";
import path from "path";
import {
	DirectLauncher,
	LaunchError,
	LauncherPool,
	createLauncher,
	launcherScript,
	type Launcher,
	type LauncherKind,
	type LaunchRequest
} from "../../../lib/agent/launcher";
import { compileNativeLauncher, nativeLauncherBinary } from "../../../lib/agent/native-launcher";
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

/** The native launcher, compiled from native/launcher.c (this machine has a C compiler). */
function native(): LauncherKind {
	const binary = nativeLauncherBinary();
	if ("problem" in binary) throw new Error(binary.problem);
	return { kind: "native", binary: binary.path };
}

it("finds or builds the launcher script", () => {
	const script = launcherScript();
	expect(fs.existsSync(script)).toBe(true);
	expect(fs.readFileSync(script, "utf8")).toMatch(/spawnTask/);
});

it("compiles the native launcher once, named by its source", () => {
	const first = native();
	expect(first.kind === "native" && fs.statSync(first.binary).mode & 0o111).toBeTruthy();
	expect(native()).toEqual(first);
	expect(first.kind === "native" && path.basename(first.binary)).toMatch(
		/^scale-launcher-[0-9a-f]{12}$/
	);
});

describe("compiling the native launcher", () => {
	const source = path.join(__dirname, "../../../native/launcher.c");

	it("compiles into the folder given, and keeps only the binary of the current source", () => {
		const build = path.join(dir, "build");
		fs.mkdirSync(build);
		fs.writeFileSync(path.join(build, "scale-launcher-0123456789ab"), "an older one");
		const binary = compileNativeLauncher(source, build);
		expect(binary).toEqual({ path: expect.stringMatching(/scale-launcher-[0-9a-f]{12}$/) });
		expect(fs.readdirSync(build)).toEqual([path.basename((binary as { path: string }).path)]);
		expect(compileNativeLauncher(source, build, "/no/such/cc")).toEqual(binary);
	});

	it("says why when there is no compiler or the source does not compile", () => {
		expect(compileNativeLauncher(source, path.join(dir, "b2"), "/no/such/cc")).toEqual({
			problem: expect.stringMatching(/could not be compiled: .*ENOENT/)
		});
		const broken = path.join(dir, "broken.c");
		fs.writeFileSync(broken, "int main(void) { return nope; }\n");
		expect(compileNativeLauncher(broken, path.join(dir, "b3"))).toEqual({
			problem: expect.stringMatching(/could not be compiled: [^]*nope. undeclared/)
		});
		expect(fs.readdirSync(path.join(dir, "b3"))).toEqual([]);
	});
});

describe("a native launcher that cannot be started", () => {
	it("fails the launches, and is tried again a second later, not in a loop", async () => {
		const pool = new LauncherPool(1, { kind: "native", binary: path.join(dir, "no-such") });
		try {
			await expect(pool.launch(request("/bin/true", [], "m1"))).rejects.toThrow(
				/launcher process could not be started: .*ENOENT/
			);
			const dead = (pool as any).pool[0];
			await expect(pool.launch(request("/bin/true", [], "m2"))).rejects.toThrow(
				/no launcher process is available/
			);
			await new Promise(r => setTimeout(r, 500));
			expect((pool as any).pool[0]).toBe(dead);
			await new Promise(r => setTimeout(r, 800));
			expect((pool as any).pool[0]).not.toBe(dead);
		} finally {
			await pool.stop();
		}
	});
});

describe("the native launcher's protocol", () => {
	function frame(fields: string[]): Buffer {
		const body = Buffer.from(`${fields.join("\0")}\0`);
		const length = Buffer.alloc(4);
		length.writeUInt32LE(body.length);
		return Buffer.concat([length, body]);
	}

	it("answers malformed requests without starting anything, and goes on serving", async () => {
		const kind = native();
		const child = spawn(kind.kind === "native" ? kind.binary : "", [], {
			stdio: ["pipe", "pipe", "pipe"]
		});
		let out = "";
		let err = "";
		child.stdout.on("data", chunk => (out += chunk));
		child.stderr.on("data", chunk => (err += chunk));
		const empty = path.join(dir, "proto.out");
		child.stdin.write(
			Buffer.concat([
				frame(["s", "1"]), // too few fields
				frame([
					"s",
					"2",
					"0",
					"/bin/true",
					dir,
					empty,
					empty,
					"-1",
					"-1",
					"99999999999",
					"x"
				]),
				frame(["s", "3", "0", "/bin/true", dir, empty, empty, "-1", "-1", "0", "5", "A=1"]),
				frame(["z", "4"]), // unknown
				frame(["s", "5", "0", "/bin/true", dir, empty, empty, "-1", "-1", "0", "0"])
			])
		);
		const deadline = Date.now() + 5000;
		while (!/^x 5 0 0$/m.test(out) && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 20));
		child.stdin.end();
		await new Promise(r => child.once("exit", r));
		expect(out).toMatch(/^f 1 22\nf 2 22\nf 3 22\np 5 \d+\nx 5 0 0\n$/);
		expect(err).toMatch(/an unknown request was ignored/);
	});
});

describe("choosing a launcher", () => {
	it("falls back to Node launchers when the native one cannot be had, unless it is required", async () => {
		const none = () => ({ problem: "no C compiler here" });
		const chosen = createLauncher(1, "auto", none);
		try {
			expect(chosen.description).toBe("1 Node launcher processes");
			expect(chosen.fallback).toBe("no C compiler here");
			const launched = await chosen.launcher.launch(request("/bin/true", [], "fallback"));
			expect(await launched.exited).toMatchObject({ code: 0, signal: null });
		} finally {
			await chosen.launcher.stop();
		}
		expect(() => createLauncher(1, "native", none)).toThrow("no C compiler here");
	});

	it("takes native launchers where they can be had, Node ones when asked", async () => {
		const auto = createLauncher(1, "auto");
		const node = createLauncher(1, "node");
		const direct = createLauncher(0, "native");
		try {
			expect(auto.description).toMatch(/^1 native launcher processes/);
			expect(auto.fallback).toBeUndefined();
			expect(node.description).toBe("1 Node launcher processes");
			expect(direct.description).toMatch(/direct/);
			for (const chosen of [auto, node, direct]) {
				const launched = await chosen.launcher.launch(request("/bin/true", [], "choice"));
				expect(await launched.exited).toMatchObject({ code: 0, signal: null });
			}
		} finally {
			await Promise.all([auto, node, direct].map(c => c.launcher.stop()));
		}
	});
});

describe.each([
	["a pool of Node launcher processes", () => new LauncherPool(2), false],
	["a pool of native launcher processes", () => new LauncherPool(2, native()), true],
	["direct spawning", () => new DirectLauncher(), false]
])("%s", (_name, make: () => Launcher, killsGroup: boolean) => {
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
		expect(await launched.exited).toMatchObject({ code: 4, signal: null });
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
		expect(await launched.exited).toMatchObject({ code: null, signal: "SIGTERM" });
		expect(alive(launched.pid)).toBe(false);
	});

	it(`${killsGroup ? "kills" : "leaves"} what the task left running in its process group`, async () => {
		const launched = await launcher.launch(
			request("/bin/sh", ["-c", "sleep 30 & echo $!", "sh"], "group")
		);
		const status = await launched.exited;
		const left = Number(fs.readFileSync(path.join(dir, "group.out"), "utf8"));
		expect(status.groupKilled === true).toBe(killsGroup);
		const deadline = Date.now() + 2000;
		while (killsGroup && alive(left) && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 20));
		expect(alive(left)).toBe(!killsGroup);
		// the agent's part when the launcher leaves it
		if (!killsGroup) process.kill(-launched.pid, "SIGKILL");
	});

	it("looks a bare command name up in the task's PATH, not the agent's", async () => {
		const found = await launcher.launch(request("sh", ["-c", "exit 3"], "path1"));
		expect(await found.exited).toMatchObject({ code: 3, signal: null });
		const elsewhere = { ...request("sh", ["-c", "exit 3"], "path2"), env: { PATH: dir } };
		const error = await launcher.launch(elsewhere).catch((e: unknown) => e);
		expect((error as LaunchError).code).toBe("ENOENT");
	});

	it("refuses a NUL byte in an argument without starting anything", async () => {
		const error = await launcher
			.launch(request("/bin/echo", ["a\0b"], "nul"))
			.catch((e: unknown) => e);
		expect(error).toBeInstanceOf(LaunchError);
		expect((error as LaunchError).code).toBe("ERR_INVALID_ARG_VALUE");
	});

	it("truncates output files, or appends to ones known to be empty", async () => {
		const out = path.join(dir, "trunc.out");
		fs.writeFileSync(out, "old content\n");
		const truncated = await launcher.launch(request("/bin/echo", ["new"], "trunc"));
		await truncated.exited;
		expect(fs.readFileSync(out, "utf8")).toBe("new\n");
		const appended = await launcher.launch({
			...request("/bin/echo", ["more"], "trunc"),
			outputFilesEmpty: true
		});
		await appended.exited;
		expect(fs.readFileSync(out, "utf8")).toBe("new\nmore\n");
	});

	it("sends stdout and stderr to one file when they name the same one", async () => {
		const both = path.join(dir, "both.log");
		const launched = await launcher.launch({
			...request("/bin/sh", ["-c", "echo one; echo two >&2", "sh"], "both"),
			stdoutPath: both,
			stderrPath: both
		});
		await launched.exited;
		expect(fs.readFileSync(both, "utf8")).toBe("one\ntwo\n");
	});

	it("gives the task default signal dispositions (SIGINT is ignored by launchers)", async () => {
		const launched = await launcher.launch(
			request("/bin/sh", ["-c", "kill -INT $$; exit 0", "sh"], "sigint")
		);
		expect(await launched.exited).toMatchObject({ code: null, signal: "SIGINT" });
	});

	it("passes long argument lists whole", async () => {
		const args = Array.from({ length: 20000 }, (_, i) => `argument-${i}`);
		const launched = await launcher.launch(
			request("/bin/sh", ["-c", 'echo "$# ${20000}"', "sh", ...args], "long")
		);
		expect(await launched.exited).toMatchObject({ code: 0, signal: null });
		expect(fs.readFileSync(path.join(dir, "long.out"), "utf8")).toBe("20000 argument-19999\n");
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

describe.each([
	["a Node launcher process", (): LauncherKind => ({ kind: "node" })],
	["a native launcher process", native]
])("%s that dies", (_name, kind: () => LauncherKind) => {
	it("loses its tasks (killing them) and is replaced", async () => {
		const pool = new LauncherPool(1, kind());
		try {
			const launched = await pool.launch(request(job("sleep.sh"), ["30"], "e"));
			const child = (pool as any).pool[0].channel.child;
			child.kill("SIGKILL");
			const status = await launched.exited;
			expect(status.code).toBeNull();
			expect(status.lost).toMatch(/launcher process exited/);
			await new Promise(r => setTimeout(r, 100));
			expect(alive(launched.pid)).toBe(false);
			// a new launcher takes its place (a second after: this one died young)
			await expect(pool.launch(request("/bin/true", [], "f"))).rejects.toThrow(
				/no launcher process is available/
			);
			const deadline = Date.now() + 3000;
			while ((pool as any).pool[0].channel.child === child && Date.now() < deadline)
				await new Promise(r => setTimeout(r, 50));
			const next = await pool.launch(request("/bin/true", [], "f"));
			expect(await next.exited).toMatchObject({ code: 0, signal: null });
			expect((pool as any).pool[0].channel.child).not.toBe(child);
		} finally {
			await pool.stop();
		}
	});

	it("terminates its tasks when the agent goes away", async () => {
		const pool = new LauncherPool(1, kind());
		const launched = await pool.launch(request(job("sleep.sh"), ["30"], "g"));
		await pool.stop();
		const deadline = Date.now() + 5000;
		while (alive(launched.pid) && Date.now() < deadline)
			await new Promise(r => setTimeout(r, 50));
		expect(alive(launched.pid)).toBe(false);
		await expect(pool.launch(request("/bin/true", [], "h"))).rejects.toThrow(/stopping/);
	});
});
