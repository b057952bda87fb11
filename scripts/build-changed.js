"use strict";
/**
 * Brings `dist/` up to date with the TypeScript sources, in milliseconds: what `npm start`,
 * `npm run agent`, `npm run cluster` and `npm run repl` run before node, and `npm run build`
 * after its type check.
 *
 * The sources are tsconfig.json's `include` (forms `dir/**\/*.ts` and `file.ts`). A source whose
 * size and mtime are those recorded when it was last transpiled (`dist/.build-changed.json`),
 * and whose output is there, is skipped; any other (changed, added, output missing) is
 * transpiled alone with swc, as @swc/jest does for the tests; the `.js` and `.js.map` in `dist/`
 * of a source that is gone are removed (services and migrations are found by file name). A
 * change of this script, of swc's version or of the options taken from tsconfig.json transpiles
 * everything again. Nothing here checks types: `npm run build` does (`tsc --noEmit`, with
 * `isolatedModules`, so that what it accepts transpiles file by file), and `npm test` runs it
 * first.
 *
 *   node scripts/build-changed.js
 */
const crypto = require("crypto");
const fs = require("fs");
const path = require("path");

const MANIFEST = ".build-changed.json";

/** tsconfig.json's `compilerOptions` and `include` (JSON; with comments, read by TypeScript). */
function readTsconfig(root) {
	const file = path.join(root, "tsconfig.json");
	const text = fs.readFileSync(file, "utf8");
	let config;
	try {
		config = JSON.parse(text);
	} catch {
		const read = require("typescript").parseConfigFileTextToJson(file, text);
		if (read.error) throw new Error(`${file}: ${JSON.stringify(read.error.messageText)}`);
		config = read.config;
	}
	if (config.extends || config.files || config.references)
		throw new Error(`${file}: extends, files and references are not read by ${__filename}`);
	return config;
}

/**
 * The sources tsc compiles, as paths relative to `root` with `/`: each `include` pattern's
 * `.ts` files but `.d.ts`, skipping what tsc's wildcards skip (names starting with a dot,
 * node_modules) and `exclude`'s folders.
 */
function sourceFiles(root, config) {
	const exclude = new Set((config.exclude || []).map(e => path.posix.normalize(e)));
	const files = new Set();
	const walk = rel => {
		let entries;
		try {
			entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
		} catch (err) {
			if (err.code === "ENOENT") return;
			throw err;
		}
		for (const entry of entries) {
			if (entry.name.startsWith(".")) continue;
			const child = `${rel}/${entry.name}`;
			if (entry.isDirectory()) {
				if (entry.name !== "node_modules" && !exclude.has(child)) walk(child);
			} else if (child.endsWith(".ts") && !child.endsWith(".d.ts")) files.add(child);
		}
	};
	for (const pattern of config.include || []) {
		const dir = /^([\w-][\w.-]*(?:\/[\w-][\w.-]*)*)\/\*\*\/\*\.ts$/.exec(pattern);
		if (dir) {
			if (!exclude.has(dir[1])) walk(dir[1]);
		} else if (/^[\w-][\w.-]*(\/[\w-][\w.-]*)*\.ts$/.test(pattern)) {
			if (!pattern.endsWith(".d.ts") && fs.existsSync(path.join(root, pattern)))
				files.add(pattern);
		} else
			throw new Error(
				`tsconfig.json: include pattern ${JSON.stringify(pattern)} is neither dir/**/*.ts nor file.ts (${__filename})`
			);
	}
	return files;
}

/** The swc options that give tsc's output for these compilerOptions (CommonJS, like node16 here). */
function swcOptions(compilerOptions) {
	const target = String(compilerOptions.target || "es2022").toLowerCase();
	const year = Number(/^es(\d{4})$/.exec(target)?.[1] ?? (target === "esnext" ? 9999 : 0));
	if (year < 2015) throw new Error(`tsconfig.json: target ${target} is not ES2015 or later`);
	return {
		swcrc: false,
		configFile: false,
		jsc: {
			parser: { syntax: "typescript" },
			target,
			// tsc's default from ES2022 on: class fields are defined, not assigned
			transform: {
				useDefineForClassFields: compilerOptions.useDefineForClassFields ?? year >= 2022
			}
		},
		module: { type: "commonjs" },
		sourceMaps: Boolean(compilerOptions.sourceMap),
		inlineSourcesContent: false
	};
}

function writeAtomically(file, text) {
	const temp = `${file}.${process.pid}.tmp`;
	fs.writeFileSync(temp, text);
	fs.renameSync(temp, file);
}

function readManifest(outDir, fingerprint) {
	try {
		const manifest = JSON.parse(fs.readFileSync(path.join(outDir, MANIFEST), "utf8"));
		if (manifest.fingerprint === fingerprint && manifest.files) return manifest.files;
	} catch {
		/* none yet, or unreadable: everything is built */
	}
	return {};
}

/** Removes the `.js` and `.js.map` files under `outDir` whose source is not in `sources`. */
function prune(outDir, sources) {
	const removed = [];
	const walk = rel => {
		let entries;
		try {
			entries = fs.readdirSync(path.join(outDir, rel), { withFileTypes: true });
		} catch (err) {
			if (err.code === "ENOENT") return;
			throw err;
		}
		for (const entry of entries) {
			const child = rel ? `${rel}/${entry.name}` : entry.name;
			if (entry.isDirectory()) walk(child);
			else {
				const source = /^(.*)\.js(\.map)?$/.exec(child);
				if (source && !sources.has(`${source[1]}.ts`)) {
					fs.rmSync(path.join(outDir, child), { force: true });
					removed.push(child);
				}
			}
		}
	};
	walk("");
	return removed;
}

/**
 * Brings `<root>/<outDir>` up to date with the sources of `<root>/tsconfig.json`. Resolves to
 * what it did; rejects, naming each file, when a source does not transpile (those that did are
 * recorded).
 */
async function buildChanged(root) {
	const config = readTsconfig(root);
	const compilerOptions = config.compilerOptions || {};
	const outDir = path.resolve(root, compilerOptions.outDir || ".");
	if (
		outDir === path.resolve(root) ||
		path.resolve(root, compilerOptions.rootDir || ".") !== path.resolve(root)
	)
		throw new Error("tsconfig.json: outDir must be set and rootDir be the project's folder");
	const sources = sourceFiles(root, config);
	const removed = prune(outDir, sources);

	const swc = require("@swc/core");
	const options = swcOptions(compilerOptions);
	const fingerprint = crypto
		.createHash("sha256")
		.update(fs.readFileSync(__filename))
		.update(require("@swc/core/package.json").version)
		.update(JSON.stringify(options))
		.digest("hex");
	const known = readManifest(outDir, fingerprint);
	const files = {};
	const changed = [];
	for (const rel of sources) {
		// stat before reading: a write in between leaves a newer mtime, seen next time
		const stat = fs.statSync(path.join(root, rel));
		const seen = [stat.mtimeMs, stat.size];
		const was = known[rel];
		const out = path.join(outDir, rel.replace(/\.ts$/, ".js"));
		if (was && was[0] === seen[0] && was[1] === seen[1] && fs.existsSync(out)) files[rel] = was;
		else changed.push({ rel, seen, out });
	}

	// swc's async transforms run on libuv's threads, side by side
	const failures = [];
	await Promise.all(
		changed.map(async ({ rel, seen, out }) => {
			const source = path.join(root, rel);
			try {
				const code = await fs.promises.readFile(source, "utf8");
				const result = await swc.transform(code, {
					...options,
					filename: source,
					sourceFileName: path
						.relative(path.dirname(out), source)
						.split(path.sep)
						.join("/")
				});
				await fs.promises.mkdir(path.dirname(out), { recursive: true });
				if (options.sourceMaps) {
					writeAtomically(`${out}.map`, result.map);
					result.code += `\n//# sourceMappingURL=${path.basename(out)}.map\n`;
				}
				writeAtomically(out, result.code);
				files[rel] = seen;
			} catch (err) {
				failures.push(`${rel}: ${err && err.message ? err.message : err}`);
			}
		})
	);
	if (changed.length || Object.keys(known).length !== Object.keys(files).length) {
		fs.mkdirSync(outDir, { recursive: true });
		writeAtomically(path.join(outDir, MANIFEST), JSON.stringify({ fingerprint, files }));
	}
	if (failures.length) throw new Error(`could not transpile:\n${failures.join("\n")}`);
	return {
		transpiled: changed.map(c => c.rel),
		removed,
		unchanged: sources.size - changed.length
	};
}

module.exports = { buildChanged, sourceFiles, readTsconfig, MANIFEST };

if (require.main === module) {
	const started = process.hrtime.bigint();
	buildChanged(path.resolve(__dirname, "..")).then(
		({ transpiled, removed }) => {
			if (!transpiled.length && !removed.length) return;
			const ms = Number(process.hrtime.bigint() - started) / 1e6;
			const did = [];
			if (transpiled.length) did.push(`transpiled ${transpiled.length} changed source(s)`);
			if (removed.length) did.push(`removed ${removed.length} output(s) of deleted sources`);
			console.log(`dist/: ${did.join(", ")} in ${ms.toFixed(0)} ms`);
		},
		err => {
			console.error(`dist/ could not be brought up to date: ${err.message}`);
			process.exit(1);
		}
	);
}
