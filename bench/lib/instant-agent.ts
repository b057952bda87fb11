import { randomUUID } from "crypto";
import type { Context, ServiceSchema } from "moleculer";
import type { ExecutionFinished, ExecutionSpec } from "../../lib/documents/agent-protocol";

/** What an agent reports for an execution that ended at once, every step with exit code 0. */
export function completedReport(jobExeId: number, agentId: string): ExecutionFinished {
	const now = new Date().toISOString();
	return {
		jobExeId,
		agentId,
		status: "COMPLETED",
		exitCode: 0,
		products: [],
		resultsManifest: null,
		parseResults: [],
		stdout: "",
		stderr: "",
		steps: {
			pre: { started: now, completed: now, exitCode: 0 },
			main: { started: now, completed: now, exitCode: 0 },
			post: { started: now, completed: now, exitCode: 0 }
		}
	};
}

/**
 * A stand-in node agent for P2: it registers a node with room for everything and finishes
 * every execution at once, so what is measured is the control plane alone.
 */
export function instantAgent(name = "node-agent"): ServiceSchema {
	const slaveId = randomUUID();
	const resources = { cpus: 100000, mem: 1e9, disk: 1e9 };
	return {
		name,
		actions: {
			run: {
				// as the real agent: the executions placed together, reported together
				handler(this: any, ctx: Context<{ executions: ExecutionSpec[] }>) {
					const reports = ctx.params.executions.map(spec =>
						completedReport(spec.jobExeId, this.broker.nodeID)
					);
					setImmediate(() =>
						this.broker
							.call("scheduler.exeFinished", { reports })
							.catch((err: Error) => this.logger.error({ err }, "exeFinished failed"))
					);
					return { accepted: true };
				}
			},
			cancel: { handler: () => ({ found: false }) },
			logs: { handler: () => ({ stdout: "", stderr: "", is_finished: true }) }
		},
		async started(this: any) {
			const beat = () =>
				this.broker
					.call("nodes.heartbeat", {
						agentId: this.broker.nodeID,
						slaveId,
						resources,
						running: []
					})
					.catch(() => undefined);
			await this.broker.waitForServices(["nodes"]);
			await this.broker.call("nodes.register", {
				agentId: this.broker.nodeID,
				slaveId,
				hostname: "instant-agent",
				port: 0,
				resources
			});
			this.timer = setInterval(beat, 5000);
		},
		stopped(this: any) {
			clearInterval(this.timer);
		}
	};
}
