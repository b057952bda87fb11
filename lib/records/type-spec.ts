import { FieldError } from "../errors";
import { assertSchema, type Checker } from "../validation/schema";

/**
 * What job types and recipe types share when they are saved from a REST body or an import
 * entry: options, field paths under the entry's place in the request, and the schema check.
 */
export interface SaveOptions {
	/** edit this type (name and version in the spec are ignored); create when absent */
	existingId?: number;
	/** prefix of the field paths in error messages, e.g. `import.job_types[2]` */
	field?: string;
}

export function fieldPath(prefix: string | undefined, name: string): string {
	return prefix ? `${prefix}.${name}` : name;
}

/** Whether the body carries the field (null counts: it clears or removes). */
export function has(spec: Record<string, unknown>, key: string): boolean {
	return Object.prototype.hasOwnProperty.call(spec, key) && spec[key] !== undefined;
}

/** The schema check of a type's body; a bad `name` is told the name rule, not the pattern. */
export function checkSpecSchema(
	check: Checker,
	spec: unknown,
	nameRule: string,
	prefix?: string
): void {
	assertSchema(check, spec, prefix, p =>
		p.type === "pattern" && p.field === "name" ? nameRule : p.message
	);
}

/** A name and version already taken, named on the entry's `name`. */
export function duplicateType(
	what: string,
	name: string,
	version: string,
	opts: SaveOptions
): FieldError {
	return new FieldError(
		fieldPath(opts.field, "name"),
		`a ${what} named "${name}" with version "${version}" already exists`
	);
}
