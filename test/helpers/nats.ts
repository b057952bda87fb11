import { spawn, spawnSync, type ChildProcess } from "child_process";
import net from "net";
import { freePort } from "./ports";

function natsServerPath(): string | null {
	const found = spawnSync("sh", ["-c", "command -v nats-server"], { encoding: "utf8" });
	return found.status === 0 ? found.stdout.trim() : null;
}

/**
 * The cluster tests need Debian's `nats-server`. As root (as CI runs) it is installed here;
 * otherwise the run stops with the one command that installs it.
 */
export function ensureNatsServer(): string {
	let bin = natsServerPath();
	if (bin) return bin;
	if (process.getuid && process.getuid() !== 0)
		throw new Error(
			"nats-server is missing: run `sudo apt-get install -y nats-server`, then the tests again"
		);
	const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
	let install = spawnSync("apt-get", ["install", "-y", "-q", "nats-server"], {
		env,
		encoding: "utf8"
	});
	if (install.status !== 0) {
		// A fresh machine has no package lists yet.
		spawnSync("apt-get", ["update", "-q"], { env, stdio: "ignore" });
		install = spawnSync("apt-get", ["install", "-y", "-q", "nats-server"], {
			env,
			encoding: "utf8"
		});
	}
	bin = natsServerPath();
	if (!bin) throw new Error(`installing nats-server failed: ${install.stderr}`);
	return bin;
}

export interface NatsServer {
	/** nats://host:port, with the user and password when the server requires them */
	url: string;
	/** nats://host:port, without credentials */
	address: string;
	stop(): Promise<void>;
}

function waitForPort(port: number, timeoutMs: number): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	return new Promise((resolve, reject) => {
		const attempt = () => {
			const socket = net.connect(port, "127.0.0.1");
			socket.once("connect", () => {
				socket.destroy();
				resolve();
			});
			socket.once("error", () => {
				socket.destroy();
				if (Date.now() > deadline) reject(new Error(`nothing listens on port ${port}`));
				else setTimeout(attempt, 50);
			});
		};
		attempt();
	});
}

/** A real nats-server on a free loopback port, for one test file; `auth`: it requires them. */
export async function startNats(auth?: { user: string; pass: string }): Promise<NatsServer> {
	const bin = ensureNatsServer();
	const port = await freePort();
	const args = ["-a", "127.0.0.1", "-p", String(port)];
	if (auth) args.push("--user", auth.user, "--pass", auth.pass);
	const proc: ChildProcess = spawn(bin, args, { stdio: "ignore" });
	await waitForPort(port, 10000);
	const address = `nats://127.0.0.1:${port}`;
	return {
		address,
		url: auth
			? `nats://${encodeURIComponent(auth.user)}:${encodeURIComponent(auth.pass)}@127.0.0.1:${port}`
			: address,
		stop: () =>
			new Promise(resolve => {
				if (proc.exitCode !== null) return resolve();
				proc.once("exit", () => resolve());
				proc.kill("SIGTERM");
			})
	};
}
