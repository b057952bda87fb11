import type { FieldProblem } from "../validation/schema";
import { formatProblems } from "../validation/schema";

export interface HttpError {
	status: number;
	detail: string;
	plainText: boolean;
	/** seconds the client should wait before trying again (`Retry-After`) */
	retryAfter?: number;
}

/** How long a client is asked to wait while PostgreSQL is unreachable: every request tries to connect anew. */
const DATABASE_RETRY_AFTER_S = 5;

interface ErrorLike {
	name?: string;
	message?: string;
	code?: unknown;
	status?: unknown;
	type?: string;
	data?: any;
}

/**
 * Maps any error reaching the gateway to the status and `detail` a client sees. Branches on the
 * stable `type` (errors from other nodes arrive as plain MoleculerErrors), never on classes.
 */
export function toHttpError(err: ErrorLike): HttpError {
	const plainText = !!(err.data && err.data.plainText);
	// moleculer-web's own errors (ServiceUnavailableError...) have no type, only a class name.
	switch (err.type ?? err.name) {
		case "VALIDATION_ERROR":
			return {
				status: 400,
				detail: Array.isArray(err.data)
					? formatProblems(err.data as FieldProblem[])
					: err.message || "Invalid request",
				plainText
			};
		case "BAD_REQUEST":
		case "NOT_FOUND":
		case "UNAUTHORIZED":
		case "CONFLICT":
			return { status: Number(err.code), detail: err.message || "", plainText };
		case "ServiceUnavailableError":
		case "SERVICE_NOT_FOUND":
		case "SERVICE_NOT_AVAILABLE":
		case "REQUEST_TIMEOUT":
		case "BROKER_DISCONNECTED":
			return {
				status: 503,
				detail: "The service that answers this request is not available; try again shortly",
				plainText
			};
		case "DATABASE_UNAVAILABLE":
			return {
				status: 503,
				detail: "The database is not available; try again shortly",
				plainText,
				retryAfter: DATABASE_RETRY_AFTER_S
			};
		case "NOT_FOUND_ROUTE":
			return { status: 404, detail: "Not found.", plainText };
		case "entity.parse.failed":
			return {
				status: 400,
				detail: `Malformed JSON in the request body: ${err.message}`,
				plainText
			};
		case "PAYLOAD_TOO_LARGE":
		case "entity.too.large":
			return { status: 413, detail: "The request body is too large", plainText };
	}
	// body-parser errors carry `status` and `type` strings of their own
	const status = Number(err.status ?? err.code);
	if (status >= 400 && status < 500)
		return { status, detail: err.message || "Bad request", plainText };
	return { status: 500, detail: "Internal server error", plainText };
}
