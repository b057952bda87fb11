import { Errors } from "moleculer";
import { toHttpError } from "../../lib/http/errors";
import { NatsCutOffError } from "../../lib/transport/request-deadline";
import {
	BadRequestError,
	DatabaseUnavailableError,
	ErrorTypes,
	FieldError,
	NotFoundError,
	PayloadTooLargeError,
	UnauthorizedError
} from "../../lib/errors";

const WebErrors = require("moleculer-web").Errors;

const UNAVAILABLE = /not available/;

describe("toHttpError", () => {
	describe("the service's own errors", () => {
		it("maps BadRequestError to 400 with its message", () => {
			expect(toHttpError(new BadRequestError("nope"))).toEqual({
				status: 400,
				detail: "nope",
				plainText: false
			});
		});

		it("maps FieldError to 400 `field: problem`", () => {
			expect(toHttpError(new FieldError("page_size", "must be an integer"))).toEqual({
				status: 400,
				detail: "page_size: must be an integer",
				plainText: false
			});
		});

		it("maps NotFoundError to 404", () => {
			expect(toHttpError(new NotFoundError("No error with id 5"))).toEqual({
				status: 404,
				detail: "No error with id 5",
				plainText: false
			});
		});

		it("maps UnauthorizedError to 401", () => {
			expect(toHttpError(new UnauthorizedError("Invalid token."))).toEqual({
				status: 401,
				detail: "Invalid token.",
				plainText: false
			});
		});

		it("answers in text/plain when the error asks for it", () => {
			expect(toHttpError(new NotFoundError("no node", { plainText: true }))).toEqual({
				status: 404,
				detail: "no node",
				plainText: true
			});
			expect(toHttpError(new BadRequestError("bad", { plainText: true })).plainText).toBe(
				true
			);
		});
	});

	describe("errors as they arrive from another node (plain MoleculerErrors)", () => {
		it.each([
			[ErrorTypes.BAD_REQUEST, 400],
			[ErrorTypes.NOT_FOUND, 404],
			[ErrorTypes.UNAUTHORIZED, 401],
			[ErrorTypes.CONFLICT, 409]
		])("maps type %s by its code to %i", (type, code) => {
			const err = new Errors.MoleculerError("remote says no", code, type, {});
			expect(toHttpError(err)).toEqual({
				status: code,
				detail: "remote says no",
				plainText: false
			});
		});

		it("keeps plainText from the data", () => {
			const err = new Errors.MoleculerError("x", 400, "BAD_REQUEST", { plainText: true });
			expect(toHttpError(err).plainText).toBe(true);
		});
	});

	describe("validation errors", () => {
		it("formats the problems of a ValidationError as one sentence, with 400 not 422", () => {
			const err = new Errors.ValidationError(
				"Parameters validation error!",
				"VALIDATION_ERROR",
				[
					{ type: "required", field: "name", message: "is required" },
					{
						type: "type",
						field: "interface.input_data[1].name",
						message: "must be string"
					}
				] as any
			);
			expect(err.code).toBe(422);
			expect(toHttpError(err)).toEqual({
				status: 400,
				detail: "name: is required; interface.input_data[1].name: must be string",
				plainText: false
			});
		});

		it("uses the message when the data is not a problem list", () => {
			const err = new Errors.ValidationError("Bad params", "VALIDATION_ERROR", {} as any);
			expect(toHttpError(err)).toEqual({
				status: 400,
				detail: "Bad params",
				plainText: false
			});
			expect(toHttpError({ type: "VALIDATION_ERROR" }).detail).toBe("Invalid request");
		});
	});

	describe("service availability", () => {
		it.each([
			["ServiceNotFoundError", new Errors.ServiceNotFoundError({ action: "errors.list" })],
			["ServiceNotAvailableError", new Errors.ServiceNotAvailableError({ action: "x.y" })],
			["RequestTimeoutError", new Errors.RequestTimeoutError({ action: "x.y", nodeID: "n" })],
			["NatsCutOffError", new NatsCutOffError("x.y", "n")],
			["moleculer-web's ServiceUnavailableError", new WebErrors.ServiceUnavailableError()]
		])("maps %s to 503", (_, err) => {
			const http = toHttpError(err);
			expect(http.status).toBe(503);
			expect(http.detail).toMatch(UNAVAILABLE);
			expect(http.plainText).toBe(false);
		});

		it.each([
			["here", new DatabaseUnavailableError("connect ECONNREFUSED 127.0.0.1:5432")],
			[
				"from another node",
				new Errors.MoleculerError("x", 503, ErrorTypes.DATABASE_UNAVAILABLE, {})
			]
		])("maps the database's unavailability %s to 503 with a Retry-After", (_, err) => {
			expect(toHttpError(err)).toEqual({
				status: 503,
				detail: "The database is not available; try again shortly",
				plainText: false,
				retryAfter: 5
			});
		});
	});

	describe("gateway and body-parser errors", () => {
		it("maps moleculer-web's NotFoundError (no route) to 404", () => {
			expect(toHttpError(new WebErrors.NotFoundError())).toEqual({
				status: 404,
				detail: "Not found",
				plainText: false
			});
			expect(toHttpError({ type: "NOT_FOUND_ROUTE", code: 404 }).status).toBe(404);
		});

		it("maps malformed JSON to 400 naming the parser's complaint", () => {
			const err = {
				name: "SyntaxError",
				message: "Unexpected end of JSON input",
				status: 400,
				type: "entity.parse.failed"
			};
			expect(toHttpError(err)).toEqual({
				status: 400,
				detail: "Malformed JSON in the request body: Unexpected end of JSON input",
				plainText: false
			});
		});

		it("maps a body announced over the limit to 413", () => {
			expect(toHttpError(new PayloadTooLargeError("The request body is too large"))).toEqual({
				status: 413,
				detail: "The request body is too large",
				plainText: false
			});
		});

		it("maps a body over the limit to 413", () => {
			const err = {
				message: "request entity too large",
				status: 413,
				type: "entity.too.large"
			};
			expect(toHttpError(err)).toEqual({
				status: 413,
				detail: "The request body is too large",
				plainText: false
			});
		});

		it("passes other client errors through with their own status and message", () => {
			const unsupported = {
				message: 'unsupported charset "LATIN-9"',
				status: 415,
				type: "charset.unsupported"
			};
			expect(toHttpError(unsupported)).toEqual({
				status: 415,
				detail: 'unsupported charset "LATIN-9"',
				plainText: false
			});
			expect(toHttpError(new WebErrors.ForbiddenError("FORBIDDEN"))).toMatchObject({
				status: 403,
				detail: "Forbidden"
			});
			expect(toHttpError(new WebErrors.RateLimitExceeded())).toMatchObject({ status: 429 });
			expect(toHttpError(new Errors.MoleculerClientError("odd", 422, "ODD"))).toMatchObject({
				status: 422,
				detail: "odd"
			});
			expect(toHttpError({ status: 400 })).toEqual({
				status: 400,
				detail: "Bad request",
				plainText: false
			});
		});
	});

	describe("anything else", () => {
		it.each([
			["a plain Error", new Error("password=secret in the connection string")],
			["a MoleculerServerError", new Errors.MoleculerServerError("boom", 500, "BOOM")],
			["a database error code", Object.assign(new Error("duplicate key"), { code: "23505" })],
			["a system error code", Object.assign(new Error("refused"), { code: "ECONNREFUSED" })],
			["a status out of range", { message: "weird", status: 600 }],
			["a thrown string's wrapper", {}]
		])("maps %s to 500 without leaking its message", (_, err) => {
			expect(toHttpError(err as any)).toEqual({
				status: 500,
				detail: "Internal server error",
				plainText: false
			});
		});
	});
});
