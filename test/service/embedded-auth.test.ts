import { spawnSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";
import { EmbeddedPostgres } from "../../lib/db/embedded";
import { freePort } from "../helpers/ports";

/**
 * The embedded PostgreSQL asks every connection for the superuser's password, kept in a file only
 * the service can read: trusting loopback let any local OS user connect as the superuser and run
 * programs as the server's user (`COPY ... TO PROGRAM`). A cluster an older version initialised
 * trusting every local connection is given a password at its next start.
 */
const asRoot = process.getuid !== undefined && process.getuid() === 0;
// another local OS user exists to try with only when we are root
const asRootIt = asRoot ? it : it.skip;

function nobody(): { uid: number; gid: number } {
	const id = (flag: string) =>
		Number(spawnSync("id", [flag, "nobody"], { encoding: "utf8" }).stdout.trim());
	return { uid: id("-u"), gid: id("-g") };
}

/** `psql -h 127.0.0.1 -U postgres` run by the OS user `nobody`, with PGPASSWORD when given. */
function psqlAsNobody(port: number, password?: string) {
	return spawnSync(
		"psql",
		[
			"-X",
			"-w",
			"-h",
			"127.0.0.1",
			"-p",
			String(port),
			"-U",
			"postgres",
			"-d",
			"postgres"
		].concat(["-A", "-t", "-c", "SELECT current_user"]),
		{
			...nobody(),
			cwd: "/",
			env: { PATH: process.env.PATH, ...(password ? { PGPASSWORD: password } : {}) },
			encoding: "utf8"
		}
	);
}

async function currentUser(config: string | { port: number; password?: string }) {
	const client = new Client(
		typeof config === "string"
			? { connectionString: config }
			: { host: "127.0.0.1", user: "postgres", database: "postgres", ...config }
	);
	await client.connect();
	try {
		return (await client.query("SELECT current_user AS who")).rows[0].who;
	} finally {
		await client.end();
	}
}

const passwordOf = (pg: EmbeddedPostgres) => fs.readFileSync(pg.passwordFile, "utf8").trim();

let root: string;

beforeAll(() => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "embedded-auth-"));
	// postgres (when we are root) must be able to enter it
	fs.chmodSync(root, 0o755);
});

afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe("a new embedded PostgreSQL", () => {
	let pg: EmbeddedPostgres;
	let port: number;

	beforeAll(async () => {
		port = await freePort();
		pg = new EmbeddedPostgres({ dataDir: path.join(root, "new"), port, database: "authed" });
		await pg.start();
	});

	afterAll(() => pg.stop());

	it("keeps its password in a file of mode 0600", () => {
		expect(fs.statSync(pg.passwordFile).mode & 0o777).toBe(0o600);
		expect(passwordOf(pg)).toMatch(/^[\w-]{32}$/);
	});

	asRootIt("keeps the password from the other local users", () => {
		const read = spawnSync("cat", [pg.passwordFile], { ...nobody(), encoding: "utf8" });
		expect(read.status).not.toBe(0);
		expect(read.stderr).toMatch(/Permission denied/);
	});

	asRootIt("refuses another local user without the password", () => {
		const none = psqlAsNobody(port);
		expect(none.status).not.toBe(0);
		expect(none.stderr).toMatch(/no password supplied/);
		const wrong = psqlAsNobody(port, "wrong");
		expect(wrong.status).not.toBe(0);
		expect(wrong.stderr).toMatch(/password authentication failed for user "postgres"/);
		// the password alone was missing
		const given = psqlAsNobody(port, passwordOf(pg));
		expect(given.stderr).toBe("");
		expect(given.stdout.trim()).toBe("postgres");
	});

	it("refuses a wrong password, also on its socket", async () => {
		await expect(currentUser({ port, password: "wrong" })).rejects.toThrow(
			/password authentication failed for user "postgres"/
		);
		const socket = spawnSync(
			"psql",
			["-X", "-w", "-h", pg.dataDir, "-p", String(port), "-U", "postgres", "-c", "SELECT 1"],
			{ env: { PATH: process.env.PATH, PGPASSFILE: "/dev/null" }, encoding: "utf8" }
		);
		expect(socket.status).not.toBe(0);
		expect(socket.stderr).toMatch(/no password supplied/);
	});

	it("lets the service in with its URL", async () => {
		expect(pg.url).toContain(`:${passwordOf(pg)}@`);
		expect(await currentUser(pg.url)).toBe("postgres");
	});
});

describe("a cluster an older version initialised trusting local connections", () => {
	it("is given a password at its next start, once", async () => {
		const dataDir = path.join(root, "old");
		const port = await freePort();
		const made = new EmbeddedPostgres({ dataDir, port, database: "authed" });
		await made.start();
		// as `initdb --auth=trust` left it: a superuser without a password, no password file
		const client = new Client({ connectionString: made.url });
		await client.connect();
		await client.query("ALTER ROLE postgres PASSWORD NULL");
		await client.end();
		await made.stop();
		const hbaFile = path.join(made.dataDir, "pg_hba.conf");
		const hba = fs.readFileSync(hbaFile, "utf8");
		fs.writeFileSync(hbaFile, hba.replace(/^([^#\n]*\s)scram-sha-256/gm, "$1trust"));
		fs.rmSync(made.passwordFile);

		const said: string[] = [];
		const upgraded = new EmbeddedPostgres({
			dataDir,
			port,
			database: "authed",
			log: m => said.push(m)
		});
		try {
			await upgraded.start();
			expect(said).toContain(
				`the PostgreSQL cluster in ${made.dataDir} trusted local connections: it now requires the password in ${made.passwordFile}`
			);
			expect(fs.readFileSync(hbaFile, "utf8")).toBe(hba);
			expect(fs.statSync(upgraded.passwordFile).mode & 0o777).toBe(0o600);
			await expect(currentUser({ port, password: "wrong" })).rejects.toThrow(
				/password authentication failed/
			);
			expect(await currentUser(upgraded.url)).toBe("postgres");
			if (asRoot) expect(psqlAsNobody(port).stderr).toMatch(/no password supplied/);
		} finally {
			await upgraded.stop();
		}

		const again: string[] = [];
		const restarted = new EmbeddedPostgres({
			dataDir,
			port,
			database: "authed",
			log: m => again.push(m)
		});
		try {
			await restarted.start();
			expect(again.filter(m => m.includes("trusted"))).toEqual([]);
			expect(restarted.url).toBe(upgraded.url);
			expect(await currentUser(restarted.url)).toBe("postgres");
		} finally {
			await restarted.stop();
		}
	}, 90000);
});
