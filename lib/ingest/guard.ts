import type { Sql } from "../db/run";
import type { StrikeConfiguration } from "../documents/strike-configuration";
import { asWatcherConfiguration, isDirWatcherConfiguration } from "../documents/strike-dir-watcher";
import { ConflictError } from "../errors";
import type { MonitorCall } from "./protocol";

/**
 * The strike's configuration, when `call` comes from the strike job's RUNNING execution on the
 * agent `agentId`; a ConflictError (409) otherwise: a monitor whose execution has ended (its
 * agent was found lost and the job placed elsewhere, or the strike's job was canceled) stops.
 * A 2.0 dir-watcher configuration is answered as the 1.0 one the watcher runs, on its
 * workspace's directory as it is now.
 */
export async function guard(
	q: Sql["query"],
	call: MonitorCall,
	agentId: string
): Promise<StrikeConfiguration> {
	const [row] = await q(
		`SELECT s.configuration,
			CASE WHEN w.json_config->'broker'->>'type' <> 's3'
				THEN w.json_config->'broker'->>'host_path' END AS watched
		 FROM strike s
		 JOIN job_exe e ON e.job_id = s.job_id AND e.id = $2 AND e.status = 'RUNNING'
			AND e.agent_id = $3
		 LEFT JOIN workspace w ON s.configuration->'monitor'->>'type' = 'dir-watcher'
			AND w.name = s.configuration->>'workspace'
		 WHERE s.id = $1`,
		[call.strikeId, call.jobExeId, agentId]
	);
	if (!row)
		throw new ConflictError(
			`execution ${call.jobExeId} on ${agentId} is not the running process of strike ${call.strikeId}`
		);
	if (!isDirWatcherConfiguration(row.configuration))
		return row.configuration as StrikeConfiguration;
	if (!row.watched)
		throw new ConflictError(
			`strike ${call.strikeId} watches the workspace "${row.configuration.workspace}", which is no longer a host workspace`
		);
	return asWatcherConfiguration(row.configuration, row.watched);
}
