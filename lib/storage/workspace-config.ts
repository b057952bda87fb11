import { FieldError } from "../errors";
import { assertSchema, compileChecker } from "../validation/schema";
import { checkStorableText } from "../validation/text";
import { validateHostBroker, type ValidationWarning } from "./host-broker";

export type { ValidationWarning } from "./host-broker";

/**
 * Workspace configuration 1.0 (Scale's docs/architecture/workspaces.rst):
 * `{"version": "1.0", "broker": {"type": "host", "host_path": "/abs/dir"}}`.
 */
export const WORKSPACE_CONFIG_VERSION = "1.0";

/** The broker types this service can store files with. */
export const SUPPORTED_BROKER_TYPES = ["host"] as const;

/** Broker types Scale knows that this service does not support (yet). */
const SCALE_ONLY_BROKER_TYPES = ["nfs", "s3"];

export interface WorkspaceConfig {
	version: string;
	broker: { type: string; [key: string]: unknown };
}

/** The document's shape, as in Scale: no unknown top-level fields, broker fields by type. */
export const WORKSPACE_CONFIG_SCHEMA = {
	type: "object",
	required: ["broker"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		broker: {
			type: "object",
			required: ["type"],
			properties: { type: { type: "string", minLength: 1, maxLength: 50 } }
		}
	}
};

const checkShape = compileChecker(WORKSPACE_CONFIG_SCHEMA);

/**
 * Checks the document's shape and version, without looking at the broker's own fields (Scale's
 * WorkspaceConfiguration constructor). `field` names the document in errors. Answers a copy with
 * the version filled in; throws FieldError naming the field at fault, e.g. `json_config.version`.
 */
export function parseWorkspaceConfig(doc: unknown, field = "json_config"): WorkspaceConfig {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as { version?: string; broker: WorkspaceConfig["broker"] };
	const version = given.version ?? WORKSPACE_CONFIG_VERSION;
	if (version !== WORKSPACE_CONFIG_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${WORKSPACE_CONFIG_VERSION})`
		);
	return { version, broker: structuredClone(given.broker) };
}

/**
 * Checks the broker's configuration against this node (Scale's validate_broker): for a host
 * broker, that its directory exists and is readable here. Answers the warnings; throws FieldError.
 */
export async function validateBroker(
	config: WorkspaceConfig,
	field = "json_config"
): Promise<ValidationWarning[]> {
	const at = `${field}.broker`;
	const type = config.broker.type;
	switch (type) {
		case "host":
			return validateHostBroker(config.broker, at);
	}
	const supported = SUPPORTED_BROKER_TYPES.map(t => `"${t}"`).join(", ");
	if (SCALE_ONLY_BROKER_TYPES.includes(type))
		throw new FieldError(
			`${at}.type`,
			`the "${type}" broker is not supported by this service; only ${supported} workspaces can be created`
		);
	throw new FieldError(`${at}.type`, `unknown broker type "${type}" (supported: ${supported})`);
}

/** The whole check of a workspace configuration: shape, version and broker. */
export async function checkWorkspaceConfig(
	doc: unknown,
	field = "json_config"
): Promise<{ config: WorkspaceConfig; warnings: ValidationWarning[] }> {
	const config = parseWorkspaceConfig(doc, field);
	const warnings = await validateBroker(config, field);
	return { config, warnings };
}
