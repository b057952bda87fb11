import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import type { ServiceDirectories } from "./confined-mounts";
import {
	checkWorkspaceDirectoryAllowed,
	directoryProblem,
	validateHostBroker,
	type ValidationWarning
} from "./host-broker";
import { nfsMountPoint } from "./nfs";

export type { ValidationWarning } from "./host-broker";

/**
 * Workspace configuration 1.0 (Scale's docs/architecture/workspaces.rst):
 * `{"version": "1.0", "broker": {"type": "host", "host_path": "/abs/dir"}}`, or
 * `{"broker": {"type": "nfs", "nfs_path": "host:/path"}}` where the nodes mount NFS exports under
 * `NFS_MOUNT_ROOT` (lib/documents/nfs.ts): such a workspace is kept with the `host_path` it has on
 * the nodes, `<root>/<host>/<path>`, and used as a host workspace there.
 */
export const WORKSPACE_CONFIG_VERSION = "1.0";

/** The broker types this service can store files with. */
export const SUPPORTED_BROKER_TYPES = ["host", "nfs"] as const;

/** Broker types Scale knows that this service does not support (yet). */
const SCALE_ONLY_BROKER_TYPES = ["s3"];

/**
 * How workspace configurations are resolved on this cluster, and the service's own directories,
 * which no workspace may use.
 */
export interface WorkspaceMountOptions extends ServiceDirectories {
	/** where every node mounts NFS exports (`NFS_MOUNT_ROOT`); null: nfs workspaces are refused */
	nfsMountRoot?: string | null;
}

/** Scale's nfs broker: `nfs_path` is `host:/path`; further fields are kept, as in Scale. */
const NFS_BROKER_SCHEMA = {
	type: "object",
	required: ["type", "nfs_path"],
	properties: {
		type: { type: "string", const: "nfs" },
		nfs_path: { type: "string", minLength: 1, maxLength: 4096 }
	}
};

const checkNfsBroker = compileChecker(NFS_BROKER_SCHEMA);

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
 * broker, that its directory exists and is readable here; for an nfs broker, the same of the
 * directory the nodes mount its export on, which it answers as the broker's `host_path`. Either
 * directory must be neither a system directory nor one of the service's own.
 * Answers the broker to store and the warnings; throws FieldError.
 */
export async function validateBroker(
	config: WorkspaceConfig,
	field: string,
	mounts: WorkspaceMountOptions
): Promise<{ broker: WorkspaceConfig["broker"]; warnings: ValidationWarning[] }> {
	const at = `${field}.broker`;
	const type = config.broker.type;
	switch (type) {
		case "host":
			return {
				broker: config.broker,
				warnings: await validateHostBroker(config.broker, at, mounts)
			};
		case "nfs":
			return validateNfsBroker(config.broker, at, mounts);
	}
	const supported = SUPPORTED_BROKER_TYPES.map(t => `"${t}"`).join(", ");
	if (SCALE_ONLY_BROKER_TYPES.includes(type))
		throw new FieldError(
			`${at}.type`,
			`the "${type}" broker is not supported by this service; only ${supported} workspaces can be created`
		);
	throw new FieldError(`${at}.type`, `unknown broker type "${type}" (supported: ${supported})`);
}

async function validateNfsBroker(
	broker: WorkspaceConfig["broker"],
	at: string,
	mounts: WorkspaceMountOptions
): Promise<{ broker: WorkspaceConfig["broker"]; warnings: ValidationWarning[] }> {
	assertSchema(checkNfsBroker, broker, at);
	const nfsPath = broker.nfs_path as string;
	const root = mounts.nfsMountRoot;
	if (!root)
		throw new FieldError(
			`${at}.type`,
			`an "nfs" workspace needs NFS_MOUNT_ROOT, where every node mounts NFS exports (as autofs's /net): this service mounts nothing`
		);
	const hostPath = nfsMountPoint(nfsPath, root, `${at}.nfs_path`);
	// A data directory on an NFS export is reachable this way: DATA_DIR=/net/filer/scale/data.
	await checkWorkspaceDirectoryAllowed(hostPath, `${at}.nfs_path`, mounts);
	const problem = await directoryProblem(hostPath);
	if (problem)
		throw new FieldError(
			`${at}.nfs_path`,
			`"${nfsPath}" is mounted at ${hostPath} on the nodes (NFS_MOUNT_ROOT), which ${problem}`
		);
	return { broker: { ...broker, host_path: hostPath }, warnings: [] };
}

/** The whole check of a workspace configuration (shape, version, broker); answers what to store. */
export async function checkWorkspaceConfig(
	doc: unknown,
	field: string,
	mounts: WorkspaceMountOptions
): Promise<{ config: WorkspaceConfig; warnings: ValidationWarning[] }> {
	const config = parseWorkspaceConfig(doc, field);
	const { broker, warnings } = await validateBroker(config, field, mounts);
	return { config: { ...config, broker }, warnings };
}
