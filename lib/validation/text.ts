import { BadRequestError, FieldError } from "../errors";

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
	// the path is spelled out only for the string at fault: the documents of every new job pass
	// here, and nearly all of them are fine
	const at: (string | number)[] = [];
	const fieldAt = () =>
		at.reduce<string>(
			(path, step) =>
				typeof step === "number" ? `${path}[${step}]` : path ? `${path}.${step}` : step,
			field
		);
	const walk = (item: unknown): void => {
		if (typeof item === "string") {
			const problem = textProblem(item);
			if (problem) throw new FieldError(fieldAt(), problem);
		} else if (Array.isArray(item)) {
			for (let i = 0; i < item.length; i++) {
				at.push(i);
				walk(item[i]);
				at.pop();
			}
		} else if (item !== null && typeof item === "object") {
			for (const key in item) {
				if (!Object.prototype.hasOwnProperty.call(item, key)) continue;
				const problem = textProblem(key);
				if (problem) throw new FieldError(fieldAt(), `field names ${problem}`);
				at.push(key);
				walk((item as Record<string, unknown>)[key]);
				at.pop();
			}
		}
	};
	walk(value);
}

/** How deep a request body may nest: the documents the API takes need a handful of levels. */
export const MAX_BODY_DEPTH = 64;

/**
 * Refuses a body nested deeper than MAX_BODY_DEPTH (400), measured without recursion: the
 * validators and serialisers that walk a body recursively would exhaust the stack on one
 * thousands of levels deep and answer 500.
 */
export function checkBodyDepth(body: unknown): void {
	const stack: [unknown, number][] = [[body, 1]];
	while (stack.length > 0) {
		const [value, depth] = stack.pop()!;
		if (value === null || typeof value !== "object") continue;
		if (depth > MAX_BODY_DEPTH)
			throw new BadRequestError(`body: nested deeper than ${MAX_BODY_DEPTH} levels`);
		for (const child of Object.values(value as object)) stack.push([child, depth + 1]);
	}
}
