import { ID_SCHEMA } from "../validation/ids";

/**
 * JSON Schemas of the control plane's calls to the agent (their types in agent-protocol.ts), for the
 * node-agent service's params. Unknown fields are allowed (a newer control plane may send more);
 * the interface is the normalised job interface the control plane stored, so only what the agent
 * uses is checked here.
 */

const TEXT = { type: "string", minLength: 1 };
const AMOUNT = { type: "number", minimum: 0 };

/** The inputs or outputs of the interface: each named, of one of `types`, required or not. */
const dataItems = (types: string[], more: Record<string, unknown> = {}) => ({
	type: "array",
	items: {
		type: "object",
		required: ["name", "type", "required"],
		properties: { name: TEXT, type: { enum: types }, required: { type: "boolean" }, ...more }
	}
});

const STAGED_FILE = {
	type: "object",
	required: ["fileId", "hostPath", "fileName"],
	properties: {
		fileId: ID_SCHEMA,
		hostPath: TEXT,
		fileName: TEXT,
		mediaType: { type: "string" },
		size: AMOUNT
	}
};

export const EXECUTION_SPEC_SCHEMA = {
	type: "object",
	required: [
		"jobExeId",
		"jobId",
		"jobType",
		"interface",
		"inputs",
		"outputWorkspaces",
		"timeout",
		"resources"
	],
	properties: {
		jobExeId: ID_SCHEMA,
		jobId: ID_SCHEMA,
		jobType: {
			type: "object",
			required: [
				"id",
				"name",
				"version",
				"usesDocker",
				"dockerImage",
				"dockerPrivileged",
				"isLongRunning"
			],
			properties: {
				id: ID_SCHEMA,
				name: TEXT,
				version: TEXT,
				usesDocker: { type: "boolean" },
				dockerImage: { type: ["string", "null"] },
				dockerPrivileged: { type: "boolean" },
				isLongRunning: { type: "boolean" }
			}
		},
		interface: {
			type: "object",
			required: ["command", "command_arguments", "input_data", "output_data"],
			properties: {
				command: TEXT,
				command_arguments: { type: "string" },
				input_data: dataItems(["property", "file", "files"]),
				output_data: dataItems(["file", "files"], { media_type: { type: "string" } })
			}
		},
		inputs: {
			type: "object",
			additionalProperties: {
				type: "object",
				oneOf: [
					{ required: ["value"], properties: { value: { type: "string" } } },
					{
						required: ["files"],
						properties: { files: { type: "array", items: STAGED_FILE } }
					}
				]
			}
		},
		outputWorkspaces: {
			type: "object",
			additionalProperties: {
				type: "object",
				required: ["workspaceId", "hostPath"],
				// "" for a workspace without a host path: refused by the execution, naming it
				properties: { workspaceId: ID_SCHEMA, hostPath: { type: "string" } }
			}
		},
		timeout: AMOUNT,
		resources: {
			type: "object",
			required: ["cpus", "mem", "disk"],
			properties: { cpus: AMOUNT, mem: AMOUNT, disk: AMOUNT }
		},
		task: {
			type: "object",
			required: ["kind", "strikeId"],
			properties: { kind: { type: "string", enum: ["strike"] }, strikeId: ID_SCHEMA }
		},
		rank: {
			type: "array",
			minItems: 3,
			maxItems: 3,
			items: [{ type: "integer" }, { type: "number" }, ID_SCHEMA]
		}
	}
};

export const STRIKE_ID_SCHEMA = {
	type: "object",
	required: ["strikeId"],
	properties: { strikeId: ID_SCHEMA }
};

export const JOB_EXE_ID_SCHEMA = {
	type: "object",
	required: ["jobExeId"],
	properties: { jobExeId: ID_SCHEMA }
};

/**
 * `node-agent.run`'s params: one execution, or `{ executions }` (what the scheduler sends: the
 * executions it placed on the agent together, in one call).
 */
export const RUN_PARAMS = {
	// an object schema: the validator checks those (middlewares/ajv-validator.ts)
	type: "object",
	anyOf: [
		EXECUTION_SPEC_SCHEMA,
		{
			type: "object",
			required: ["executions"],
			properties: {
				executions: {
					type: "array",
					minItems: 1,
					maxItems: 10000,
					items: EXECUTION_SPEC_SCHEMA
				}
			}
		}
	]
};

/**
 * JSON Schemas of the agents' calls to the scheduler (their types in agent-protocol.ts), for the scheduler
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
