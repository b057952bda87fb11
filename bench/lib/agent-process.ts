import fs from "fs";
import path from "path";
import { randomBytes } from "crypto";
import { spawn, type ChildProcess } from "child_process";
import { ALL_SERVICES } from "../../lib/config";
import { startNatsServer } from "../../lib/cluster/nats-server";
import { AGENT_NODE_OPTIONS } from "../../lib/cluster/node-process";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort } from "../../test/helpers/ports";
import { benchDatabase, startService } from "./cluster";

/**
 * `npm run agent` as an operator starts it on a cluster machine: SERVICES=node-agent, its node
 * options (P7_AGENT_NODE_ARGS replaces them, e.g. "--max-semi-space-size=1" to compare), and no
 * database URL at all.
 */
export function startAgent(transporter: string, workDir: string, nodeId: string): ChildProcess {
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
				LOG_LEVEL: "warn"
			},
			stdio: ["ignore", "ignore", "inherit"]
		}
	);
}

/**
 * What the agent benchmarks run against: a nats-server that requires a password, a throwaway
 * database, and one control plane (every service but node-agent, `npm start`'s process) over
 * them. `stop` stops all three and removes `work`.
 */
export async function controlPlaneOverNats(work: string, env: Record<string, string> = {}) {
	const password = randomBytes(12).toString("hex");
	const nats = await startNatsServer({
		dir: work,
		port: await freePort(),
		user: "scale",
		password
	});
	const transporter = nats.address.replace("nats://", `nats://scale:${password}@`);
	const database = await benchDatabase();
	const service = await startService(database.url, {
		TRANSPORTER: transporter,
		SERVICES: ALL_SERVICES.filter(s => s !== "node-agent").join(","),
		...env
	});
	return {
		nats,
		user: "scale",
		password,
		transporter,
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
