import type { ServiceSchema } from "moleculer";
import { BODY_SCHEMA, PARSE_INT } from "../validation/body";
import { QUERY_SCHEMA } from "../validation/schema";
import { ID_PARAMS, routesOf } from "./aliases";

/**
 * The API's OpenAPI 3.1 document, generated from what the gateway serves and checks: each
 * action's `rest:` routes and its params, the JSON Schemas the ajv validator checks requests
 * against (middlewares/ajv-validator.ts). A route's path parameters come from its path, the rest
 * of its params are the query (GET, DELETE) or the JSON body (POST, PUT, PATCH). Answers are
 * JSON objects (what each holds is the README's REST API table, Scale 3.0's documentation);
 * errors are `{"detail"}`.
 */

type Schema = Record<string, unknown>;

const ERROR = { $ref: "#/components/schemas/Error" };

/** A params schema as plain JSON Schema: our markers out, a parse_int field's strings in. */
function plain(schema: unknown): unknown {
	if (Array.isArray(schema)) return schema.map(plain);
	if (schema === null || typeof schema !== "object") return schema;
	const { [PARSE_INT]: parseInt, ...rest } = schema as Schema;
	const out = Object.fromEntries(
		Object.entries(rest)
			.filter(([k]) => k !== QUERY_SCHEMA && k !== BODY_SCHEMA)
			.map(([k, v]) => [k, plain(v)])
	);
	return parseInt ? { anyOf: [out, { type: "string", pattern: "^[0-9]{1,15}$" }] } : out;
}

/** `/jobs/:id` as OpenAPI writes it, with Scale's trailing slash: `/jobs/{id}/`. */
function openApiPath(path: string): { path: string; keys: string[] } {
	const keys: string[] = [];
	const written = path.replace(/:([A-Za-z_]\w*)/g, (_m, key: string) => {
		keys.push(key);
		return `{${key}}`;
	});
	return { path: `${written.replace(/\/+$/, "")}/`, keys };
}

function operation(method: string, path: string, actionName: string, action: Schema) {
	const { keys } = openApiPath(path);
	const params = (action.params ?? { type: "object" }) as Schema;
	const properties = (params.properties ?? {}) as Record<string, Schema>;
	const required = (params.required ?? []) as string[];
	const readOnly = params[BODY_SCHEMA] as readonly string[] | undefined;
	const parameters: Schema[] = keys.map(key => ({
		name: key,
		in: "path",
		required: true,
		schema: ID_PARAMS.includes(key)
			? { type: "integer", minimum: 1 }
			: (plain(properties[key]) ?? { type: "string" })
	}));
	const own = Object.entries(properties).filter(([name]) => !keys.includes(name));
	const op: Schema = {
		operationId: actionName,
		summary: `${actionName} (${method} ${path})`,
		parameters,
		responses: {
			"2XX": {
				description: "the answer (see the README's REST API table)",
				content: { "application/json": { schema: {} } }
			},
			"400": { description: "bad input, nothing changed", content: json(ERROR) },
			"401": {
				description: "a token is missing or wrong (API_TOKENS)",
				content: json(ERROR)
			},
			"404": { description: "not found", content: json(ERROR) },
			"503": { description: "unavailable, try again", content: json(ERROR) }
		}
	};
	if (["POST", "PUT", "PATCH"].includes(method)) {
		const body: Schema = {
			type: "object",
			properties: {
				...Object.fromEntries(own.map(([name, s]) => [name, plain(s)])),
				...Object.fromEntries(
					(readOnly ?? []).map(name => [
						name,
						{ description: "read-only: accepted, ignored, named in warnings" }
					])
				)
			}
		};
		const needed = required.filter(name => !keys.includes(name));
		if (needed.length > 0) body.required = needed;
		if (readOnly !== undefined) body.additionalProperties = false;
		op.requestBody = { required: true, content: json(body) };
	} else {
		for (const [name, s] of own)
			parameters.push({
				name,
				in: "query",
				required: required.includes(name),
				schema: plain(s)
			});
	}
	return op;
}

function json(schema: unknown) {
	return { "application/json": { schema } };
}

/** The OpenAPI 3.1 document of the routes the services declare. */
export function openApiDocument(schemas: Partial<ServiceSchema>[], version: string) {
	const paths: Record<string, Record<string, unknown>> = {};
	for (const { method, path, actionName, action } of routesOf(schemas)) {
		const at = openApiPath(path).path;
		paths[at] ??= {};
		paths[at][method.toLowerCase()] = operation(method, path, actionName, action);
	}
	return {
		openapi: "3.1.0",
		info: {
			title: "Scale job processing service",
			version,
			description:
				"Scale 3.0's REST interface. Paths are also served without the trailing slash, and under /api/v3."
		},
		servers: [{ url: "/api" }],
		components: {
			schemas: {
				Error: {
					type: "object",
					required: ["detail"],
					properties: { detail: { type: "string" } }
				}
			},
			securitySchemes: { token: { type: "http", scheme: "bearer" } }
		},
		security: [{}, { token: [] }],
		paths
	};
}
