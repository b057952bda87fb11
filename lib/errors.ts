import { Errors } from "moleculer";

/**
 * The service's own errors. They travel between nodes as Moleculer errors, so callers branch on
 * the stable `type` string, never on `instanceof` (a remote error arrives as a plain
 * MoleculerError with the same type, code and data).
 */
export const ErrorTypes = {
	BAD_REQUEST: "BAD_REQUEST",
	NOT_FOUND: "NOT_FOUND",
	UNAUTHORIZED: "UNAUTHORIZED",
	FORBIDDEN: "FORBIDDEN",
	UNSUPPORTED_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
	PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
	CONFLICT: "CONFLICT",
	DATABASE_UNAVAILABLE: "DATABASE_UNAVAILABLE"
} as const;

export interface ErrorData {
	/** the request field at fault, when one is */
	field?: string;
	/** the spec answers node and job updates in text/plain */
	plainText?: boolean;
}

export class BadRequestError extends Errors.MoleculerClientError {
	constructor(message: string, data: ErrorData = {}) {
		super(message, 400, ErrorTypes.BAD_REQUEST, data);
	}
}

/** A bad value of one named field: the message is `<field>: <problem>`. */
export class FieldError extends BadRequestError {
	constructor(field: string, problem: string, data: ErrorData = {}) {
		super(`${field}: ${problem}`, { ...data, field });
	}
}

export class NotFoundError extends Errors.MoleculerClientError {
	constructor(message: string, data: ErrorData = {}) {
		super(message, 404, ErrorTypes.NOT_FOUND, data);
	}
}

/** A request that conflicts with the current state (not the live execution of a strike, say). */
export class ConflictError extends Errors.MoleculerClientError {
	constructor(message: string, data: ErrorData = {}) {
		super(message, 409, ErrorTypes.CONFLICT, data);
	}
}

/** A call from a peer that may not make it (a report from an agent that does not hold it, say). */
export class ForbiddenError extends Errors.MoleculerClientError {
	constructor(message: string) {
		super(message, 403, ErrorTypes.FORBIDDEN, {});
	}
}

/** A request body in another format than the route reads (JSON). */
export class UnsupportedMediaTypeError extends Errors.MoleculerClientError {
	constructor(message: string) {
		super(message, 415, ErrorTypes.UNSUPPORTED_MEDIA_TYPE, {});
	}
}

/** A request body larger than its route takes. */
export class PayloadTooLargeError extends Errors.MoleculerClientError {
	constructor(message: string) {
		super(message, 413, ErrorTypes.PAYLOAD_TOO_LARGE, {});
	}
}

export class UnauthorizedError extends Errors.MoleculerClientError {
	constructor(message: string) {
		super(message, 401, ErrorTypes.UNAUTHORIZED, {});
	}
}

/**
 * PostgreSQL cannot be reached: refused, shutting down, or the connection lost. Retryable, as the
 * pool reconnects by itself once it is back; `reason` (what pg said) is for the logs only.
 */
export class DatabaseUnavailableError extends Errors.MoleculerRetryableError {
	constructor(reason: string) {
		super("The database is not available", 503, ErrorTypes.DATABASE_UNAVAILABLE, { reason });
	}
}
