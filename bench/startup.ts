/**
 * Time from `npm start` to the first 200 on /api/status/: a first start on an empty DATA_DIR
 * (initdb and migrations included) and a second start reusing it.
 *
 *   npm run bench:startup
 */
import fs from "fs";
import os from "os";
import path from "path";
import { spawn } from "child_process";
import { PROJECT_ROOT } from "../lib/paths";
import { freePort } from "../test/helpers/ports";

async function timeStart(dataDir: string, port: number, pgPort: number): Promise<number> {
	const started = process.hrtime.bigint();
	const child = spawn("npm", ["start", "--silent"], {
		cwd: PROJECT_ROOT,
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
			if (child.exitCode !== null) throw new Error("npm start exited before answering");
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

async function main() {
	const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-startup-"));
	fs.chmodSync(dataDir, 0o755);
	try {
		const port = await freePort();
		const pgPort = await freePort();
		const first = await timeStart(dataDir, port, pgPort);
		const second = await timeStart(dataDir, port, pgPort);
		console.log(
			`npm start → first 200 on /api/status/, empty DATA_DIR (initdb + migrations): ${(first / 1000).toFixed(2)} s`
		);
		console.log(
			`npm start → first 200 on /api/status/, reusing DATA_DIR:                    ${(second / 1000).toFixed(2)} s`
		);
	} finally {
		fs.rmSync(dataDir, { recursive: true, force: true });
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
