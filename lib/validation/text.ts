import { FieldError } from "../errors";

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `text` cannot be stored in PostgreSQL as it is, or null: text and jsonb hold no NUL, jsonb
 * refuses an unpaired surrogate escape and text would silently turn one into U+FFFD.
 */
export function textProblem(text: string): string | null {
	if (text.includes("\0")) return "must not contain NUL characters";
	if (UNPAIRED_SURROGATE.test(text)) return "must not contain unpaired UTF-16 surrogates";
	return null;
}

/** Throws FieldError at the first string (value or key) in `value` PostgreSQL cannot store. */
export function checkStorableText(value: unknown, field: string): void {
	if (typeof value === "string") {
		const problem = textProblem(value);
		if (problem) throw new FieldError(field, problem);
	} else if (Array.isArray(value)) {
		value.forEach((item, i) => checkStorableText(item, `${field}[${i}]`));
	} else if (value !== null && typeof value === "object") {
		for (const [key, item] of Object.entries(value)) {
			const problem = textProblem(key);
			if (problem) throw new FieldError(field, `field names ${problem}`);
			checkStorableText(item, `${field ? `${field}.${key}` : key}`);
		}
	}
}
