import { Readable } from "stream";
import type { IncomingMessage, ServerResponse } from "http";
import type { AddressInfo } from "net";
import type { Context, Service, ServiceSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { ALL_SERVICES } from "../lib/launch/config";
import { aliasesFrom, answersInPlainText, ID_PARAMS } from "../lib/http/aliases";
import { isDocsRequest, serveDocs } from "../lib/http/docs";
import { VERSION } from "../lib/paths";
import { openApiDocument } from "../lib/http/openapi";
import { toHttpError } from "../lib/http/errors";
import { forwardedBaseUrl, listeningUrl } from "../lib/http/public-url";
import {
	BadRequestError,
	FieldError,
	NotFoundError,
	PayloadTooLargeError,
	UnauthorizedError,
	UnsupportedMediaTypeError
} from "../lib/errors";
import { checkBodyDepth, checkStorableText } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";

export interface ApiSettings {
	port: number;
	ip: string;
	/** bearer tokens; empty = anonymous access (only allowed on loopback unless configured) */
	apiTokens: string[];
	/** the base of every absolute URL the API writes; null: the address it listens on */
	publicUrl: string | null;
	/** without publicUrl, whether a proxy's X-Forwarded-Proto/-Host and Host name that base */
	trustProxy: boolean;
	[key: string]: unknown;
}

type Req = IncomingMessage & {
	$ctx?: Context<unknown, RequestMeta>;
	$params: Record<string, unknown>;
	$alias?: { keys?: { name: string }[] };
	$action?: { name: string };
	$route?: unknown;
	$requestId?: string;
	body?: unknown;
	originalUrl?: string;
	query?: Record<string, unknown>;
};

const BODY_METHODS = ["POST", "PUT", "PATCH"];

/**
 * The routes: the `rest:` of every other service's actions, whether it runs here or elsewhere
 * (lib/http/aliases.ts says why the table is fixed at start rather than moleculer-web's
 * autoAliases).
 */
const SCHEMAS = ALL_SERVICES.filter(name => name !== "api").map(
	name => require(`./${name}.service`).default as ServiceSchema
);
export const ALIASES = aliasesFrom(SCHEMAS);

/** The OpenAPI document of those routes (lib/http/openapi.ts), served at /api/openapi.json. */
export const OPENAPI = openApiDocument(SCHEMAS, VERSION);
const OPENAPI_JSON = Buffer.from(JSON.stringify(OPENAPI));

/** The gateway as its hooks see it: a service with the methods below. */
type ApiThis = Service<ApiSettings> & {
	authenticate(req: Req): { token: string } | null;
	baseUrlOf(req: Req): string;
	/** `http://host:port` the gateway listens on, known once it started */
	boundUrl: string;
};

/** moleculer-web's own request handler, which the gateway's runs after its token check. */
const gatewayHttpHandler = ApiGateway.methods!.httpHandler as (
	this: ApiThis,
	req: Req,
	res: ServerResponse,
	next?: unknown
) => Promise<void>;

/** Whether the request announced a body that has not been received whole. */
function bodyUnread(req: Req): boolean {
	const announced =
		Number(req.headers["content-length"] ?? 0) > 0 ||
		req.headers["transfer-encoding"] !== undefined;
	return announced && !req.complete;
}

/** How long, and for how many more bytes, a refused request's connection is read before it goes. */
const LINGER_MS = 1000;
const LINGER_BYTES = 4 * 1024 * 1024;

/**
 * Closes a refused request's connection the way HTTP servers linger on a close: the answer is
 * sent and the connection half-closed, then what the client still sends is read and dropped for
 * a moment before the socket is destroyed. Destroyed at once with the client's data in flight,
 * the socket answers it with a reset, which may discard the answer in the client's buffer before
 * the client has read it (seen as a reply-less close under load).
 */
function lingerThenClose(req: Req): void {
	const socket = req.socket;
	// Node destroys the socket of a `Connection: close` answer through destroySoon once it is sent
	socket.destroySoon = function (this: typeof socket) {
		this.end();
		let read = 0;
		const timer = setTimeout(() => this.destroy(), LINGER_MS);
		timer.unref();
		this.on("data", chunk => {
			read += chunk.length;
			if (read > LINGER_BYTES) this.destroy();
		});
		this.once("close", () => clearTimeout(timer));
		this.resume();
	};
}

function sendError(this: ApiThis, req: Req, res: ServerResponse, err: any) {
	const mapped = toHttpError(err);
	const { status } = mapped;
	const plainText =
		mapped.plainText || answersInPlainText(req.method, req.originalUrl || req.url || "");
	// The spec's text/plain 500 of a job update carries its reason; JSON 500s do not leak it.
	const detail = plainText && status >= 500 && err?.message ? String(err.message) : mapped.detail;
	if (status >= 500) this.logger.error({ err, url: req.url }, "request failed");
	if (res.headersSent) return;
	if (req.$requestId) res.setHeader("X-Request-ID", req.$requestId);
	if (status === 401) res.setHeader("WWW-Authenticate", 'Bearer realm="api"');
	if (mapped.retryAfter !== undefined) res.setHeader("Retry-After", String(mapped.retryAfter));
	// Kept open, the connection would have Node read (and discard) the rest of the body to reach
	// the next request, however long the client said it was; it is closed once the answer is
	// flushed, after a short linger (lingerThenClose).
	if (bodyUnread(req)) {
		res.setHeader("Connection", "close");
		lingerThenClose(req);
	}
	if (plainText) {
		res.setHeader("Content-Type", "text/plain; charset=utf-8");
		res.writeHead(status);
		res.end(detail);
	} else {
		res.setHeader("Content-Type", "application/json; charset=utf-8");
		res.writeHead(status);
		res.end(JSON.stringify({ detail }));
	}
}

const UPLOAD_PATH = /\/configuration\/upload\/?(\?|$)/;

/** The largest JSON body a route reads (an upload reads its file itself: lib/http/upload.ts). */
const JSON_LIMIT_BYTES = 1024 * 1024;

/**
 * A body announced larger than a route reads is refused on its headers: the JSON body parser,
 * refusing it, would first read it whole to throw it away.
 */
function refuseOversizedBody(req: Req) {
	if (
		Number(req.headers["content-length"] ?? 0) > JSON_LIMIT_BYTES &&
		!UPLOAD_PATH.test(req.url ?? "")
	)
		throw new PayloadTooLargeError("The request body is too large");
}

function route(path: string) {
	return {
		path,
		// Tokens are checked by httpHandler below, before a route is chosen or a body read.
		authentication: false,
		autoAliases: false,
		mappingPolicy: "restrict",
		mergeParams: true,
		aliases: ALIASES,
		bodyParsers: {
			json: {
				strict: true,
				limit: JSON_LIMIT_BYTES,
				// an uploaded configuration file is read whole by its own handler (up to 5 MB,
				// lib/http/upload.ts), whatever its content type
				type: (req: Req) =>
					/^application\/json\b/i.test(String(req.headers["content-type"] ?? "")) &&
					!UPLOAD_PATH.test(req.originalUrl ?? req.url ?? "")
			}
		},
		callOptions: { timeout: 30000, retries: 0 },

		onBeforeCall(this: ApiThis, ctx: Context<unknown, RequestMeta>, _route: unknown, req: Req) {
			const pathKeys = req.$alias?.keys?.map(k => k.name) || [];
			for (const key of pathKeys) {
				if (!ID_PARAMS.includes(key)) continue;
				const value = String(req.$params[key]);
				if (!/^\d{1,9}$/.test(value) || Number(value) < 1)
					throw new NotFoundError("Not found.");
				req.$params[key] = Number(value);
			}
			if (req.method && BODY_METHODS.includes(req.method)) {
				// a body the JSON parser did not read (another content type) would otherwise
				// count as an empty one: a requeue of every job, say
				const sent =
					Number(req.headers["content-length"] ?? 0) > 0 ||
					req.headers["transfer-encoding"] !== undefined;
				if (req.body === undefined && sent && !UPLOAD_PATH.test(req.originalUrl ?? ""))
					throw new UnsupportedMediaTypeError(
						"Content-Type must be application/json for a request body"
					);
				const body = req.body ?? {};
				if (body === null || typeof body !== "object" || Array.isArray(body))
					throw new BadRequestError("body: must be a JSON object");
				if (Object.prototype.hasOwnProperty.call(body, "__proto__"))
					throw new FieldError("__proto__", "is not allowed");
				checkBodyDepth(body);
				checkStorableText(body, "");
				// A write takes its fields from the body and the path only: moleculer-web merged the
				// query over the body, so `?name=x` could otherwise replace the body's name.
				const pathParams = Object.fromEntries(pathKeys.map(k => [k, req.$params[k]]));
				req.$params = { ...(body as Record<string, unknown>), ...pathParams };
			}
			const baseUrl = this.baseUrlOf(req);
			ctx.meta.baseUrl = baseUrl;
			ctx.meta.apiRoot = `${baseUrl}${path}`;
			ctx.meta.path = (req.originalUrl || req.url || "").split("?")[0];
			ctx.meta.query = req.query || {};
			ctx.meta.jsonTextFor = req.$action?.name;
		},

		onAfterCall(
			ctx: Context<unknown, RequestMeta>,
			_route: unknown,
			_req: Req,
			res: ServerResponse,
			data: unknown
		) {
			// Actions give a path under the API root; the gateway answers with an absolute URL.
			if (ctx.meta.$location && !/^https?:/.test(ctx.meta.$location))
				ctx.meta.$location = `${ctx.meta.apiRoot}${ctx.meta.$location}`;
			// A streamed answer (followed logs) sends its headers at once, once the gateway has
			// set them, not with its first bytes: its client waits for them, maybe long.
			if (data instanceof Readable)
				setImmediate(() => {
					if (!res.headersSent && !res.writableEnded) res.flushHeaders();
				});
			return data;
		},

		onError: sendError
	};
}

const ApiService: ServiceSchema<ApiSettings> = {
	name: "api",
	mixins: [ApiGateway],

	// moleculer-web's own actions would let any peer on NATS reshape or list the public gateway;
	// routes are fixed at start, so they are removed (`rest` is private already).
	actions: {
		addRoute: false,
		removeRoute: false,
		listAliases: false
	},

	settings: {
		port: 8000,
		ip: "127.0.0.1",
		apiTokens: [],
		publicUrl: null,
		trustProxy: false,
		// never in the service info Moleculer sends to every peer
		$secureSettings: ["apiTokens"],
		routes: [route("/api/v3"), route("/api")],
		// One line per request is logged by `logRequests` below instead.
		logRequest: null,
		logResponse: null,
		log4XXResponses: false,
		logRouteRegistration: "debug",
		onError: sendError
	},

	methods: {
		/**
		 * Every request, before moleculer-web routes it: one without a valid token is answered
		 * 401 here, and one announcing too large a body 413, before a byte of its body is read.
		 * moleculer-web runs a route's body parsers before any of its hooks (onBeforeCall,
		 * authenticate): four clients without a token sending 1 MB bodies nested 500,000 deep
		 * once held `/version/` at 1.6 s.
		 */
		httpHandler(this: ApiThis, req: Req, res: ServerResponse, next?: unknown) {
			if (isDocsRequest(req.method, req.url ?? "")) return serveDocs(req, res, OPENAPI_JSON);
			try {
				this.authenticate(req);
				refuseOversizedBody(req);
			} catch (err) {
				return sendError.call(this, req, res, err);
			}
			return gatewayHttpHandler.call(this, req, res, next);
		},

		/**
		 * The scheme, host and port of the absolute URLs an answer holds: PUBLIC_URL, or the
		 * address the gateway listens on; a proxy's headers only when TRUST_PROXY says it is one.
		 */
		baseUrlOf(req: Req): string {
			if (this.settings.publicUrl) return this.settings.publicUrl;
			return this.settings.trustProxy
				? forwardedBaseUrl(req.headers, this.boundUrl)
				: this.boundUrl;
		},

		// A body handed to the socket as a Buffer: a JSON string of 60–300 KB written as it is cost
		// several times more (measured in docs/decisions.md, "Responses as Buffers").
		encodeResponse(_req: Req, _res: ServerResponse, data: unknown) {
			return Buffer.from(JSON.stringify(data));
		},

		authenticate(req: Req) {
			const tokens = this.settings.apiTokens;
			if (tokens.length === 0) return null;
			const header = req.headers.authorization || "";
			const match = /^Bearer\s+(\S+)$/i.exec(header);
			if (!match)
				throw new UnauthorizedError("Authentication credentials were not provided.");
			if (!tokens.includes(match[1])) throw new UnauthorizedError("Invalid token.");
			return { token: "***" };
		},

		/** One structured line per request, whatever route (or none) answered it. */
		logRequests(req: Req, res: ServerResponse) {
			const started = process.hrtime.bigint();
			const id = (req.headers["x-request-id"] as string) || this.broker.generateUid();
			req.headers["x-request-id"] = id;
			req.$requestId = id;
			res.on("finish", () => {
				const ms = Number(process.hrtime.bigint() - started) / 1e6;
				const line = {
					req_id: id,
					method: req.method,
					url: req.originalUrl || req.url,
					status: res.statusCode,
					ms: Math.round(ms * 10) / 10
				};
				if (res.statusCode >= 500) this.logger.error(line, "request");
				else this.logger.info(line, "request");
			});
		}
	},

	started() {
		// moleculer-web's started() (a mixin's, run first) has the server listening by now
		this.boundUrl = listeningUrl(this.server.address() as AddressInfo);
		this.server.prependListener("request", (req: Req, res: ServerResponse) =>
			this.logRequests(req, res)
		);
	}
};

export default ApiService;
