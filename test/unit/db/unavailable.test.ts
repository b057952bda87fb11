import { ConnectionAcquireTimeoutError, ConnectionRefusedError, DatabaseError } from "sequelize";
import { isConnectionError } from "../../../lib/db/unavailable";

/** An Error with the fields pg gives its own (`code`, the SQLSTATE or errno). */
function pgError(message: string, code?: string): Error {
	return Object.assign(new Error(message), code === undefined ? {} : { code });
}

describe("isConnectionError", () => {
	it.each([
		["a refused connection", pgError("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED")],
		["a reset connection", pgError("read ECONNRESET", "ECONNRESET")],
		["a server shut down by an administrator", pgError("terminating connection", "57P01")],
		["a server starting up", pgError("the database system is starting up", "57P03")],
		["a connection failure", pgError("connection failure", "08006")],
		["a connection lost under a query", pgError("Connection terminated unexpectedly")],
		[
			"a lost connection used again",
			pgError("Client has encountered a connection error and is not queryable")
		],
		["a connection not made in time", pgError("timeout expired")],
		[
			"Sequelize's refused connection",
			new ConnectionRefusedError(pgError("connect ECONNREFUSED", "ECONNREFUSED"))
		],
		[
			"Sequelize's wrapped shutdown",
			new DatabaseError(
				Object.assign(pgError("terminating connection", "57P01"), { sql: "SELECT 1" })
			)
		],
		["Sequelize's pool giving up", new ConnectionAcquireTimeoutError(new Error("timed out"))],
		[
			"an error caused by one",
			new Error("read failed", { cause: pgError("x", "ECONNREFUSED") })
		]
	])("is true for %s", (_, err) => {
		expect(isConnectionError(err)).toBe(true);
	});

	it.each([
		["a unique violation", pgError("duplicate key value", "23505")],
		[
			"a protocol violation (a client's bug)",
			pgError("bind message has 2 parameters", "08P01")
		],
		["a syntax error", pgError('syntax error at or near "SELEC"', "42601")],
		["a query cancelled by its timeout", pgError("canceling statement", "57014")],
		["a wrong password", pgError("password authentication failed", "28P01")],
		["a plain error", new Error("boom")],
		["nothing", undefined],
		["a string", "ECONNREFUSED"]
	])("is false for %s", (_, err) => {
		expect(isConnectionError(err)).toBe(false);
	});
});
