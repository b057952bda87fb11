import { spawn, spawnSync, type ChildProcess } from "child_process";
import fs from "fs";
import net from "net";
import path from "path";
import type { NatsUser } from "./nats-identities";

/** Where Debian's `nats-server` package puts the server, or whatever PATH finds. */
export function findNatsServer(): string | null {
	const found = spawnSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" });
	if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
	return fs.existsSync("/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : null;
}

/** Resolves when something accepts connections on the port, or rejects after `timeoutMs`. */
export function waitForPort(port: number, timeoutMs: number, host = "127.0.0.1"): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	return new Promise((resolve, reject) => {
		const attempt = () => {
			const socket = net.connect(port, host);
			socket.once("connect", () => {
				socket.destroy();
				resolve();
			});
			socket.once("error", () => {
				socket.destroy();
				if (Date.now() > deadline) reject(new Error(`nothing listens on ${host}:${port}`));
				else setTimeout(attempt, 50);
			});
		};
		attempt();
	});
}

export interface NatsServerOptions {
	/** where its configuration file is written (mode 0600: it holds the password) */
	dir: string;
	port: number;
	/** a user and password, or else a token, is required of every client */
	user?: string;
	password?: string;
	token?: string;
	/** users each with a password and, optionally, subject permissions (instead of the above) */
	users?: NatsUser[];
	/** where the server writes its log (permission violations among it) */
	logFile?: string;
	/**
	 * TLS required of every client (a plaintext connection is refused), with this certificate and
	 * key (PEM files), and the CA that signed it; `timeout`: seconds a client has for the
	 * handshake (nats-server's 0.5 s is short for a loaded machine starting several processes)
	 */
	tls?: { certFile: string; keyFile: string; caFile?: string; timeout?: number };
}

export interface RunningNatsServer {
	/** nats://127.0.0.1:port, without credentials (tls://… to ask for TLS) */
	address: string;
	proc: ChildProcess;
	stop(): Promise<void>;
}

/** nats-server's configuration syntax takes JSON strings. */
const quoted = (s: string) => JSON.stringify(s);

/** The authorization block of a server's configuration: a user and password, or a token. */
function authorization(opts: NatsServerOptions): string[] {
	if (opts.users !== undefined) {
		if (opts.user !== undefined || opts.password !== undefined || opts.token !== undefined)
			throw new Error(
				"a nats-server here requires users, or a user and password, or a token"
			);
		return [
			"authorization {",
			"  users: [",
			...opts.users.map(u => `    ${JSON.stringify(u)}`),
			"  ]",
			"}"
		];
	}
	if (opts.token !== undefined && opts.user === undefined && opts.password === undefined)
		return ["authorization {", `  token: ${quoted(opts.token)}`, "}"];
	if (opts.user !== undefined && opts.password !== undefined && opts.token === undefined)
		return [
			"authorization {",
			`  user: ${quoted(opts.user)}`,
			`  password: ${quoted(opts.password)}`,
			"}"
		];
	throw new Error("a nats-server here requires a user and password, or a token");
}

/**
 * A nats-server on loopback that requires a user and password (or a token), and TLS when given
 * a certificate. The secrets go in a configuration file readable by its owner only, not on the
 * command line (where `ps` would show them).
 */
export async function startNatsServer(opts: NatsServerOptions): Promise<RunningNatsServer> {
	const bin = findNatsServer();
	if (!bin)
		throw new Error(
			"nats-server is missing: install Debian's package (`sudo apt-get install -y nats-server`)"
		);
	fs.mkdirSync(opts.dir, { recursive: true });
	const conf = path.join(opts.dir, "nats-server.conf");
	fs.writeFileSync(
		conf,
		[
			`listen: 127.0.0.1:${opts.port}`,
			...authorization(opts),
			...(opts.logFile ? [`log_file: ${quoted(opts.logFile)}`] : []),
			...(opts.tls
				? [
						"tls {",
						`  cert_file: ${quoted(opts.tls.certFile)}`,
						`  key_file: ${quoted(opts.tls.keyFile)}`,
						...(opts.tls.caFile ? [`  ca_file: ${quoted(opts.tls.caFile)}`] : []),
						...(opts.tls.timeout ? [`  timeout: ${opts.tls.timeout}`] : []),
						"}"
					]
				: []),
			""
		].join("\n"),
		{ mode: 0o600 }
	);
	fs.chmodSync(conf, 0o600);
	// detached: a Ctrl-C at the terminal stops it only after the processes that use it
	const proc = spawn(bin, ["-c", conf], { stdio: ["ignore", "ignore", "pipe"], detached: true });
	let stderr = "";
	proc.stderr!.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
	const exited = new Promise<void>(resolve => proc.once("exit", () => resolve()));
	try {
		await Promise.race([
			waitForPort(opts.port, 10000),
			exited.then(() => {
				throw new Error(`nats-server exited: ${stderr.trim()}`);
			})
		]);
	} catch (err) {
		proc.kill("SIGKILL");
		throw err;
	}
	return {
		address: `nats://127.0.0.1:${opts.port}`,
		proc,
		async stop() {
			if (proc.exitCode !== null || proc.signalCode !== null) return;
			proc.kill("SIGTERM");
			await exited;
		}
	};
}
