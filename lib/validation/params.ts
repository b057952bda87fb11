import type { ActionParams } from "moleculer";
import type { QUERY_SCHEMA } from "./schema";

/**
 * An action's params as a JSON Schema, of type "object" (its properties the params): what the
 * ajv validator (middlewares/ajv-validator.ts) checks. `$$query` (QUERY_SCHEMA) marks one read
 * from a query string.
 */
export interface ParamsSchema {
	type: string;
	[QUERY_SCHEMA]?: boolean;
	properties?: Record<string, unknown>;
	required?: readonly string[];
	[keyword: string]: unknown;
}

/**
 * The schema as Moleculer's typings want an action's `params` (fastest-validator's shape, which
 * a JSON Schema is not); the object itself is what the validator gets.
 */
export function jsonParams(schema: ParamsSchema): ActionParams {
	return schema as unknown as ActionParams;
}
