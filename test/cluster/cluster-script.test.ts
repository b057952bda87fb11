import fs from "fs";
import os from "os";
import path from "path";
import net from "net";
import { spawn, spawnSync, type ChildProcess } from "child_process";
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
 * A plaintext NATS client with valid credentials: what the server says before the handshake
 * (its INFO), and all it receives after CONNECT and PING in the clear until it closes the
 * connection (or 5 s pass).
 */
function plaintextSession(
	port: number,
	user: string,
	pass: string
): Promise<{ info: any; after: string; closed: boolean }> {
	return new Promise((resolve, reject) => {
		const socket = net.connect(port, "127.0.0.1");
		let received = "";
		let info: any = null;
		let after = "";
		const timer = setTimeout(() => {
			socket.destroy();
			if (info) resolve({ info, after, closed: false });
			else reject(new Error(`no INFO from nats-server: ${received}`));
		}, 5000);
		socket.on("data", (b: Buffer) => {
			if (info) {
				after += b.toString("latin1");
				return;
			}
			received += b.toString("latin1");
			const line = /^INFO (\{.*\}) *\r\n/.exec(received);
			if (!line) return;
			info = JSON.parse(line[1]);
			after = received.slice(line[0].length);
			socket.write(
				`CONNECT ${JSON.stringify({ user, pass, verbose: false, pedantic: false, protocol: 1 })}\r\nPING\r\n`
			);
		});
		socket.on("error", () => undefined);
		socket.on("close", () => {
			clearTimeout(timer);
			if (info) resolve({ info, after, closed: true });
			else reject(new Error(`no INFO from nats-server: ${received}`));
		});
	});
}

/**
 * `npm run cluster` as a new user runs it: two control planes and three agents over a
 * nats-server that requires TLS and a password per process; jobs run; SIGINT stops every
 * process it started.
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

		// TLS: a CA and nats-server's certificate made at the first start, keys the owner's alone;
		// nats-server's configuration requires it, beside the users; every identity names the CA
		const tlsDir = path.join(idDir, "tls");
		const ca = path.join(tlsDir, "ca.pem");
		expect(fs.statSync(tlsDir).mode & 0o777).toBe(0o700);
		for (const key of ["ca.key", "server.key"])
			expect(fs.statSync(path.join(tlsDir, key)).mode & 0o777).toBe(0o600);
		const conf = fs.readFileSync(path.join(dir, "data", "nats-server.conf"), "utf8");
		expect(conf).toMatch(/^tls \{$/m);
		expect(conf).toContain(`ca_file: ${JSON.stringify(ca)}`);
		expect(conf).toContain(`cert_file: ${JSON.stringify(path.join(tlsDir, "server.pem"))}`);
		expect(conf).toMatch(/^authorization \{$/m);
		for (const name of passwords.keys()) {
			const text = fs.readFileSync(path.join(idDir, `${name}.env`), "utf8");
			expect(text).toContain(`export TRANSPORTER=tls://127.0.0.1:${natsPort}\n`);
			expect(text).toContain(`export NATS_TLS_CA=${ca}\n`);
		}
		// over TLS with the CA, no credentials: refused
		await expect(
			connect({
				servers: `127.0.0.1:${natsPort}`,
				tls: { caFile: ca },
				reconnect: false,
				timeout: 5000
			})
		).rejects.toThrow(/Authorization/i);
		// in the clear, even with the operator's credentials: nats-server says TLS is required,
		// then closes the connection without a PONG
		const plain = await plaintextSession(natsPort, "operator", passwords.get("operator")!);
		expect(plain.info.tls_required).toBe(true);
		expect(plain.closed).toBe(true);
		expect(plain.after).not.toContain("PONG");
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
			expect(environ).toContain(`TRANSPORTER=tls://127.0.0.1:${natsPort}`);
			expect(environ).toContain(`NATS_TLS_CA=${path.join(idDir, "tls", "ca.pem")}`);
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

		// an identity for another machine names the cluster's CA where that machine keeps it
		const made = spawnSync(
			process.execPath,
			[path.join(PROJECT_ROOT, "dist", "bin", "nats-identity.js"), "agent", "remote-1"],
			{
				env: {
					PATH: process.env.PATH ?? "",
					DATA_DIR: path.join(dir, "data"),
					NATS_URL: "tls://nats.example:4222",
					NATS_TLS_CA_PATH: "/etc/scale/nats-ca.pem"
				},
				encoding: "utf8"
			}
		);
		expect(made.status).toBe(0);
		expect(made.stdout).toContain(path.join(idDir, "tls", "ca.pem"));
		expect(made.stdout).toContain("/etc/scale/nats-ca.pem");
		const remote = fs.readFileSync(path.join(idDir, "remote-1.env"), "utf8");
		expect(remote).toContain("export TRANSPORTER=tls://nats.example:4222\n");
		expect(remote).toContain("export NATS_TLS_CA=/etc/scale/nats-ca.pem\n");
	}, 180000);
});
