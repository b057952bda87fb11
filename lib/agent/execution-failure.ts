/**
 * Why an execution failed, as the agent reports it. `errorName` is a SYSTEM error the agent
 * diagnosed, or null for an algorithm failure the control plane maps (through the job type's
 * error mapping for a non-zero exit code; as an algorithm error for the post step's findings,
 * which come with exit code 0).
 */
export class ExecutionFailure extends Error {
	constructor(
		readonly errorName: string | null,
		readonly detail: string
	) {
		super(detail);
	}
}
