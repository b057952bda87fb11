/**
 * PostgreSQL array literals for the parameters of set-based statements (`$1::int[]`,
 * `$1::text[]`), written in one pass. Why: `pg` turns a JavaScript array into its literal element
 * by element, each through two regular-expression replaces and a concatenation onto the literal
 * so far; for the arrays of the ingest's and the triggers' batches (500 names or ids each) that
 * came to ~2 KB of garbage per file in a burst of 10,000 (a sampling heap profile of
 * `npm run bench:ingest`'s burst B). `pg` sends what `toPostgres` answers as it is.
 */
export class ArrayLiteral {
	constructor(
		private readonly literal: string,
		/** the elements, which plannedQuery weighs as it weighs an array's */
		readonly length: number
	) {}

	toPostgres(): string {
		return this.literal;
	}
}

/** `{1,2,NULL}`: integers (or nulls) as an int[] literal. */
export function intArray(values: readonly (number | null | undefined)[]): ArrayLiteral {
	return new ArrayLiteral(
		`{${values.map(v => (v == null ? "NULL" : String(Math.trunc(v)))).join(",")}}`,
		values.length
	);
}

/** `{"a","b \"c\""}`: strings as a text[] literal, each quoted, `\` and `"` escaped. */
export function textArray(values: readonly string[]): ArrayLiteral {
	return new ArrayLiteral(
		`{${values.map(v => `"${/["\\]/.test(v) ? v.replace(/["\\]/g, "\\$&") : v}"`).join(",")}}`,
		values.length
	);
}
