import { spawn, type ChildProcess } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { EmbeddedPostgres, passwordFileOf } from "../../lib/db/embedded";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort } from "../helpers/ports";

/**
 * The embedded PostgreSQL of a data directory: one left running by a killed service is stopped
 * and replaced; one whose service still runs (a second `npm start` on the same DATA_DIR) is left
 * alone, and the second start fails saying why.
 */
describe("an embedded PostgreSQL found running on the data directory", () => {
	let root: string;
	let owner: ChildProcess | null = null;
	let mine: EmbeddedPostgres | null = null;

	beforeAll(() => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "embedded-owner-"));
		fs.chmodSync(root, 0o755);
	});

	afterAll(async () => {
		owner?.kill("SIGKILL");
		await mine?.stop();
		fs.rmSync(root, { recursive: true, force: true });
	});

	const answers = async (dataDir: string, port: number) => {
		const password = fs.readFileSync(passwordFileOf(dataDir), "utf8").trim();
		const client = new Client({
			host: "127.0.0.1",
			port,
			user: "postgres",
			password,
			database: "owned"
		});
		await client.connect();
		const { rows } = await client.query("SELECT 1 AS one");
		await client.end();
		return rows[0].one;
	};

	it("is left to the service that runs it, then replaced once that service was killed", async () => {
		const dataDir = path.join(root, "data");
		const port = await freePort();
		// a service's process: starts the embedded server and keeps running
		const script = `
			const { EmbeddedPostgres } = require(${JSON.stringify(path.join(PROJECT_ROOT, "dist", "lib", "db", "embedded.js"))});
			new EmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, port: ${port}, database: "owned" })
				.start().then(() => console.log("ready"), e => { console.error(e); process.exit(1); });
			setInterval(() => {}, 1000);`;
		owner = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
		await new Promise<void>((resolve, reject) => {
			owner!.stdout!.on("data", (b: Buffer) => b.toString().includes("ready") && resolve());
			owner!.once("exit", code => reject(new Error(`the owner exited (${code})`)));
		});
		expect(await answers(dataDir, port)).toBe(1);

		mine = new EmbeddedPostgres({ dataDir, port, database: "owned" });
		await expect(mine.start()).rejects.toThrow(
			new RegExp(`belongs to a service that is running \\(process ${owner.pid}\\)`)
		);
		expect(await answers(dataDir, port)).toBe(1);

		// killed, its server is an orphan: stopped, and a new one started in its place
		const killed = new Promise(resolve => owner!.once("exit", resolve));
		owner.kill("SIGKILL");
		await killed;
		owner = null;
		const said: string[] = [];
		mine = new EmbeddedPostgres({ dataDir, port, database: "owned", log: m => said.push(m) });
		await mine.start();
		expect(
			said.some(m => /stopping a PostgreSQL server \(pid \d+\) left running/.test(m))
		).toBe(true);
		expect(await answers(dataDir, port)).toBe(1);
	}, 90000);
});
