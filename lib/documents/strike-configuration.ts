import path from "path";
import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import { isNfsExport, nfsMountPoint } from "./nfs";

/**
 * Strike configuration 1.0 (Scale's ingest/strike/configuration/strike_configuration.py and
 * docs/architecture/strike.rst), with the `mount_on` the spec lists. The monitor watches a
 * directory of its node's host: `mount_on` when given (where the operator mounted `mount`, which
 * is then recorded as given, an NFS export `host:/path` as in Scale), else `mount` itself, which
 * must then be that directory. This service mounts nothing: for Scale's configurations, which
 * name only the export, the operator may mount every export under one root on every node
 * (`NFS_MOUNT_ROOT`, lib/documents/nfs.ts), and `mount_on` is then filled in as
 * `<root>/<host>/<path>`.
 */
export const STRIKE_CONFIGURATION_VERSION = "1.0";

export interface StrikeFileRule {
	/** a JavaScript regular expression, matched from the start of the file name (as Python's re.match) */
	filename_regex: string;
	/** relative, normalised; files go to workspace_path/YYYY/MM/DD */
	workspace_path: string;
	workspace_name: string;
	data_types: string[];
}

export interface StrikeConfiguration {
	version: "1.0";
	/**
	 * as given when `mount_on` is (the network mount the operator mounted there); otherwise the
	 * absolute, normalised host path of the directory to monitor
	 */
	mount: string;
	/** absolute, normalised host path of the directory to monitor; only when given */
	mount_on?: string;
	transfer_suffix: string;
	files_to_ingest: StrikeFileRule[];
}

// Scale's STRIKE_CONFIGURATION_SCHEMA, with the mount_on the spec lists.
const STRIKE_CONFIGURATION_SCHEMA = {
	type: "object",
	required: ["mount", "transfer_suffix", "files_to_ingest"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		mount: { type: "string", minLength: 1 },
		mount_on: { type: "string", minLength: 1 },
		transfer_suffix: { type: "string", minLength: 1 },
		files_to_ingest: {
			type: "array",
			minItems: 1,
			items: {
				type: "object",
				required: ["filename_regex", "workspace_path", "workspace_name"],
				additionalProperties: false,
				properties: {
					filename_regex: { type: "string", minLength: 1 },
					data_types: { type: "array", items: { type: "string", minLength: 1 } },
					workspace_path: { type: "string", minLength: 1 },
					workspace_name: { type: "string", minLength: 1 }
				}
			}
		}
	}
};

const checkShape = compileChecker(STRIKE_CONFIGURATION_SCHEMA);

type Given = {
	version?: string;
	mount: string;
	mount_on?: string;
	transfer_suffix: string;
	files_to_ingest: {
		filename_regex: string;
		workspace_path: string;
		workspace_name: string;
		data_types?: string[];
	}[];
};

/** How a configuration's paths are resolved on this cluster. */
export interface StrikeMountOptions {
	/**
	 * where the nodes mount NFS exports (`NFS_MOUNT_ROOT`): an export named without `mount_on`
	 * is watched at `<nfsMountRoot>/<host>/<path>`; null: such a configuration is refused
	 */
	nfsMountRoot?: string | null;
}

/**
 * Parses a Strike configuration: shape and version as Scale, `mount_on` (when given, or filled
 * in under `nfsMountRoot` for an NFS export) or else `mount` an absolute host path, each
 * `workspace_path` relative and inside its workspace, each `filename_regex` a valid JavaScript
 * regular expression. Answers a normalised copy (paths normalised, data_types filled). Whether
 * the workspaces exist and are active (workspaceNamesIn) is the caller's to check. Throws FieldError, e.g.
 * `configuration.files_to_ingest[0].filename_regex`.
 */
export function parseStrikeConfiguration(
	doc: unknown,
	field = "configuration",
	options: StrikeMountOptions = {}
): StrikeConfiguration {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as Given;
	const version = given.version ?? STRIKE_CONFIGURATION_VERSION;
	if (version !== STRIKE_CONFIGURATION_VERSION) {
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${STRIKE_CONFIGURATION_VERSION})`
		);
	}
	const mountOn =
		given.mount_on ??
		(options.nfsMountRoot && isNfsExport(given.mount)
			? nfsMountPoint(given.mount, options.nfsMountRoot, `${field}.mount`)
			: undefined);
	const config: StrikeConfiguration = {
		version: STRIKE_CONFIGURATION_VERSION,
		mount: mountOn === undefined ? monitoredMount(given.mount, field) : given.mount,
		transfer_suffix: given.transfer_suffix,
		files_to_ingest: given.files_to_ingest.map((rule, i) => {
			const at = `${field}.files_to_ingest[${i}]`;
			try {
				new RegExp(rule.filename_regex);
			} catch (error) {
				throw new FieldError(
					`${at}.filename_regex`,
					`is not a valid regular expression: ${(error as Error).message}`
				);
			}
			return {
				filename_regex: rule.filename_regex,
				workspace_path: workspacePath(rule.workspace_path, `${at}.workspace_path`),
				workspace_name: rule.workspace_name,
				data_types: [...(rule.data_types ?? [])]
			};
		})
	};
	if (mountOn !== undefined) config.mount_on = hostPath(mountOn, `${field}.mount_on`);
	return config;
}

/** `mount` without a `mount_on`: the directory the monitor watches. */
function monitoredMount(value: string, field: string): string {
	if (isNfsExport(value))
		throw new FieldError(
			`${field}.mount_on`,
			`is required when mount is the network export "${value}": this service mounts nothing, so mount it on the node and give the directory it is mounted on (or set NFS_MOUNT_ROOT where the nodes mount every export, as autofs's /net)`
		);
	return hostPath(value, `${field}.mount`);
}

function hostPath(value: string, at: string): string {
	if (!path.posix.isAbsolute(value))
		throw new FieldError(at, `"${value}" must be an absolute path`);
	return path.posix.normalize(value).replace(/(.)\/$/, "$1");
}

function workspacePath(value: string, at: string): string {
	if (path.posix.isAbsolute(value)) throw new FieldError(at, "may not be an absolute path");
	const normal = path.posix.normalize(value).replace(/(.)\/$/, "$1");
	if (normal === ".." || normal.startsWith("../")) {
		throw new FieldError(at, `"${value}" leads outside the workspace`);
	}
	return normal;
}

/** The workspaces a configuration stores files in, once each, in order of first mention. */
export function workspaceNamesIn(config: Pick<StrikeConfiguration, "files_to_ingest">): string[] {
	return [...new Set(config.files_to_ingest.map(rule => rule.workspace_name))];
}

const compiled = new WeakMap<{ filename_regex: string }, RegExp>();

/**
 * The first rule whose filename_regex matches the file name from its start (Scale uses Python's
 * re.match: anchored at the start, not at the end), or null when none does. Any strike's rules:
 * configuration 1.0's and the s3 monitor's (strike-s3.ts).
 */
export function matchFileName<R extends { filename_regex: string }>(
	config: { files_to_ingest: readonly R[] },
	fileName: string
): R | null {
	for (const rule of config.files_to_ingest) {
		let regex = compiled.get(rule);
		if (!regex) {
			regex = new RegExp(rule.filename_regex, "y");
			compiled.set(rule, regex);
		}
		regex.lastIndex = 0;
		if (regex.test(fileName)) return rule;
	}
	return null;
}

/**
 * Strikes (Scale's ingest/views.py and models.py StrikeManager): a strike is saved together with
 * its process, a job of the system job type `scale-strike` (migration 0007) whose one input is
 * the strike's id, in one transaction. The scheduler places that job like any other; the agent
 * that runs it runs the strike's monitor (lib/ingest/monitor.ts).
 */
export const STRIKE_JOB_TYPE = "scale-strike";
