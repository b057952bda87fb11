import fs from "fs";
import os from "os";
import path from "path";
import { confinementProblem, mountProblem } from "../../lib/documents/confined-mounts";

const OWN = { dataDir: "/work/main/data", agentWorkDir: "/srv/agent" };

describe("confinementProblem (the path as written)", () => {
	it.each([
		"/",
		"/etc",
		"/proc",
		"/sys",
		"/dev",
		"/usr",
		"/bin",
		"/sbin",
		"/lib",
		"/lib64",
		"/boot",
		"/root",
		"/var/lib",
		"/run"
	])("refuses the system directory %s", dir => {
		expect(confinementProblem(dir, OWN)).toBe("is a system directory");
	});

	it("refuses a system directory written with a trailing slash or extra segments", () => {
		expect(confinementProblem("/etc/", OWN)).toBe("is a system directory");
		expect(confinementProblem("/var//lib/.", OWN)).toBe("is a system directory");
		expect(confinementProblem("/tmp/../etc", OWN)).toBe("is a system directory");
	});

	it.each([
		["/etc/ssl", "/etc"],
		["/proc/1/root", "/proc"],
		["/sys/fs/cgroup", "/sys"],
		["/dev/shm", "/dev"],
		["/usr/local/data", "/usr"],
		["/bin/x", "/bin"],
		["/sbin/x", "/sbin"],
		["/boot/efi", "/boot"],
		["/root/incoming", "/root"]
	])("refuses %s, inside %s", (dir, tree) => {
		expect(confinementProblem(dir, OWN)).toBe(`is inside the system directory ${tree}`);
	});

	it.each([
		"/var/lib/scale-data",
		"/tmp/x",
		"/run/scale",
		"/srv/incoming",
		"/etcetera",
		"/home/u/in",
		"/lib/x"
	])("accepts %s", dir => {
		expect(confinementProblem(dir, OWN)).toBeNull();
	});

	it("refuses the service's data directory, what lies in it and what holds it", () => {
		expect(confinementProblem("/work/main/data", OWN)).toBe("is the service's data directory");
		expect(confinementProblem("/work/main/data/postgres", OWN)).toBe(
			"is inside the service's data directory /work/main/data"
		);
		expect(confinementProblem("/work", OWN)).toBe(
			"contains the service's data directory /work/main/data"
		);
		expect(confinementProblem("/work/main/", OWN)).toBe(
			"contains the service's data directory /work/main/data"
		);
		expect(confinementProblem("/work/main/database", OWN)).toBeNull();
		expect(confinementProblem("/work/other", OWN)).toBeNull();
	});

	it("refuses the node agent's work directory likewise", () => {
		expect(confinementProblem("/srv/agent", OWN)).toBe("is the node agent's work directory");
		expect(confinementProblem("/srv/agent/tasks/1", OWN)).toBe(
			"is inside the node agent's work directory /srv/agent"
		);
		expect(confinementProblem("/srv", OWN)).toBe(
			"contains the node agent's work directory /srv/agent"
		);
		expect(confinementProblem("/srv/agents", OWN)).toBeNull();
	});
});

describe("mountProblem (symbolic links resolved)", () => {
	let dir: string;
	let own: { dataDir: string; agentWorkDir: string };

	beforeAll(() => {
		dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "confined-mounts-")));
		own = { dataDir: path.join(dir, "data"), agentWorkDir: path.join(dir, "agent") };
		fs.mkdirSync(own.dataDir);
		fs.mkdirSync(path.join(dir, "ok"));
		fs.symlinkSync("/etc", path.join(dir, "to-etc"));
		fs.symlinkSync(own.dataDir, path.join(dir, "to-data"));
	});

	afterAll(() => {
		fs.rmSync(dir, { recursive: true, force: true });
	});

	it("accepts an ordinary directory, made or not", async () => {
		expect(await mountProblem(path.join(dir, "ok"), own)).toBeNull();
		expect(await mountProblem(path.join(dir, "not-made", "yet"), own)).toBeNull();
	});

	it("names the path as given when it is refused as written", async () => {
		expect(await mountProblem("/etc/", own)).toBe('"/etc/" is a system directory');
		expect(await mountProblem(dir, own)).toBe(
			`"${dir}" contains the service's data directory ${own.dataDir}`
		);
	});

	it("refuses a symbolic link to a system directory, and what lies below it", async () => {
		const link = path.join(dir, "to-etc");
		expect(await mountProblem(link, own)).toBe(
			`"${link}" leads to /etc, which is a system directory`
		);
		// not made yet: its parent is followed
		expect(await mountProblem(`${link}/not-made/yet`, own)).toBe(
			`"${link}/not-made/yet" leads to /etc/not-made/yet, which is inside the system directory /etc`
		);
	});

	it("refuses a symbolic link to the service's data directory", async () => {
		const link = path.join(dir, "to-data");
		expect(await mountProblem(link, own)).toBe(
			`"${link}" leads to ${own.dataDir}, which is the service's data directory`
		);
	});

	it("compares with the service's directories with their links resolved too", async () => {
		// DATA_DIR given through a link: a mount of the link's target still holds it
		const viaLink = { ...own, dataDir: path.join(dir, "to-data", "postgres") };
		expect(await mountProblem(own.dataDir, viaLink)).toBe(
			`"${own.dataDir}" contains the service's data directory ${own.dataDir}/postgres`
		);
	});
});
