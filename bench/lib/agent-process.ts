import fs from "fs";
import path from "path";
import { randomBytes } from "crypto";
import { spawn, type ChildProcess } from "child_process";
import { ALL_SERVICES } from "../../lib/launch/config";
import { identity, natsUsers, type NatsRole } from "../../lib/cluster/nats-identities";
import { startNatsServer } from "../../lib/cluster/nats-server";
import { ensureClusterTls } from "../../lib/cluster/tls";
import { AGENT_NODE_OPTIONS } from "../../lib/cluster/node-process";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort } from "../../test/helpers/ports";
import { benchDatabase, startService } from "./cluster";

/**
 * `npm run agent` as an operator starts it on a cluster machine: SERVICES=node-agent, its node
 * options (P7_AGENT_NODE_ARGS replaces them, e.g. "--max-semi-space-size=1" to compare), and no
 * database URL at all; `extra`: more of its environment (NATS_TLS_CA).
 */
export function startAgent(
	transporter: string,
	workDir: string,
	nodeId: string,
	extra: Record<string, string> = {}
): ChildProcess {
	const env: NodeJS.ProcessEnv = { ...process.env };
	delete env.DATABASE_URL;
	const nodeArgs =
		process.env.P7_AGENT_NODE_ARGS !== undefined
			? process.env.P7_AGENT_NODE_ARGS.split(" ").filter(Boolean)
			: AGENT_NODE_OPTIONS;
	return spawn(
		process.execPath,
		[...nodeArgs, path.join(PROJECT_ROOT, "dist", "bin", "start.js")],
		{
			env: {
				...env,
				SERVICES: "node-agent",
				TRANSPORTER: transporter,
				NODE_ID: nodeId,
				AGENT_WORK_DIR: workDir,
				LOG_LEVEL: "warn",
				...extra
			},
			stdio: ["ignore", "ignore", "inherit"]
		}
	);
}

/** One process of a bench's cluster, with its own NATS identity. */
export interface BenchNode {
	name: string;
	role: NatsRole;
}

/**
 * What the agent benchmarks run against: a nats-server that requires credentials (and TLS with
 * BENCH_NATS_TLS=true: a CA and certificate made as `npm run cluster` makes them), a throwaway
 * database, and one control plane (every service but node-agent, `npm start`'s process) over
 * them.
 *
 * Without `nodes`, every process shares one password user ("scale"), as before the cluster had
 * identities. With `nodes` (the control plane, named by its NODE_ID in `env`, among them), each
 * has its own user and random password, with the subject permissions `npm run cluster` gives it
 * (`identity()` and `natsUsers()` of lib/cluster/nats-identities.ts; the identity files go in
 * `work`): a process then publishes under its own role and node ID only, and subscribes to the
 * broadcast subjects and its own. `envOf(name)` is what a process of `nodes` is started with
 * (TRANSPORTER without credentials, NATS_USER, NATS_PASSWORD, NODE_ID, NATS_ROLE, NATS_TLS_CA);
 * `credentials(name)` its user and password. nats-server writes its log (permission violations
 * among it) to `natsLog`. `stop` stops all three and removes `work`.
 */
export async function controlPlaneOverNats(
	work: string,
	env: Record<string, string> = {},
	nodes?: BenchNode[]
) {
	const password = randomBytes(12).toString("hex");
	const tls = /^(1|true|yes)$/i.test(process.env.BENCH_NATS_TLS || "")
		? await ensureClusterTls(path.join(work, "tls"))
		: null;
	const port = await freePort();
	const address = `${tls ? "tls" : "nats"}://127.0.0.1:${port}`;
	const identities = nodes?.map(n => identity(work, n.name, n.role, address, tls?.caFile));
	const natsLog = path.join(work, "nats-server.log");
	const nats = await startNatsServer({
		dir: work,
		port,
		...(identities ? { users: natsUsers(identities) } : { user: "scale", password }),
		logFile: natsLog,
		...(tls
			? {
					tls: {
						certFile: tls.certFile,
						keyFile: tls.keyFile,
						caFile: tls.caFile,
						timeout: 5
					}
				}
			: {})
	});
	const transporter = address.replace("://", `://scale:${password}@`);
	const natsEnv: Record<string, string> = tls ? { NATS_TLS_CA: tls.caFile } : {};
	const identityOf = (name: string) => {
		const found = identities?.find(i => i.name === name);
		if (!found) throw new Error(`no NATS identity for ${name}`);
		return found;
	};
	const credentials = (name: string) =>
		identities
			? { user: name, pass: identityOf(name).password }
			: { user: "scale", pass: password };
	const envOf = (name: string): Record<string, string> => {
		if (!identities) return { TRANSPORTER: transporter, ...natsEnv };
		const id = identityOf(name);
		return {
			TRANSPORTER: address,
			NATS_USER: id.name,
			NATS_PASSWORD: id.password,
			NODE_ID: id.name,
			NATS_ROLE: id.role,
			...natsEnv
		};
	};
	const database = await benchDatabase();
	const service = await startService(database.url, {
		...(env.NODE_ID ? envOf(env.NODE_ID) : { TRANSPORTER: transporter, ...natsEnv }),
		SERVICES: ALL_SERVICES.filter(s => s !== "node-agent").join(","),
		...env
	});
	return {
		nats,
		user: "scale",
		password,
		/** with the shared user's credentials in it; without `nodes` only */
		transporter,
		natsEnv,
		tls: tls !== null,
		caFile: tls?.caFile,
		credentials,
		envOf,
		natsLog,
		/** the lines of nats-server's log that tell of a permission violation */
		violations(): string[] {
			if (!fs.existsSync(natsLog)) return [];
			return fs
				.readFileSync(natsLog, "utf8")
				.split("\n")
				.filter(line => line.includes("Violation"));
		},
		db: database.db,
		pgPid: database.pgPid,
		service,
		async stop() {
			await service.stop();
			await database.stop();
			await nats.stop();
			fs.rmSync(work, { recursive: true, force: true });
		}
	};
}
