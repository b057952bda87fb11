import fs from "fs";
import type { IncomingMessage, ServerResponse } from "http";
import path from "path";

/**
 * The API's documentation: its OpenAPI document at `/api/openapi.json` and a page rendering it at
 * `/api/docs/`, from swagger-ui-dist's files served here (no request leaves the machine).
 * Neither needs a token: they describe the API and hold no data, and a browser sends none with
 * the page's scripts.
 */

const UI_DIR = path.dirname(require.resolve("swagger-ui-dist/package.json"));

/** The page's own files, by name, with their types: nothing else of the folder is served. */
const ASSETS: Record<string, string> = {
	"swagger-ui.css": "text/css; charset=utf-8",
	"swagger-ui-bundle.js": "text/javascript; charset=utf-8",
	"swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
	"favicon-32x32.png": "image/png"
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Scale API</title>
<link rel="stylesheet" href="swagger-ui.css">
<link rel="icon" type="image/png" href="favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="swagger-ui-bundle.js"></script>
<script src="swagger-ui-standalone-preset.js"></script>
<script src="docs.js"></script>
</body>
</html>
`;

// a script of its own: the page's Content-Security-Policy allows scripts of this origin only
const INIT = `window.ui = SwaggerUIBundle({
	url: "../openapi.json",
	dom_id: "#swagger-ui",
	presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
	layout: "StandaloneLayout"
});
`;

const DOCS = /^\/api(?:\/v3)?\/(openapi\.json|docs)(?:\/([\w.-]*))?$/;

/** Whether the request is for the documentation (a GET of its paths). */
export function isDocsRequest(method: string | undefined, url: string): boolean {
	return (method === "GET" || method === "HEAD") && DOCS.test(url.split("?")[0]);
}

/** Answers a documentation request (isDocsRequest); `document` is the OpenAPI JSON. */
export function serveDocs(req: IncomingMessage, res: ServerResponse, document: Buffer): void {
	const [, what, file] = DOCS.exec((req.url ?? "").split("?")[0]) ?? [];
	const send = (status: number, type: string, body: Buffer | string) => {
		res.writeHead(status, {
			"Content-Type": type,
			"Content-Length": Buffer.byteLength(body),
			"Content-Security-Policy":
				"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'"
		});
		res.end(req.method === "HEAD" ? undefined : body);
	};
	if (what === "openapi.json") {
		if (file !== undefined) return send(404, "application/json", '{"detail":"Not found."}');
		return send(200, "application/json; charset=utf-8", document);
	}
	if (file === undefined) {
		res.writeHead(301, { Location: `${(req.url ?? "").split("?")[0]}/` });
		return void res.end();
	}
	if (file === "" || file === "index.html") return send(200, "text/html; charset=utf-8", PAGE);
	if (file === "docs.js") return send(200, "text/javascript; charset=utf-8", INIT);
	const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
	if (type === undefined) return send(404, "text/plain; charset=utf-8", "Not found.");
	send(200, type, fs.readFileSync(path.join(UI_DIR, file)));
}
