import { ID_SCHEMA } from "../validation/ids";
/**
 * JSON Schemas of the agents' calls to the scheduler (lib/documents/agent-protocol.ts), for the scheduler
 * service's params. Unknown fields are allowed (a newer agent may send more).
 */

const TIME = { type: "string", maxLength: 64 };
const EXIT_CODE = { type: ["integer", "null"] };
const STEP_TIMES = {
	type: "object",
	properties: { started: TIME, completed: TIME, exitCode: EXIT_CODE }
};

export const STEP_SCHEMA = {
	type: "object",
	required: ["jobExeId", "step", "event"],
	properties: {
		jobExeId: ID_SCHEMA,
		agentId: { type: "string" },
		step: { enum: ["pre", "main", "post"] },
		event: { enum: ["started", "completed"] },
		at: TIME,
		exitCode: EXIT_CODE,
		commandArguments: { type: "string" }
	}
};

const FINISHED_SCHEMA = {
	type: "object",
	required: ["jobExeId", "status"],
	properties: {
		jobExeId: ID_SCHEMA,
		agentId: { type: "string" },
		status: { enum: ["COMPLETED", "FAILED", "CANCELED"] },
		exitCode: EXIT_CODE,
		errorName: { type: ["string", "null"], maxLength: 50 },
		errorDetail: { type: ["string", "null"] },
		products: {
			type: "array",
			items: {
				type: "object",
				required: ["outputName", "workspaceId", "filePath", "fileName"],
				properties: {
					outputName: { type: "string" },
					workspaceId: ID_SCHEMA,
					filePath: { type: "string", minLength: 1, maxLength: 1000 },
					fileName: { type: "string", minLength: 1, maxLength: 250 },
					mediaType: { type: "string", maxLength: 250 },
					size: { type: "number", minimum: 0 },
					dataStarted: { type: ["string", "null"] },
					dataEnded: { type: ["string", "null"] }
				}
			}
		},
		parseResults: { type: "array" },
		commandArguments: { type: "string" },
		stdout: { type: "string" },
		stderr: { type: "string" },
		steps: {
			type: "object",
			properties: { pre: STEP_TIMES, main: STEP_TIMES, post: STEP_TIMES }
		}
	}
};

/**
 * `scheduler.exeFinished`'s params: one report, or the reports an agent gathered
 * (`{ reports }`, what agents send: one call for the executions that ended together).
 */
export const FINISHED_PARAMS = {
	// an object schema: the validator checks those (middlewares/ajv-validator.ts)
	type: "object",
	anyOf: [
		FINISHED_SCHEMA,
		{
			type: "object",
			required: ["reports"],
			properties: { reports: { type: "array", maxItems: 100000, items: FINISHED_SCHEMA } }
		}
	]
};
