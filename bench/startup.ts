/**
 * Time from `npm start` to the first 200 on /api/status/, in a copy of this working tree (the
 * files git lists, tracked or not ignored; node_modules linked) with a DATA_DIR of its own:
 *
 * - a fresh clone's first start: dist/ absent and DATA_DIR empty (build, initdb, migrations);
 * - restarts on that DATA_DIR with the tree unchanged, with one source changed (a line added to
 *   lib/paths.ts, which most modules import) and with dist/ absent (a fresh clone's build), each
 *   with `npm start` (scripts/build-changed.js: swc on the changed files only) and, in the same
 *   run, with the start script as it was before (`tsc -p tsconfig.json` before node).
 *
 *   npm run bench:startup       BENCH_STARTUP_RUNS (3): runs of each restart; the median is printed
 */
import { execFileSync, spawn } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { PROJECT_ROOT } from "../lib/paths";
import { freePort } from "../test/helpers/ports";

const RUNS = Number(process.env.BENCH_STARTUP_RUNS || 3);
const OLD_SCRIPT = "start:tsc-always";
const CHANGED = "lib/paths.ts";

/** A copy of the working tree at `dir`, with the old start script added to its package.json. */
function copyTree(dir: string) {
	const files = execFileSync(
		"git",
		["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
		{ cwd: PROJECT_ROOT }
	)
		.toString()
		.split("\0")
		.filter(Boolean);
	for (const rel of files) {
		const from = path.join(PROJECT_ROOT, rel);
		// not a file: deleted and not yet committed, or a node_modules link (a git worktree's)
		if (!fs.lstatSync(from, { throwIfNoEntry: false })?.isFile()) continue;
		fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
		fs.copyFileSync(from, path.join(dir, rel));
	}
	fs.symlinkSync(path.join(PROJECT_ROOT, "node_modules"), path.join(dir, "node_modules"));
	const pkgFile = path.join(dir, "package.json");
	const pkg = JSON.parse(fs.readFileSync(pkgFile, "utf8"));
	const start: string = pkg.scripts.start;
	pkg.scripts[OLD_SCRIPT] =
		`tsc -p tsconfig.json && ${start.slice(start.indexOf("&&") + 2).trim()}`;
	fs.writeFileSync(pkgFile, JSON.stringify(pkg, null, 2));
}

async function timeStart(
	cwd: string,
	script: string,
	dataDir: string,
	port: number,
	pgPort: number
): Promise<number> {
	const started = process.hrtime.bigint();
	const child = spawn("npm", ["run", script, "--silent"], {
		cwd,
		env: {
			...process.env,
			DATA_DIR: dataDir,
			PORT: String(port),
			EMBEDDED_PG_PORT: String(pgPort),
			LOG_LEVEL: "warn"
		},
		stdio: "ignore",
		detached: true
	});
	try {
		for (;;) {
			try {
				if ((await fetch(`http://127.0.0.1:${port}/api/status/`)).status === 200) break;
			} catch {
				/* not listening yet */
			}
			if (child.exitCode !== null)
				throw new Error(`npm run ${script} exited before answering`);
			await new Promise(r => setTimeout(r, 20));
		}
		return Number(process.hrtime.bigint() - started) / 1e6;
	} finally {
		await new Promise(resolve => {
			child.once("exit", resolve);
			process.kill(-child.pid!, "SIGINT");
		});
	}
}

const seconds = (ms: number) => (ms / 1000).toFixed(2);

function median(values: number[]): number {
	const sorted = [...values].sort((a, b) => a - b);
	const mid = sorted.length >> 1;
	return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function main() {
	const tree = fs.mkdtempSync(path.join(os.tmpdir(), "scale-startup-tree-"));
	const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-startup-"));
	fs.chmodSync(tree, 0o755);
	fs.chmodSync(dataDir, 0o755);
	try {
		copyTree(tree);
		const port = await freePort();
		const pgPort = await freePort();
		const start = (script: string) => timeStart(tree, script, dataDir, port, pgPort);
		let edits = 0;
		const change = () =>
			fs.appendFileSync(path.join(tree, CHANGED), `// bench:startup edit ${++edits}\n`);
		const clean = () => fs.rmSync(path.join(tree, "dist"), { recursive: true, force: true });

		const first = await start("start");
		console.log(
			`npm start → first 200 on /api/status/, a fresh clone (dist/ absent, empty DATA_DIR: build + initdb + migrations): ${seconds(first)} s`
		);

		const cases = ["unchanged tree", `one source changed (${CHANGED})`, "dist/ absent"];
		const times: Record<string, number[][]> = {
			start: [[], [], []],
			[OLD_SCRIPT]: [[], [], []]
		};
		for (let run = 0; run < RUNS; run++) {
			for (const script of [OLD_SCRIPT, "start"]) {
				clean();
				times[script][2].push(await start(script));
				times[script][0].push(await start(script));
				change();
				times[script][1].push(await start(script));
			}
		}
		console.log(
			`restarts reusing DATA_DIR, median of ${RUNS} (each run in s): npm start (swc, changed files only) | before (tsc -p tsconfig.json before every start)`
		);
		cases.forEach((name, i) => {
			const now = times.start[i];
			const old = times[OLD_SCRIPT][i];
			console.log(
				`  ${name.padEnd(40)} ${seconds(median(now)).padStart(6)} s (${now.map(seconds).join(" ")})  |  ${seconds(median(old)).padStart(6)} s (${old.map(seconds).join(" ")})`
			);
		});
	} finally {
		fs.rmSync(dataDir, { recursive: true, force: true });
		fs.rmSync(tree, { recursive: true, force: true });
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
