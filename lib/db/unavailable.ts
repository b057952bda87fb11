/*
 * Telling an outage of PostgreSQL from a statement it refused. Kept apart from connection.ts so
 * the broker's middleware can use it without loading Sequelize into an agent-only process.
 */

/**
 * SQLSTATEs of a server that cannot serve this connection: class 08's connection exceptions (not
 * 08P01, a protocol violation, which is a client's bug) and 57P01–57P03 (shut down by an
 * administrator or a crash, or not yet accepting connections).
 */
const UNAVAILABLE_STATE = /^(08\d{3}|57P0[123])$/;

/** Socket errors of a server that is down or cannot be reached. */
const UNAVAILABLE_ERRNO = new Set([
	"ECONNREFUSED",
	"ECONNRESET",
	"EPIPE",
	"ETIMEDOUT",
	"EHOSTUNREACH",
	"ENETUNREACH",
	"ENOTFOUND",
	"EAI_AGAIN"
]);

/** Sequelize's errors that carry no code of their own: no connection made, or none free in time. */
const UNAVAILABLE_NAME = new Set([
	"SequelizeConnectionTimedOutError",
	"SequelizeConnectionAcquireTimeoutError"
]);

/** What pg says of a connection not made in time, lost under a query, or used after it was lost. */
const NO_CONNECTION =
	/^(timeout expired$|Connection terminated|Client has encountered a connection error|Client was closed and is not queryable)/;

/**
 * Whether `err` says PostgreSQL cannot be reached (rather than refusing a statement), looking
 * through the errors Sequelize wraps pg's in (`parent`, `original`) and `cause`.
 */
export function isConnectionError(err: unknown): boolean {
	let e = err as { name?: unknown; code?: unknown; message?: unknown } | undefined;
	for (let depth = 0; e && typeof e === "object" && depth < 4; depth++) {
		if (typeof e.name === "string" && UNAVAILABLE_NAME.has(e.name)) return true;
		if (
			typeof e.code === "string" &&
			(UNAVAILABLE_ERRNO.has(e.code) || UNAVAILABLE_STATE.test(e.code))
		)
			return true;
		if (typeof e.message === "string" && NO_CONNECTION.test(e.message)) return true;
		const wrapped = e as { parent?: unknown; original?: unknown; cause?: unknown };
		e = (wrapped.parent ?? wrapped.original ?? wrapped.cause) as typeof e;
	}
	return false;
}
