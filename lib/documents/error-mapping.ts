import { FieldError } from "../errors";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import type { ErrorMapping } from "./types";

/**
 * Error mapping 1.0 (Scale 3.0's job/configuration/interface/error_interface.py and
 * docs/architecture/jobs/error_interface.rst): `{"version": "1.0", "exit_codes": {"1": "unknown"}}`
 * maps a job's exit codes to registered error names.
 */
export const ERROR_MAPPING_VERSION = "1.0";

/** Scale's ERROR_INTERFACE_SCHEMA: no unknown top-level fields. The entries are checked below. */
const checkShape = compileChecker({
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		exit_codes: { type: "object" }
	}
});

/** A canonical integer, as `str(exit_code)` writes it: no sign on 0, no leading zeros or "+". */
const EXIT_CODE = /^(0|-?[1-9][0-9]*)$/;

/**
 * Checks an error mapping and answers a normalised copy. An absent (undefined or null) document
 * is the empty mapping `{version: "1.0", exit_codes: {}}`, as in Scale. Every key of exit_codes
 * must be an integer written canonically ("1", "-1", "255"; not "01", "+1" or "1.5") and every
 * value the name of a registered error in `knownErrors`. Throws FieldError, e.g. at
 * `error_mapping.exit_codes.3` for an unknown error name.
 */
export function parseErrorMapping(
	doc: unknown,
	knownErrors: ReadonlySet<string>,
	field = "error_mapping"
): ErrorMapping {
	if (doc === undefined || doc === null)
		return { version: ERROR_MAPPING_VERSION, exit_codes: {} };
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as { version?: string; exit_codes?: Record<string, unknown> };
	const version = given.version ?? ERROR_MAPPING_VERSION;
	if (version !== ERROR_MAPPING_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${ERROR_MAPPING_VERSION})`
		);

	const exitCodes: Record<string, string> = {};
	for (const [code, name] of Object.entries(given.exit_codes ?? {})) {
		const at = `${field}.exit_codes.${code}`;
		if (!EXIT_CODE.test(code) || !Number.isSafeInteger(Number(code)))
			throw new FieldError(at, `"${code}" is not an exit code: keys must be integers`);
		if (typeof name !== "string") throw new FieldError(at, "must be an error name (a string)");
		if (!knownErrors.has(name))
			throw new FieldError(at, `"${name}" is not the name of a registered error`);
		exitCodes[code] = name;
	}
	return { version: ERROR_MAPPING_VERSION, exit_codes: exitCodes };
}

/** The distinct error names the mapping uses, in the order they first appear. */
export function errorNamesIn(mapping: ErrorMapping): string[] {
	return [...new Set(Object.values(mapping.exit_codes))];
}

/**
 * The error name an exit code maps to, or null: always null for 0 (success, as in Scale's
 * get_error) and for an unmapped code, where the caller applies its default error
 * (`algorithm-unknown` in Scale).
 */
export function mapExitCode(mapping: ErrorMapping, code: number): string | null {
	if (code === 0 || !Number.isInteger(code)) return null;
	return Object.prototype.hasOwnProperty.call(mapping.exit_codes, String(code))
		? mapping.exit_codes[String(code)]
		: null;
}
