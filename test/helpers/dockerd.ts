import { spawn, spawnSync } from "child_process";
import { createHash } from "crypto";
import fs from "fs";
import http from "http";
import os from "os";
import path from "path";

/**
 * A real Docker engine for the tests and the benches (which import this file too, as they do
 * ports.ts): Debian's `docker.io` (dockerd, containerd, runc, the docker CLI) and a busybox
 * image built from `busybox-static`, both installed here when run as root.
 *
 *     const engine = await startDockerd(); // { socket, host: "unix://...", stop() }
 *     const image = await ensureTestImage(engine.host); // "scale-test-busybox:1"
 *     ... DOCKER_HOST=engine.host, or new Docker({ socketPath: engine.socket }) ...
 *     await engine.stop();
 *
 * Jest's globalSetup starts one for the whole run; test files get it from `requireTestDocker()`.
 */

export const TEST_IMAGE = "scale-test-busybox:1";

const BUSYBOX = "/bin/busybox";

function commandPath(name: string, also: string[] = []): string | null {
	const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" });
	if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
	return also.find(file => fs.existsSync(file)) ?? null;
}

function dockerdPath(): string | null {
	return commandPath("dockerd", ["/usr/sbin/dockerd", "/usr/bin/dockerd"]);
}

/** The docker CLI (the node agent's `dockerCommand`): /usr/local/bin/docker or docker.io's. */
export function dockerCliPath(): string {
	const found = commandPath("docker", ["/usr/local/bin/docker", "/usr/bin/docker"]);
	if (!found) throw new Error("the docker CLI is missing: install Debian's docker.io package");
	return found;
}

/** Whether an ELF executable asks for a dynamic loader (a PT_INTERP program header). */
function isDynamic(file: string): boolean {
	const elf = fs.readFileSync(file);
	if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2) return true; // not a 64-bit ELF
	const phoff = Number(elf.readBigUInt64LE(0x20));
	const phentsize = elf.readUInt16LE(0x36);
	const phnum = elf.readUInt16LE(0x38);
	for (let i = 0; i < phnum; i++) if (elf.readUInt32LE(phoff + i * phentsize) === 3) return true;
	return false;
}

/** What is missing of dockerd and a static /bin/busybox (Debian's `busybox` is dynamic). */
function missingPackages(): string[] {
	const missing: string[] = [];
	if (!dockerdPath()) missing.push("docker.io");
	if (!fs.existsSync(BUSYBOX) || isDynamic(BUSYBOX)) missing.push("busybox-static");
	return missing;
}

/**
 * Installs Debian's `docker.io` and `busybox-static` when dockerd or a static /bin/busybox is
 * missing. As root (as CI runs) they are installed here; otherwise this throws the one command
 * that installs them.
 */
export function ensureDockerPackages(): void {
	const missing = missingPackages();
	if (missing.length === 0) return;
	const command = ["apt-get", "install", "-y", "-q", ...missing];
	if (process.getuid && process.getuid() !== 0)
		throw new Error(
			`${missing.join(" and ")} missing: run \`sudo ${command.join(" ")}\`, then the tests again`
		);
	const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
	let install = spawnSync(command[0], command.slice(1), { env, encoding: "utf8" });
	if (install.status !== 0) {
		// A fresh machine has no package lists yet.
		spawnSync("apt-get", ["update", "-q"], { env, stdio: "ignore" });
		install = spawnSync(command[0], command.slice(1), { env, encoding: "utf8" });
	}
	const still = missingPackages();
	if (still.length > 0)
		throw new Error(`installing ${still.join(" and ")} failed: ${install.stderr}`);
}

export interface Dockerd {
	/** the engine's unix socket, for `new Docker({ socketPath })` */
	socket: string;
	/** unix://<socket>, for DOCKER_HOST */
	host: string;
	stop(): Promise<void>;
}

/** The socket file of a unix:// DOCKER_HOST (the only kind these helpers speak). */
export function dockerSocket(host: string): string {
	if (host.startsWith("unix://")) return host.slice("unix://".length);
	if (host.startsWith("/")) return host;
	throw new Error(`${host}: only a unix:// Docker host is supported here`);
}

interface EngineAnswer {
	status: number;
	body: string;
}

/** One Engine API request on `socket`; `upload` is a file sent as the body. */
function engineRequest(
	socket: string,
	method: string,
	url: string,
	options: { timeoutMs?: number; upload?: string } = {}
): Promise<EngineAnswer> {
	return new Promise((resolve, reject) => {
		const request = http.request(
			{
				socketPath: socket,
				method,
				path: url,
				timeout: options.timeoutMs ?? 60_000,
				headers: options.upload ? { "Content-Type": "application/x-tar" } : {}
			},
			response => {
				let body = "";
				response.setEncoding("utf8");
				response.on("data", chunk => (body += chunk));
				response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
				response.on("error", reject);
			}
		);
		request.on("timeout", () => request.destroy(new Error(`${method} ${url}: timed out`)));
		request.on("error", reject);
		if (options.upload) fs.createReadStream(options.upload).on("error", reject).pipe(request);
		else request.end();
	});
}

async function pings(socket: string): Promise<boolean> {
	const answer = await engineRequest(socket, "GET", "/_ping", { timeoutMs: 2000 }).catch(
		() => null
	);
	return answer?.status === 200;
}

function logTail(file: string): string {
	try {
		return fs.readFileSync(file, "utf8").split("\n").slice(-20).join("\n");
	} catch {
		return "(no log)";
	}
}

/** Unmounts whatever is still mounted under `dir` (a container's, a killed engine's). */
function unmountUnder(dir: string): void {
	let mounts: string[];
	try {
		mounts = fs
			.readFileSync("/proc/mounts", "utf8")
			.split("\n")
			.map(line => (line.split(" ")[1] ?? "").replace(/\\040/g, " "))
			.filter(point => point.startsWith(dir + "/"));
	} catch {
		return;
	}
	for (const point of mounts.sort((a, b) => b.length - a.length))
		spawnSync("umount", ["-l", point], { stdio: "ignore" });
}

/**
 * SIGKILLs the containers running on the engine: dockerd stops them one by one, each given its
 * stop timeout (10 s) after a SIGTERM that a shell or `sleep` as PID 1 ignores.
 */
async function killContainers(socket: string): Promise<void> {
	const list = await engineRequest(socket, "GET", "/containers/json", { timeoutMs: 5000 }).catch(
		() => null
	);
	if (list?.status !== 200) return;
	const ids = (JSON.parse(list.body) as { Id: string }[]).map(c => c.Id);
	await Promise.all(
		ids.map(id =>
			engineRequest(socket, "POST", `/containers/${id}/kill`, { timeoutMs: 5000 }).catch(
				() => null
			)
		)
	);
}

/**
 * SIGKILLs what a SIGKILLed dockerd leaves running: its containerd, the containers' shims
 * (given containerd's socket) and the containers' processes (in a cgroup named by the id).
 */
function killLeftovers(dataRoot: string, execRoot: string): void {
	const address = path.join(execRoot, "containerd", "containerd.sock");
	let ids: string[] = [];
	try {
		ids = fs.readdirSync(path.join(dataRoot, "containers"));
	} catch {
		// no container ever created
	}
	const pids: number[] = [];
	try {
		pids.push(
			Number(fs.readFileSync(path.join(execRoot, "containerd", "containerd.pid"), "utf8"))
		);
	} catch {
		// gone already
	}
	for (const entry of fs.readdirSync("/proc").filter(e => /^\d+$/.test(e))) {
		try {
			const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
			const cgroup = ids.length > 0 ? fs.readFileSync(`/proc/${entry}/cgroup`, "utf8") : "";
			if (cmdline.includes(address) || ids.some(id => cgroup.includes(id)))
				pids.push(Number(entry));
		} catch {
			// exited meanwhile
		}
	}
	for (const pid of pids) {
		try {
			if (pid > 0) process.kill(pid, "SIGKILL");
		} catch {
			// exited meanwhile
		}
	}
}

const PING_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

/**
 * A Docker engine for a test run or a bench: `TEST_DOCKER_HOST`'s (a unix:// socket; stop()
 * leaves it running) when set, else a dockerd of our own, as root, even when the machine has
 * one of its own: its socket, data root, exec root, containerd and containerd namespaces are in
 * one temporary folder (short: unix socket paths are limited to 107 bytes, containerd's shim
 * sockets included), and stop() removes it.
 */
export async function startDockerd(): Promise<Dockerd> {
	const given = process.env.TEST_DOCKER_HOST;
	if (given) {
		const socket = dockerSocket(given);
		const deadline = Date.now() + PING_TIMEOUT_MS;
		while (!(await pings(socket))) {
			if (Date.now() > deadline)
				throw new Error(`TEST_DOCKER_HOST=${given}: no Docker engine answers there`);
			await new Promise(r => setTimeout(r, 100));
		}
		return { socket, host: `unix://${socket}`, stop: async () => undefined };
	}
	if (process.getuid && process.getuid() !== 0)
		throw new Error(
			"dockerd needs root: run as root, or set TEST_DOCKER_HOST=unix:///var/run/docker.sock " +
				"to use an engine already running"
		);
	ensureDockerPackages();
	const base = os.tmpdir().length <= 40 ? os.tmpdir() : "/tmp";
	const dir = fs.mkdtempSync(path.join(base, "scale-dk-"));
	const name = path.basename(dir);
	const socket = path.join(dir, "sock");
	const dataRoot = path.join(dir, "data");
	const execRoot = path.join(dir, "x");
	const logFile = path.join(dir, "log");
	// no /etc/docker/daemon.json of the machine's
	fs.writeFileSync(path.join(dir, "daemon.json"), "{}");
	const args = [
		"--config-file",
		path.join(dir, "daemon.json"),
		"--iptables=false",
		"--bridge=none",
		"--data-root",
		dataRoot,
		"--exec-root",
		execRoot,
		"--pidfile",
		path.join(dir, "pid"),
		"-H",
		`unix://${socket}`,
		// a containerd the machine already runs (/run/containerd) is shared: namespaces of our own
		"--containerd-namespace",
		name,
		"--containerd-plugins-namespace",
		`${name}-plugins`
	];
	const env = { ...process.env };
	for (const key of Object.keys(env)) if (key.startsWith("DOCKER_")) delete env[key];
	const log = fs.openSync(logFile, "a");
	const proc = spawn(dockerdPath()!, args, { env, stdio: ["ignore", log, log] });
	fs.closeSync(log);
	let exited = false;
	let spawnError = "";
	const exit = new Promise<void>(resolve => {
		proc.once("exit", () => {
			exited = true;
			resolve();
		});
		// not started at all: no "exit" follows
		proc.once("error", error => {
			spawnError = error.message;
			exited = true;
			resolve();
		});
	});
	// a run that ends without stop() (an interrupted jest) does not leave the engine behind
	const onExit = () => {
		if (!exited) proc.kill("SIGTERM");
	};
	process.once("exit", onExit);

	async function stop(): Promise<void> {
		process.removeListener("exit", onExit);
		if (!exited) {
			await killContainers(socket);
			proc.kill("SIGTERM");
			let timer: NodeJS.Timeout | undefined;
			const late = new Promise<boolean>(
				r => (timer = setTimeout(() => r(false), STOP_TIMEOUT_MS))
			);
			const inTime = await Promise.race([exit.then(() => true), late]);
			clearTimeout(timer);
			if (!inTime) {
				proc.kill("SIGKILL");
				await exit;
				killLeftovers(dataRoot, execRoot);
			}
		}
		unmountUnder(dir);
		try {
			fs.rmSync(dir, { recursive: true, force: true });
		} catch {
			// a mount still busy: the folder stays in the temp folder
		}
	}

	const deadline = Date.now() + PING_TIMEOUT_MS;
	while (!(await pings(socket))) {
		if (exited || Date.now() > deadline) {
			const why = spawnError
				? `did not start (${spawnError})`
				: exited
					? `exited (${proc.exitCode ?? proc.signalCode}) before answering`
					: `did not answer within ${PING_TIMEOUT_MS / 1000} s`;
			const tail = logTail(logFile);
			await stop();
			throw new Error(`dockerd ${why} on ${socket}; its log:\n${tail}`);
		}
		await new Promise(r => setTimeout(r, 50));
	}
	return { socket, host: `unix://${socket}`, stop };
}

/** Changed when what the image holds changes, so a cached tar of the old recipe is not used. */
const IMAGE_RECIPE = "1";

/**
 * The test image's root file system as a tar: /bin/busybox and a link per applet, /tmp (1777),
 * /root, and /etc/passwd and /etc/group with root and nobody. Kept in the temp folder under the
 * busybox binary's hash, so it is built once per machine.
 */
export function testImageTar(): string {
	const binary = fs.readFileSync(BUSYBOX);
	const hash = createHash("sha256").update(IMAGE_RECIPE).update(binary).digest("hex");
	const tar = path.join(os.tmpdir(), `scale-test-busybox-${hash.slice(0, 16)}.tar`);
	if (fs.existsSync(tar)) return tar;
	const work = fs.mkdtempSync(path.join(os.tmpdir(), "scale-test-busybox-"));
	try {
		const root = path.join(work, "root");
		for (const sub of ["bin", "etc", "tmp", "root"])
			fs.mkdirSync(path.join(root, sub), { recursive: true });
		fs.chmodSync(path.join(root, "tmp"), 0o1777);
		fs.chmodSync(path.join(root, "root"), 0o700);
		fs.writeFileSync(path.join(root, "bin", "busybox"), binary, { mode: 0o755 });
		const list = spawnSync(BUSYBOX, ["--list"], { encoding: "utf8" });
		if (list.status !== 0) throw new Error(`${BUSYBOX} --list failed: ${list.stderr}`);
		for (const applet of list.stdout.split("\n").map(a => a.trim()))
			if (applet && applet !== "busybox" && !applet.includes("/"))
				fs.symlinkSync("busybox", path.join(root, "bin", applet));
		fs.writeFileSync(
			path.join(root, "etc", "passwd"),
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
		);
		fs.writeFileSync(path.join(root, "etc", "group"), "root:x:0:\nnobody:x:65534:\n");
		const partial = path.join(work, "image.tar");
		const made = spawnSync(
			"tar",
			["--numeric-owner", "--owner=0", "--group=0", "-C", root, "-cf", partial, "."],
			{ encoding: "utf8" }
		);
		if (made.status !== 0) throw new Error(`tar failed: ${made.stderr}`);
		// another process may build it at the same time: each renames a whole file into place
		fs.renameSync(partial, tar);
	} finally {
		fs.rmSync(work, { recursive: true, force: true });
	}
	return tar;
}

/** The busybox test image (`scale-test-busybox:1`) on the engine at `host`, imported if absent. */
export async function ensureTestImage(host: string): Promise<string> {
	const socket = dockerSocket(host);
	const present = async () =>
		(await engineRequest(socket, "GET", `/images/${TEST_IMAGE}/json`)).status === 200;
	if (await present()) return TEST_IMAGE;
	const [repo, tag] = TEST_IMAGE.split(":");
	const answer = await engineRequest(
		socket,
		"POST",
		`/images/create?fromSrc=-&repo=${repo}&tag=${tag}`,
		{ upload: testImageTar() }
	);
	// a stream of JSON progress lines: a failure is a line with "error"
	if (answer.status !== 200 || /"error"\s*:/.test(answer.body) || !(await present()))
		throw new Error(`importing ${TEST_IMAGE} failed (${answer.status}): ${answer.body}`);
	return TEST_IMAGE;
}

interface DockerState {
	dockerHost?: string;
	dockerImage?: string;
	dockerError?: string;
}

function dockerState(): DockerState {
	const raw = process.env.SCALE_TEST_STATE;
	return raw ? JSON.parse(raw) : {};
}

/** The engine and image jest's globalSetup started (as root, or with TEST_DOCKER_HOST), or null. */
export function testDocker(): { host: string; image: string } | null {
	const { dockerHost, dockerImage } = dockerState();
	return dockerHost && dockerImage ? { host: dockerHost, image: dockerImage } : null;
}

/** testDocker(), or an error saying why there is none: a test that needs Docker fails, never skips. */
export function requireTestDocker(): { host: string; socket: string; image: string } {
	const found = testDocker();
	if (found) return { ...found, socket: dockerSocket(found.host) };
	const { dockerError } = dockerState();
	if (dockerError) throw new Error(`no Docker engine for the tests: ${dockerError}`);
	if (!process.env.SCALE_TEST_STATE)
		throw new Error("SCALE_TEST_STATE is unset: run the tests through jest (globalSetup)");
	throw new Error(
		"no Docker engine for the tests: run them as root (they install docker.io and start " +
			"their own dockerd) or set TEST_DOCKER_HOST=unix:///var/run/docker.sock"
	);
}
