"use strict";
/**
 * Scale 3.0's web UI (ngageoint/scale, tag 3.0.0, scale-ui/) for scripts/scale-ui-check.js:
 * extracted into a temporary folder, built as its gulpfile builds it, and served with `/api/`
 * passed through to the service.
 */
const fs = require("fs");
const http = require("http");
const os = require("os");
const path = require("path");
const { execFileSync, spawnSync } = require("child_process");

const TAG = "3.0.0";
const TOOLS = path.join(os.tmpdir(), "scale-ui-check-tools");

/** Scale's scale-ui folder at the tag, extracted into a temporary folder. */
function extractUi() {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-ui-"));
	if (process.env.SCALE_GIT) {
		const tar = path.join(dir, "scale-ui.tar");
		// git archive may complain of blobs outside scale-ui that a partial mirror lacks
		spawnSync(
			"git",
			[
				`--git-dir=${resolveGitDir(process.env.SCALE_GIT)}`,
				"archive",
				"-o",
				tar,
				TAG,
				"scale-ui"
			],
			{ stdio: ["ignore", "ignore", "ignore"] }
		);
		execFileSync("tar", ["-xf", tar, "-C", dir]);
	} else {
		const clone = path.join(dir, "scale");
		const git = args => execFileSync("git", args, { stdio: "inherit" });
		git([
			"clone",
			"--depth=1",
			`--branch=${TAG}`,
			"--filter=blob:none",
			"--sparse",
			process.env.SCALE_REPO_URL || "https://github.com/ngageoint/scale.git",
			clone
		]);
		git(["-C", clone, "sparse-checkout", "set", "scale-ui"]);
		fs.renameSync(path.join(clone, "scale-ui"), path.join(dir, "scale-ui"));
	}
	const root = path.join(dir, "scale-ui");
	if (!fs.existsSync(path.join(root, "app", "index.html"))) {
		throw new Error(`no scale-ui/app/index.html at ${TAG} in ${dir}`);
	}
	return root;
}

function resolveGitDir(dir) {
	return fs.existsSync(path.join(dir, ".git")) ? path.join(dir, ".git") : dir;
}

/** playwright-core and less, for this check only. */
function tools() {
	const has = name => fs.existsSync(path.join(TOOLS, "node_modules", name, "package.json"));
	if (!has("playwright-core") || !has("less")) {
		fs.mkdirSync(TOOLS, { recursive: true });
		execFileSync(
			"npm",
			[
				"install",
				"--prefix",
				TOOLS,
				"--no-save",
				"--no-audit",
				"--no-fund",
				"playwright-core@1",
				"less@4"
			],
			{ stdio: "inherit" }
		);
	}
	return {
		chromium: require(path.join(TOOLS, "node_modules", "playwright-core")).chromium,
		less: require(path.join(TOOLS, "node_modules", "less"))
	};
}

function filesUnder(dir, keep) {
	const found = [];
	for (const entry of fs
		.readdirSync(dir, { withFileTypes: true })
		.sort((a, b) => (a.name < b.name ? -1 : 1))) {
		const file = path.join(dir, entry.name);
		if (entry.isDirectory()) found.push(...filesUnder(file, keep));
		else if (keep(file)) found.push(file);
	}
	return found;
}

/**
 * What the UI's gulpfile builds, made here without gulp: vendor.js as main-bower-files orders
 * the bower packages' main files (dependencies first), app.js from the modules (the module
 * that declares `scaleApp` first), the stylesheets (bootstrap's own compiled css, the other
 * packages' css, the app's less compiled).
 */
async function build(root, less) {
	const app = path.join(root, "app");
	const bower = path.join(app, "bower_components");
	const rootBower = JSON.parse(fs.readFileSync(path.join(root, "bower.json"), "utf8"));
	const seen = new Set();
	const js = [];
	const css = [
		path.join(bower, "bootstrap", "dist", "css", "bootstrap.css"),
		path.join(bower, "font-awesome", "css", "font-awesome.css")
	];
	const visit = name => {
		if (seen.has(name) || !fs.existsSync(path.join(bower, name))) return;
		seen.add(name);
		const meta = [".bower.json", "bower.json"]
			.map(f => path.join(bower, name, f))
			.find(f => fs.existsSync(f));
		const own = JSON.parse(fs.readFileSync(meta, "utf8"));
		for (const dep of Object.keys(own.dependencies || {})) visit(dep);
		const override = (rootBower.overrides || {})[name];
		const mains = [].concat((override && override.main) || own.main || []);
		for (const main of mains) {
			const file = path.join(bower, name, main);
			if (file.endsWith(".js") && fs.existsSync(file)) js.push(file);
			if (file.endsWith(".css") && fs.existsSync(file)) css.push(file);
		}
	};
	Object.keys(rootBower.dependencies).forEach(visit);
	const appJs = filesUnder(
		path.join(app, "modules"),
		f => f.endsWith(".js") && !f.endsWith(".spec.js")
	);
	appJs.sort((a, b) => rank(a) - rank(b));
	appJs.push(...filesUnder(path.join(app, "scripts"), f => f.endsWith(".js")));
	const styles = path.join(app, "styles");
	const appCss = await less.render(fs.readFileSync(path.join(styles, "main.less"), "utf8"), {
		paths: [styles],
		filename: path.join(styles, "main.less")
	});
	const concat = files => files.map(f => fs.readFileSync(f, "utf8")).join("\n;\n");
	return {
		"/scripts/vendor.js": concat(js),
		"/scripts/app.js": concat(appJs),
		"/stylesheets/vendor.css": css.map(f => fs.readFileSync(f, "utf8")).join("\n"),
		"/stylesheets/app.css": appCss.css,
		// the UI's optional local settings, which a deployment may add: none
		"/config/scaleConfig.local.json": JSON.stringify({ scaleConfigLocal: {} }),
		// gulp's ngAnnotate adds the injection names that ng-strict-di asks for; unminified, the
		// parameter names do the same
		"/index.html": fs
			.readFileSync(path.join(app, "index.html"), "utf8")
			.replace(" ng-strict-di", "")
	};
	function rank(file) {
		const base = path.basename(file);
		return base === "scaleConfig.js" ? 0 : base === "app.js" ? 1 : 2;
	}
}

const TYPES = {
	".js": "application/javascript",
	".css": "text/css",
	".html": "text/html",
	".json": "application/json",
	".png": "image/png",
	".ico": "image/x-icon",
	".svg": "image/svg+xml",
	".woff": "font/woff",
	".woff2": "font/woff2",
	".ttf": "font/ttf",
	".eot": "application/vnd.ms-fontobject"
};

/** The built UI, its static files, and /api/ passed through to the service. */
function serve(root, built, port, apiUrl) {
	const app = path.join(root, "app");
	const bower = path.join(app, "bower_components");
	const api = new URL(apiUrl);
	const roots = {
		"/config/": [path.join(root, "config")],
		"/fonts/": [
			path.join(app, "fonts"),
			path.join(bower, "font-awesome", "fonts"),
			path.join(bower, "bootstrap", "dist", "fonts")
		],
		"/stylesheets/": [path.join(bower, "angular-ui-grid")],
		"/": [app]
	};
	const server = http.createServer((req, res) => {
		const url = new URL(req.url, "http://ui");
		if (url.pathname.startsWith("/api/")) {
			const upstream = http.request(
				{
					host: api.hostname,
					port: api.port || 80,
					method: req.method,
					path: req.url,
					headers: { ...req.headers, host: api.host }
				},
				answer => {
					res.writeHead(answer.statusCode, answer.headers);
					answer.pipe(res);
				}
			);
			upstream.on("error", err => {
				res.writeHead(502);
				res.end(String(err));
			});
			req.pipe(upstream);
			return;
		}
		const name = url.pathname === "/" ? "/index.html" : decodeURIComponent(url.pathname);
		if (built[name] !== undefined) {
			res.writeHead(200, { "content-type": TYPES[path.extname(name)] || "text/plain" });
			res.end(built[name]);
			return;
		}
		for (const [prefix, dirs] of Object.entries(roots)) {
			if (!name.startsWith(prefix)) continue;
			for (const dir of dirs) {
				const file = path.resolve(dir, `.${name.slice(prefix.length - 1)}`);
				if (
					file.startsWith(dir + path.sep) &&
					fs.existsSync(file) &&
					fs.statSync(file).isFile()
				) {
					res.writeHead(200, {
						"content-type": TYPES[path.extname(file)] || "application/octet-stream"
					});
					fs.createReadStream(file).pipe(res);
					return;
				}
			}
		}
		res.writeHead(404);
		res.end();
	});
	return new Promise(resolve => server.listen(port, "127.0.0.1", () => resolve(server)));
}

module.exports = { TAG, extractUi, tools, build, serve };
