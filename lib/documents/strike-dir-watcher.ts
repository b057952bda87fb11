import { assertSchema, checkStorableText, compileChecker } from "../validation/schema";
import type { StrikeConfiguration } from "./strike-configuration";
import { parseStrike2Rules, STRIKE_2_RULES_SCHEMA, type S3StrikeRule } from "./strike-s3";

/**
 * Strike configuration 2.0 (Scale 5.0's docs/architecture/strike.rst) with a `dir-watcher`
 * monitor: the directory watched is the host workspace `workspace`'s, and each file a rule
 * matches goes to `new_workspace` (else `workspace`) under `new_file_path`/YYYY/MM/DD (else
 * YYYY/MM/DD). It runs on configuration 1.0's watcher (lib/ingest/monitor.ts): the ingest
 * service reads it as the 1.0 configuration `asWatcherConfiguration` answers. A file matched is
 * always moved, even without new_* (Scale's leaves it where it came): the watched directory is
 * listed again every few seconds, so what stays in it would be seen again.
 */
export interface DirWatcherStrikeConfiguration {
	version: "2.0";
	workspace: string;
	monitor: { type: "dir-watcher"; transfer_suffix: string };
	files_to_ingest: S3StrikeRule[];
}

const SCHEMA = {
	type: "object",
	required: ["version", "workspace", "monitor", "files_to_ingest"],
	additionalProperties: false,
	properties: {
		version: { type: "string", const: "2.0" },
		workspace: { type: "string", minLength: 1, maxLength: 50 },
		monitor: {
			type: "object",
			required: ["type", "transfer_suffix"],
			additionalProperties: false,
			properties: {
				type: { type: "string", const: "dir-watcher" },
				transfer_suffix: { type: "string", minLength: 1, maxLength: 50 }
			}
		},
		files_to_ingest: STRIKE_2_RULES_SCHEMA
	}
};

const checkShape = compileChecker(SCHEMA);

/** Whether a strike's stored or given configuration is a 2.0 one with a dir-watcher monitor. */
export function isDirWatcherConfiguration(doc: unknown): doc is DirWatcherStrikeConfiguration {
	const given = doc as { version?: unknown; monitor?: { type?: unknown } } | null;
	return given?.version === "2.0" && given.monitor?.type === "dir-watcher";
}

/**
 * Parses a 2.0 dir-watcher configuration (shape, rules as strike-s3.ts's); whether its
 * workspaces are active host workspaces is the caller's to check. Throws FieldError.
 */
export function parseDirWatcherConfiguration(
	doc: unknown,
	field: string
): DirWatcherStrikeConfiguration {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as DirWatcherStrikeConfiguration;
	return {
		version: "2.0",
		workspace: given.workspace,
		monitor: { type: "dir-watcher", transfer_suffix: given.monitor.transfer_suffix },
		files_to_ingest: parseStrike2Rules(given.files_to_ingest, field)
	};
}

/** The workspaces a dir-watcher configuration names, once each, the watched one first. */
export function dirWatcherWorkspaces(config: DirWatcherStrikeConfiguration): string[] {
	return [
		...new Set([
			config.workspace,
			...config.files_to_ingest.flatMap(r => (r.new_workspace ? [r.new_workspace] : []))
		])
	];
}

/** The 1.0 configuration the watcher runs: `hostPath` is the watched workspace's directory. */
export function asWatcherConfiguration(
	config: DirWatcherStrikeConfiguration,
	hostPath: string
): StrikeConfiguration {
	return {
		version: "1.0",
		mount: hostPath,
		transfer_suffix: config.monitor.transfer_suffix,
		files_to_ingest: config.files_to_ingest.map(rule => ({
			filename_regex: rule.filename_regex,
			workspace_path: rule.new_file_path || ".",
			workspace_name: rule.new_workspace ?? config.workspace,
			data_types: rule.data_types
		}))
	};
}
