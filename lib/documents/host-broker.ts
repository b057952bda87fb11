import { constants as fsConstants, promises as fs } from "fs";
import path from "path";
import { FieldError } from "../errors";
import { assertSchema, compileChecker } from "../validation/schema";
import { mountProblem, type ServiceDirectories } from "./confined-mounts";

/** A validation warning: something that does not stop the workspace from working. */
export interface ValidationWarning {
	/** a stable key clients can recognise, e.g. `broker_type` */
	id: string;
	/** a human-readable description */
	details: string;
}

/** The broker part of a workspace configuration using the host broker. */
export interface HostBrokerConfig {
	type: "host";
	/** absolute path of the directory (on every node) holding the workspace's files */
	host_path: string;
	[key: string]: unknown;
}

/** Scale's host broker: further fields are allowed (and kept), as in Scale. */
export const HOST_BROKER_SCHEMA = {
	type: "object",
	required: ["type", "host_path"],
	properties: {
		type: { type: "string", const: "host" },
		host_path: { type: "string", minLength: 1, maxLength: 4096 }
	}
};

const checkSchema = compileChecker(HOST_BROKER_SCHEMA);

/** Why `error` (from stat or access) keeps the directory from the service, in a few words. */
function fsProblem(error: NodeJS.ErrnoException): string {
	switch (error.code) {
		case "ENOENT":
			return "does not exist";
		case "ENOTDIR":
			return "does not exist (a part of the path is not a directory)";
		case "EACCES":
		case "EPERM":
			return "is not readable by the service (permission denied)";
		case "ELOOP":
			return "cannot be resolved (too many symbolic links)";
		case "ENAMETOOLONG":
			return "is too long for the file system";
		default:
			return `cannot be read (${error.code ?? error.message})`;
	}
}

/**
 * Checks the broker part of a host workspace configuration: `host_path` must be an absolute,
 * normalised path naming an existing directory this process may list and enter, and neither a
 * system directory nor one of the service's own (`own`). `field` is the request path of the
 * broker object, e.g. `json_config.broker`. Throws FieldError; answers the warnings (none so far).
 */
export async function validateHostBroker(
	broker: Record<string, unknown>,
	field: string,
	own: ServiceDirectories
): Promise<ValidationWarning[]> {
	assertSchema(checkSchema, broker, field);
	const hostPath = broker.host_path as string;
	const at = `${field}.host_path`;
	if (!path.posix.isAbsolute(hostPath))
		throw new FieldError(at, `must be an absolute path (starting with "/"), got "${hostPath}"`);
	// Lexical normalisation only: "a/../b" may not be "b" once symbolic links are followed, so
	// such paths are refused rather than rewritten.
	const normal = path.posix.normalize(hostPath);
	if (normal !== hostPath)
		throw new FieldError(
			at,
			`must be a normalised path, without "." or ".." segments or repeated slashes (did you mean "${normal}"?)`
		);
	await checkWorkspaceDirectoryAllowed(hostPath, at, own);
	const problem = await directoryProblem(hostPath);
	if (problem) throw new FieldError(at, `"${hostPath}" ${problem}`);
	return [];
}

/**
 * Refuses a directory no workspace may keep its files in (lib/documents/confined-mounts.ts), with
 * a FieldError on `at`.
 */
export async function checkWorkspaceDirectoryAllowed(
	dir: string,
	at: string,
	own: ServiceDirectories
): Promise<void> {
	const problem = await mountProblem(dir, own);
	if (problem) throw new FieldError(at, `${problem}; a workspace may not keep its files there`);
}

/**
 * What keeps `dir` from serving as a workspace's directory here, in a few words ("does not
 * exist", "is not a directory", ...); null when it is a directory this process may list and enter.
 */
export async function directoryProblem(dir: string): Promise<string | null> {
	let stats;
	try {
		stats = await fs.stat(dir);
	} catch (error) {
		return fsProblem(error as NodeJS.ErrnoException);
	}
	if (!stats.isDirectory()) return "is not a directory";
	try {
		// Listing a directory takes read permission, entering it (reaching its files) execute.
		await fs.access(dir, fsConstants.R_OK | fsConstants.X_OK);
	} catch {
		return "is not readable by the service (permission denied)";
	}
	return null;
}
