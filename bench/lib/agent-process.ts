import fs from "fs";
import path from "path";
import { randomBytes } from "crypto";
import { spawn, type ChildProcess } from "child_process";
import { ALL_SERVICES } from "../../lib/config";
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

/**
 * What the agent benchmarks run against: a nats-server that requires a password (and TLS with
 * BENCH_NATS_TLS=true: a CA and certificate made as `npm run cluster` makes them), a throwaway
 * database, and one control plane (every service but node-agent, `npm start`'s process) over
 * them. `natsEnv`: what a process needs beside TRANSPORTER (NATS_TLS_CA). `stop` stops all three
 * and removes `work`.
 */
export async function controlPlaneOverNats(work: string, env: Record<string, string> = {}) {
	const password = randomBytes(12).toString("hex");
	const tls = /^(1|true|yes)$/i.test(process.env.BENCH_NATS_TLS || "")
		? await ensureClusterTls(path.join(work, "tls"))
		: null;
	const nats = await startNatsServer({
		dir: work,
		port: await freePort(),
		user: "scale",
		password,
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
	const transporter = nats.address.replace(
		"nats://",
		`${tls ? "tls" : "nats"}://scale:${password}@`
	);
	const natsEnv: Record<string, string> = tls ? { NATS_TLS_CA: tls.caFile } : {};
	const database = await benchDatabase();
	const service = await startService(database.url, {
		TRANSPORTER: transporter,
		...natsEnv,
		SERVICES: ALL_SERVICES.filter(s => s !== "node-agent").join(","),
		...env
	});
	return {
		nats,
		user: "scale",
		password,
		transporter,
		natsEnv,
		tls: tls !== null,
		db: database.db,
		service,
		async stop() {
			await service.stop();
			await database.stop();
			await nats.stop();
			fs.rmSync(work, { recursive: true, force: true });
		}
	};
}
