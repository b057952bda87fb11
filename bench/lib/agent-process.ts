import path from "path";
import { spawn, type ChildProcess } from "child_process";
import { AGENT_NODE_OPTIONS } from "../../lib/cluster/node-process";
import { PROJECT_ROOT } from "../../lib/paths";

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
