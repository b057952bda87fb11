/**
 * Requests/s and latency of `GET /api/errors/?page_size=100` with 10,000 errors in the table, at
 * concurrency 32, beside the same gateway's `GET /api/version/` (no database) in the same run.
 *
 *   npm run bench:errors            (embedded PostgreSQL in a temp folder)
 *   DATABASE_URL=postgres://... npm run bench:errors
 *   BENCH_SECONDS=20 npm run bench:errors
 */
import fs from "fs";
import os from "os";
import path from "path";
import { spawn } from "child_process";
import autocannon from "autocannon";
import { EmbeddedPostgres } from "../lib/db/embedded";
import { createSequelize } from "../lib/db/connection";
import { migrate } from "../lib/db/migrate";
import { PROJECT_ROOT } from "../lib/paths";
import { freePort } from "../test/helpers/ports";

const SECONDS = Number(process.env.BENCH_SECONDS) || 10;
const CONNECTIONS = 32;
const ROWS = 10000;

interface Figures {
	rps: number;
	p50: number;
	p99: number;
	errors: number;
	non2xx: number;
}

function run(url: string): Promise<Figures> {
	return new Promise((resolve, reject) => {
		autocannon({ url, connections: CONNECTIONS, duration: SECONDS }, (err, r) => {
			if (err) return reject(err);
			resolve({
				rps: r.requests.average,
				p50: r.latency.p50,
				p99: r.latency.p99,
				errors: r.errors,
				non2xx: r.non2xx
			});
		});
	});
}

async function waitFor(url: string, timeoutMs: number) {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		try {
			if ((await fetch(url)).status === 200) return;
		} catch {
			/* not up yet */
		}
		await new Promise(r => setTimeout(r, 100));
	}
	throw new Error(`${url} did not answer 200`);
}

async function main() {
	let pg: EmbeddedPostgres | null = null;
	let tmp: string | null = null;
	let url = process.env.DATABASE_URL || "";
	if (!url) {
		tmp = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-"));
		fs.chmodSync(tmp, 0o755);
		pg = new EmbeddedPostgres({
			dataDir: path.join(tmp, "pg"),
			port: await freePort(),
			database: "bench"
		});
		await pg.start();
		url = pg.url;
	}
	const db = createSequelize(url, { poolMax: 2 });
	await migrate(db);
	await db.query("DELETE FROM error WHERE NOT is_builtin");
	await db.query(
		`INSERT INTO error (name, title, description, category)
		 SELECT 'bench-' || n, 'Bench ' || n, 'An error made by the benchmark', 'DATA'
		   FROM generate_series(1, $1::int) n`,
		{ bind: [ROWS] }
	);
	await db.query("ANALYZE error");
	const [[{ n }]] = (await db.query("SELECT count(*) AS n FROM error")) as any;
	await db.close();

	const port = await freePort();
	const server = spawn(process.execPath, [path.join(PROJECT_ROOT, "dist", "bin", "start.js")], {
		env: { ...process.env, DATABASE_URL: url, PORT: String(port), LOG_LEVEL: "warn" },
		stdio: ["ignore", "ignore", "inherit"]
	});
	const api = `http://127.0.0.1:${port}/api`;
	try {
		await waitFor(`${api}/version/`, 30000);
		await run(`${api}/errors/?page_size=100`); // warm-up, discarded
		const list = await run(`${api}/errors/?page_size=100`);
		const bare = await run(`${api}/version/`);
		const fmt = (f: Figures) =>
			`${f.rps.toFixed(0).padStart(7)} req/s   p50 ${String(f.p50).padStart(4)} ms   p99 ${String(f.p99).padStart(4)} ms   errors ${f.errors} non-2xx ${f.non2xx}`;
		console.log(
			`errors in table: ${n}; concurrency ${CONNECTIONS}; ${SECONDS} s per run; ${os.cpus().length} cpus`
		);
		console.log(`GET /api/errors/?page_size=100  ${fmt(list)}`);
		console.log(`GET /api/version/ (no database) ${fmt(bare)}`);
		console.log(`ratio errors-list / no-database: ${(list.rps / bare.rps).toFixed(3)}`);
	} finally {
		await new Promise(resolve => {
			server.once("exit", resolve);
			server.kill("SIGTERM");
		});
		if (pg) await pg.stop();
		if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
