import { FieldError } from "../errors";
import { assertSchema, compileChecker } from "../validation/schema";
import { checkStorableText } from "../validation/schema";
import { parseS3StrikeConfiguration, type S3StrikeRule } from "./strike-s3";

/**
 * Scan configuration 1.0 (Scale 5.0's docs/architecture/scan.rst): the workspace to walk, its
 * scanner (`dir` for a host workspace, `s3` for an s3 one), `recursive` (default true) and the
 * rules, as a 2.0 strike's (`filename_regex`, `data_types`, `new_workspace`, `new_file_path`).
 */
export const SCAN_CONFIGURATION_VERSION = "1.0";

export interface ScanConfiguration {
	version: "1.0";
	workspace: string;
	scanner: { type: "dir" | "s3" };
	recursive: boolean;
	files_to_ingest: S3StrikeRule[];
}

const SCHEMA = {
	type: "object",
	required: ["workspace", "scanner", "files_to_ingest"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		workspace: { type: "string", minLength: 1, maxLength: 50 },
		scanner: {
			type: "object",
			required: ["type"],
			properties: { type: { type: "string", enum: ["dir", "s3"] } }
		},
		recursive: { type: "boolean" },
		files_to_ingest: { type: "array", minItems: 1 }
	}
};

const checkShape = compileChecker(SCHEMA);

/** Parses a scan configuration; throws FieldError naming the field, e.g. `configuration.scanner.type`. */
export function parseScanConfiguration(doc: unknown, field = "configuration"): ScanConfiguration {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as {
		version?: string;
		workspace: string;
		scanner: { type: "dir" | "s3" };
	} & {
		recursive?: boolean;
		files_to_ingest: unknown[];
	};
	const version = given.version ?? SCAN_CONFIGURATION_VERSION;
	if (version !== SCAN_CONFIGURATION_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${SCAN_CONFIGURATION_VERSION})`
		);
	// the rules are a 2.0 strike's: checked by the same parser
	const rules = parseS3StrikeConfiguration(
		{
			version: "2.0",
			workspace: given.workspace,
			monitor: { type: "s3", sqs_name: "scan" },
			files_to_ingest: given.files_to_ingest
		},
		field
	).files_to_ingest;
	return {
		version: SCAN_CONFIGURATION_VERSION,
		workspace: given.workspace,
		scanner: { type: given.scanner.type },
		recursive: given.recursive ?? true,
		files_to_ingest: rules
	};
}
