import fs from "fs";
import os from "os";
import path from "path";
import { spawn, type ChildProcess } from "child_process";
import { connect } from "nats";
import { PROJECT_ROOT } from "../../lib/paths";
import { request } from "../helpers/broker";
import { ensureNatsServer } from "../helpers/nats";
import { freePort, freePortRun } from "../helpers/ports";
import { waitUntil } from "../helpers/process";

const CLUSTER_SCRIPT = path.join(PROJECT_ROOT, "dist", "bin", "cluster.js");

function alive(pid: number): boolean {
	try {
		process.kill(pid, 0);
		return true;
	} catch {
		return false;
	}
}

/** pids of the processes whose environment says NODE_ID=<one of ids>, among start.js's. */
function nodePids(dataDir: string): number[] {
	const pids: number[] = [];
	for (const entry of fs.readdirSync("/proc")) {
		if (!/^\d+$/.test(entry)) continue;
		try {
			const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8");
			const env = fs.readFileSync(`/proc/${entry}/environ`, "utf8");
			if (
				(cmd.includes("start.js") ||
					cmd.includes("nats-server") ||
					cmd.includes("postgres")) &&
				env.includes(dataDir)
			)
				pids.push(Number(entry));
			else if (cmd.includes(path.join(dataDir, "nats-server.conf"))) pids.push(Number(entry));
		} catch {
			/* gone, or not ours to read */
		}
	}
	return pids;
}

/**
 * `npm run cluster` as a new user runs it: two control planes and three agents over a
 * nats-server that requires a password; jobs run; SIGINT stops every process it started.
 */
describe("npm run cluster", () => {
	let dir: string;
	let proc: ChildProcess;
	let out = "";
	let apiPort: number;
	let natsPort: number;

	beforeAll(async () => {
		ensureNatsServer();
		dir = fs.mkdtempSync(path.join(os.tmpdir(), "cluster-script-"));
		fs.chmodSync(dir, 0o755);
		apiPort = await freePortRun(2);
		natsPort = await freePort();
		proc = spawn(process.execPath, [CLUSTER_SCRIPT], {
			env: {
				PATH: process.env.PATH ?? "",
				// the exports' root beside the data, not in it: a workspace may not lie in the data
				DATA_DIR: path.join(dir, "data"),
				CLUSTER_PORT: String(apiPort),
				NATS_PORT: String(natsPort),
				EMBEDDED_PG_PORT: String(await freePort()),
				LOG_LEVEL: "warn",
				NFS_MOUNT_ROOT: path.join(dir, "net")
			},
			stdio: ["ignore", "pipe", "pipe"]
		});
		const keep = (b: Buffer) => (out = (out + b.toString()).slice(-30000));
		proc.stdout!.on("data", keep);
		proc.stderr!.on("data", keep);
	}, 30000);

	afterAll(async () => {
		if (proc && proc.exitCode === null) proc.kill("SIGKILL");
		for (const pid of nodePids(dir)) {
			try {
				process.kill(pid, "SIGKILL");
			} catch {
				/* gone */
			}
		}
		if (dir) fs.rmSync(dir, { recursive: true, force: true });
	});

	async function withOutput<T>(step: () => Promise<T>): Promise<T> {
		try {
			return await step();
		} catch (err) {
			(err as Error).message = `${(err as Error).message}\n${out}`;
			throw err;
		}
	}

	it("runs two control planes and three agents; jobs run; Ctrl-C stops it all", async () => {
		const apis = [0, 1].map(i => `http://127.0.0.1:${apiPort + i}/api`);
		await withOutput(() =>
			waitUntil(
				async () => {
					for (const api of apis)
						if ((await request("GET", `${api}/version/`)).status !== 200) return false;
					const nodes = await request("GET", `${apis[1]}/nodes/`);
					return nodes.body?.results?.filter((n: any) => n.is_active).length === 3;
				},
				90000,
				"both APIs and three active nodes"
			)
		);
		expect(out).toContain(`[cluster] control-1: REST API ${apis[0]}/`);

		// Each process has a NATS identity of its own, in a file that is the owner's alone, and
		// NATS refuses a connection without one.
		const idDir = path.join(dir, "data", "nats");
		expect(fs.statSync(idDir).mode & 0o777).toBe(0o700);
		const passwords = new Map<string, string>();
		for (const name of [
			"control-1",
			"control-2",
			"agent-1",
			"agent-2",
			"agent-3",
			"operator"
		]) {
			const file = path.join(idDir, `${name}.env`);
			expect(fs.statSync(file).mode & 0o777).toBe(0o600);
			const text = fs.readFileSync(file, "utf8");
			expect(text).toContain(`export NATS_USER=${name}\n`);
			passwords.set(name, /^export NATS_PASSWORD=(\S+)$/m.exec(text)![1]);
		}
		expect(new Set(passwords.values()).size).toBe(passwords.size);
		expect(fs.existsSync(path.join(dir, "data", "cluster.env"))).toBe(false);
		await expect(
			connect({ servers: `127.0.0.1:${natsPort}`, reconnect: false, timeout: 5000 })
		).rejects.toThrow(/Authorization/i);
		// The agents were given no database URL, and only their own NATS credentials.
		const agentPids = nodePids(dir).filter(pid => {
			const e = fs.readFileSync(`/proc/${pid}/environ`, "utf8");
			return e.includes("SERVICES=node-agent");
		});
		expect(agentPids).toHaveLength(3);
		for (const pid of agentPids) {
			const environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
			expect(environ.join("\n")).not.toContain("DATABASE_URL");
			const user = environ.find(e => e.startsWith("NATS_USER="))!.slice("NATS_USER=".length);
			expect(environ).toContain(`NODE_ID=${user}`);
			expect(environ).toContain(`NATS_PASSWORD=${passwords.get(user)}`);
		}

		// the control planes have the cluster's NFS_MOUNT_ROOT: Scale's nfs workspaces live there
		fs.mkdirSync(path.join(dir, "net", "filer", "exports", "raw"), { recursive: true });
		const nfs = await request("POST", `${apis[1]}/workspaces/`, {
			name: "filer-raw",
			json_config: { broker: { type: "nfs", nfs_path: "filer:/exports/raw" } }
		});
		expect(nfs.status).toBe(201);
		expect(nfs.body.json_config.broker.host_path).toBe(
			path.join(dir, "net", "filer", "exports", "raw")
		);

		const type = await request("POST", `${apis[0]}/job-types/`, {
			name: "quick",
			version: "1.0",
			title: "Quick",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				version: "1.0",
				command: "/bin/true",
				command_arguments: "",
				input_data: [],
				output_data: []
			}
		});
		expect(type.status).toBe(201);
		const ids: number[] = [];
		for (let i = 0; i < 6; i++) {
			const queued = await request("POST", `${apis[i % 2]}/queue/new-job/`, {
				job_type_id: type.body.id,
				job_data: { version: "1.0", input_data: [], output_data: [] }
			});
			expect(queued.status).toBe(201);
			ids.push(queued.body.id);
		}
		await withOutput(() =>
			waitUntil(
				async () => {
					const res = await request("GET", `${apis[1]}/jobs/?status=COMPLETED`);
					return res.body?.count === ids.length;
				},
				60000,
				"the six jobs to complete"
			)
		);

		const started = nodePids(dir);
		// two control planes, three agents, nats-server, the postmaster (and its children)
		expect(started.length).toBeGreaterThanOrEqual(7);
		const exited = new Promise<number | null>(resolve => proc.once("exit", resolve));
		proc.kill("SIGINT");
		expect(await exited).toBe(0);
		expect(out).toContain("[cluster] stopped");
		expect(started.filter(alive)).toEqual([]);
		// Moleculer did all that within the permissions: nats-server refused nothing it sent
		const natsLog = fs.readFileSync(path.join(dir, "data", "nats-server.log"), "utf8");
		expect(natsLog).toContain("Server is ready");
		expect(natsLog).not.toMatch(/Violation/);
	}, 180000);
});
