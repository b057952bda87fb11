import { callGroups } from "../documents/call-groups";
import type { ExecutionSpec } from "../documents/agent-protocol";
import type { PlacedExe } from "../executions/placed-executions";
import { ERRORS, runFailureError } from "../executions/failure";
import type { FailureRequest } from "../executions/types";

/** What handing placed executions to their agents needs of the scheduler service. */
export interface DispatchLink {
	/** the execution specs of placed executions, in their order */
	buildSpecs(placed: readonly PlacedExe[]): Promise<ExecutionSpec[]>;
	/** `node-agent.run` on one agent, without retries */
	run(agentId: string, executions: ExecutionSpec[]): Promise<unknown>;
	/** records a failure the control plane decides (through the reports' batcher) */
	fail(failure: FailureRequest): void;
	/** asks an agent to stop an execution it may have started after all */
	cancelOnAgent(jobExeId: number, agentId: string): void;
	/** places nothing on an agent for a while: it could not be reached */
	setAside(agentId: string): void;
	info(fields: Record<string, unknown>, message: string): void;
	warn(fields: Record<string, unknown>, message: string): void;
	error(fields: Record<string, unknown>, message: string): void;
}

/**
 * Hands placed executions to their agents: one call per agent for the executions placed on it
 * together (several where their JSON would make too large a message: callGroups), none waiting
 * for another. A run that fails fails its executions (node-lost for an agent out of reach, which
 * is then set aside, unless this process was cut off from NATS; task-launch otherwise); one that
 * timed out may have started after all, so the agent is also asked to stop it (one cut off by
 * this process's NATS outage is stopped by the agent's next heartbeat answer). Specs that
 * cannot be built fail every execution.
 */
export async function dispatchPlaced(placed: PlacedExe[], link: DispatchLink): Promise<void> {
	let specs: ExecutionSpec[];
	try {
		specs = await link.buildSpecs(placed);
	} catch (error) {
		link.error({ err: error }, "cannot build execution specs");
		for (const exe of placed) link.fail({ jobExeId: exe.id, errorName: ERRORS.unknown });
		return;
	}
	const byAgent = new Map<string, { exe: PlacedExe; spec: ExecutionSpec }[]>();
	placed.forEach((exe, i) => {
		link.info(
			{ jobId: exe.job_id, jobExeId: exe.id, nodeId: exe.node_id, agentId: exe.agent_id },
			"execution placed"
		);
		const forAgent = byAgent.get(exe.agent_id) ?? [];
		forAgent.push({ exe, spec: specs[i] });
		byAgent.set(exe.agent_id, forAgent);
	});
	for (const [agentId, forAgent] of byAgent)
		for (const runs of callGroups(forAgent, r => r.spec))
			link.run(
				agentId,
				runs.map(r => r.spec)
			).catch((error: any) => {
				const errorName = runFailureError(error);
				link.warn(
					{ err: error, jobExeIds: runs.map(r => r.exe.id), agentId, errorName },
					"node-agent.run failed"
				);
				// cut off from NATS, this process reached no agent: that one is not to blame
				if (errorName === ERRORS.nodeLost && error?.type !== "BROKER_DISCONNECTED")
					link.setAside(agentId);
				for (const { exe } of runs) {
					if (error?.type === "REQUEST_TIMEOUT") link.cancelOnAgent(exe.id, agentId);
					link.fail({ jobExeId: exe.id, errorName });
				}
			});
}
