import path from "path";
import { LocalCluster } from "../lib/cluster/cluster";

/**
 * `npm run cluster`: a whole cluster on this machine, for trying it as it runs across machines:
 * a nats-server that requires TLS (CLUSTER_TLS=false: plain NATS) and a password per process,
 * PostgreSQL, two control-plane processes and three node agents. Ctrl-C stops it all. See README, "Running a cluster".
 */

function say(msg: string) {
	process.stdout.write(`${msg}\n`);
}

function intEnv(name: string, fallback: number, min = 0): number {
	const raw = process.env[name];
	if (raw === undefined || raw === "") return fallback;
	const n = Number(raw);
	if (!Number.isInteger(n) || n < min || n > 65535) {
		process.stderr.write(
			`configuration error: ${name} must be an integer >= ${min}, got "${raw}"\n`
		);
		process.exit(2);
	}
	return n;
}

/** CLUSTER_TLS: on unless "false", "0", "no" or "off". */
function tlsEnv(): boolean {
	const raw = (process.env.CLUSTER_TLS ?? "").trim().toLowerCase();
	if (raw === "" || ["true", "1", "yes", "on"].includes(raw)) return true;
	if (["false", "0", "no", "off"].includes(raw)) return false;
	process.stderr.write(`configuration error: CLUSTER_TLS must be true or false, got "${raw}"\n`);
	process.exit(2);
}

async function main() {
	const apiPort = intEnv("CLUSTER_PORT", 8000, 1);
	const cluster = new LocalCluster({
		dataDir: path.resolve(process.env.DATA_DIR || "./data/cluster"),
		apiPort,
		natsPort: intEnv("NATS_PORT", 4222, 1),
		pgPort: intEnv("EMBEDDED_PG_PORT", 54330, 1),
		controlPlanes: intEnv("CLUSTER_CONTROL_PLANES", 2, 1),
		agents: intEnv("CLUSTER_AGENTS", 3, 0),
		tls: tlsEnv(),
		logLevel: process.env.LOG_LEVEL || "warn",
		nfsMountRoot: process.env.NFS_MOUNT_ROOT || undefined,
		write: say,
		onUnexpectedExit: (name, code, signal) =>
			say(
				`[cluster] ${name} exited (${signal ?? `code ${code}`}); the others go on. Ctrl-C stops the cluster.`
			)
	});

	let stopping = false;
	const stop = async (signal: string) => {
		if (stopping) return;
		stopping = true;
		say(`[cluster] ${signal}: stopping agents, control planes, PostgreSQL, nats-server`);
		await cluster.stop();
		say("[cluster] stopped");
		process.exit(0);
	};
	process.on("SIGINT", () => void stop("SIGINT"));
	process.on("SIGTERM", () => void stop("SIGTERM"));

	try {
		await cluster.start();
	} catch (err) {
		process.stderr.write(`cluster failed to start: ${(err as Error)?.stack ?? err}\n`);
		await cluster.stop().catch(() => undefined);
		process.exit(1);
	}
	for (let i = 0; i < cluster.controls.length; i++)
		say(`[cluster] ${cluster.controls[i].name}: REST API ${cluster.apiUrl(i)}/`);
	say(
		`[cluster] agents: ${cluster.agents.map(a => a.name).join(", ") || "none"} (work directories under ${cluster.opts.dataDir})`
	);
	say(
		`[cluster] each process has its own NATS identity (${path.dirname(cluster.identity("operator").file)}/<node>.env, 0600); the REPL: source ${cluster.identity("operator").file}, then npm run repl`
	);
	if (cluster.tls)
		say(
			`[cluster] NATS over TLS: a process elsewhere needs the CA's certificate ${cluster.tls.caFile} (NATS_TLS_CA) and a tls:// TRANSPORTER`
		);
	say("[cluster] stop everything with Ctrl-C");
}

void main();
