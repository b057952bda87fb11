import type { Sql } from "../db/run";
import type { StrikeConfiguration } from "../documents/strike-configuration";
import { ConflictError } from "../errors";
import type { MonitorCall } from "./protocol";

/**
 * The strike's configuration, when `call` comes from the strike job's RUNNING execution on the
 * agent `agentId`; a ConflictError (409) otherwise: a monitor whose execution has ended (its
 * agent was found lost and the job placed elsewhere, or the strike's job was canceled) stops.
 */
export async function guard(
	q: Sql["query"],
	call: MonitorCall,
	agentId: string
): Promise<StrikeConfiguration> {
	const [row] = await q(
		`SELECT s.configuration FROM strike s
		 JOIN job_exe e ON e.job_id = s.job_id AND e.id = $2 AND e.status = 'RUNNING'
			AND e.agent_id = $3
		 WHERE s.id = $1`,
		[call.strikeId, call.jobExeId, agentId]
	);
	if (!row)
		throw new ConflictError(
			`execution ${call.jobExeId} on ${agentId} is not the running process of strike ${call.strikeId}`
		);
	return row.configuration as StrikeConfiguration;
}
