import path from "path";
import { FieldError } from "../errors";
import { assertSchema, checkStorableText, compileChecker } from "../validation/schema";
import { MASKED_SECRET } from "./s3-broker";

/**
 * Strike configuration 2.0 (Scale 5.0's docs/architecture/strike.rst) with an `s3` monitor: the
 * files arrive in the s3 workspace `workspace`, whose bucket notifies the SQS queue `sqs_name` of
 * each object created; each object matched by a rule is ingested where it is, or moved to
 * `new_workspace` and/or under `new_file_path`. The `dir-watcher` monitor of 2.0 is in
 * strike-dir-watcher.ts; both share the rules parsed here.
 */
export const STRIKE_CONFIGURATION_2 = "2.0";

export interface S3StrikeRule {
	filename_regex: string;
	data_types: string[];
	/** the s3 workspace to move matched objects to (absent: they stay in `workspace`) */
	new_workspace?: string;
	/** relative, normalised: the folder matched objects are moved under */
	new_file_path?: string;
}

export interface S3StrikeConfiguration {
	version: "2.0";
	workspace: string;
	monitor: {
		type: "s3";
		sqs_name: string;
		credentials?: { access_key_id: string; secret_access_key: string };
		region_name?: string;
		/** an SQS-compatible endpoint; absent: AWS_ENDPOINT_URL_SQS, or the workspace's store */
		endpoint_url?: string;
	};
	files_to_ingest: S3StrikeRule[];
}

/** Configuration 2.0's files_to_ingest, whatever its monitor. */
export const STRIKE_2_RULES_SCHEMA = {
	type: "array",
	minItems: 1,
	items: {
		type: "object",
		required: ["filename_regex"],
		additionalProperties: false,
		properties: {
			filename_regex: { type: "string", minLength: 1 },
			data_types: { type: "array", items: { type: "string", minLength: 1 } },
			new_workspace: { type: "string", minLength: 1, maxLength: 50 },
			new_file_path: { type: "string", minLength: 1, maxLength: 900 }
		}
	}
};

const SCHEMA = {
	type: "object",
	required: ["version", "workspace", "monitor", "files_to_ingest"],
	additionalProperties: false,
	properties: {
		version: { type: "string", const: STRIKE_CONFIGURATION_2 },
		workspace: { type: "string", minLength: 1, maxLength: 50 },
		monitor: {
			type: "object",
			required: ["type", "sqs_name"],
			properties: {
				type: { type: "string", const: "s3" },
				sqs_name: { type: "string", pattern: "^[A-Za-z0-9_-]{1,80}(\\.fifo)?$" },
				credentials: {
					type: "object",
					required: ["access_key_id", "secret_access_key"],
					additionalProperties: false,
					properties: {
						access_key_id: { type: "string", minLength: 1, maxLength: 256 },
						secret_access_key: { type: "string", minLength: 1, maxLength: 256 }
					}
				},
				region_name: { type: "string", pattern: "^[a-z0-9-]{1,50}$" },
				endpoint_url: { type: "string", pattern: "^https?://", maxLength: 1000 }
			}
		},
		files_to_ingest: STRIKE_2_RULES_SCHEMA
	}
};

const checkShape = compileChecker(SCHEMA);

/** Whether a strike's stored or given configuration is a 2.0 one whose monitor is not a dir-watcher. */
export function isS3StrikeConfiguration(doc: unknown): doc is S3StrikeConfiguration {
	const given = doc as { version?: unknown; monitor?: { type?: unknown } } | null;
	return given?.version === STRIKE_CONFIGURATION_2 && given.monitor?.type !== "dir-watcher";
}

/**
 * Parses a 2.0 configuration: shape, each regex valid, each new_file_path relative and inside its
 * workspace. Whether the workspaces exist and are s3 ones is the caller's to check. Throws
 * FieldError naming the field, e.g. `configuration.monitor.sqs_name`.
 */
export function parseS3StrikeConfiguration(doc: unknown, field: string): S3StrikeConfiguration {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as S3StrikeConfiguration;
	return {
		version: STRIKE_CONFIGURATION_2,
		workspace: given.workspace,
		monitor: structuredClone(given.monitor),
		files_to_ingest: parseStrike2Rules(given.files_to_ingest, field)
	};
}

/** Configuration 2.0's rules, shape checked: each regex valid, each new_file_path inside. */
export function parseStrike2Rules(rules: S3StrikeRule[], field: string): S3StrikeRule[] {
	return rules.map((rule, i) => {
		const at = `${field}.files_to_ingest[${i}]`;
		try {
			new RegExp(rule.filename_regex);
		} catch (error) {
			throw new FieldError(
				`${at}.filename_regex`,
				`is not a valid regular expression: ${(error as Error).message}`
			);
		}
		const parsed: S3StrikeRule = {
			filename_regex: rule.filename_regex,
			data_types: [...(rule.data_types ?? [])]
		};
		if (rule.new_workspace !== undefined) parsed.new_workspace = rule.new_workspace;
		if (rule.new_file_path !== undefined)
			parsed.new_file_path = folderPath(rule.new_file_path, `${at}.new_file_path`);
		return parsed;
	});
}

/** A folder inside a workspace, relative, without a leading or trailing slash. */
function folderPath(value: string, at: string): string {
	const normal = path.posix.normalize(value.replace(/^\/+/, "")).replace(/\/+$/, "");
	if (normal === ".." || normal.startsWith("../") || normal.includes("\0"))
		throw new FieldError(at, `"${value}" leads outside the workspace`);
	return normal === "." ? "" : normal;
}

/** The workspaces a 2.0 configuration names, once each. */
export function s3StrikeWorkspaces(config: S3StrikeConfiguration): string[] {
	return [
		...new Set([
			config.workspace,
			...config.files_to_ingest.flatMap(r => (r.new_workspace ? [r.new_workspace] : []))
		])
	];
}

/** A configuration as the API answers it: the monitor's secret masked. */
export function maskStrikeSecrets<T>(config: T): T {
	const monitor = (config as { monitor?: { credentials?: Record<string, unknown> } })?.monitor;
	if (!monitor?.credentials) return config;
	return {
		...config,
		monitor: {
			...monitor,
			credentials: { ...monitor.credentials, secret_access_key: MASKED_SECRET }
		}
	};
}
