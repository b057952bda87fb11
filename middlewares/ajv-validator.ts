import { Errors, Validators } from "moleculer";
import { compileChecker } from "../lib/validation/schema";

/**
 * Moleculer validator backed by ajv: every action's `params` is a JSON Schema (an object schema
 * whose properties are the params). Schemas marked with QUERY_SCHEMA coerce query strings.
 */
export class AjvValidator extends Validators.Base {
	constructor() {
		super({ paramName: "params" });
	}

	compile(schema: Record<string, any>): Validators.Base.CheckerFunction {
		// Moleculer's own actions ($node.*, the gateway's) declare fastest-validator params; ours
		// are all JSON Schemas of type object. Those others are Moleculer's to check, not ours.
		if (schema.type !== "object") return (() => true) as any;
		const check = compileChecker(schema);
		// The base middleware turns a non-true result into a ValidationError carrying it.
		return ((params: Record<string, unknown>) => check(params)) as any;
	}

	validate(params: Record<string, any>, schema: Record<string, any>): boolean {
		const result = compileChecker(schema)(params);
		if (result === true) return true;
		throw new Errors.ValidationError(
			"Parameters validation error!",
			"VALIDATION_ERROR",
			result
		);
	}

	convertSchemaToMoleculer(schema: Record<string, any>): Record<string, any> {
		return schema;
	}
}
