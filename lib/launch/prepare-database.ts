import path from "path";
import { Client } from "pg";
import type { Config } from "./config";
import { createSequelize } from "../db/connection";
import { EmbeddedPostgres } from "../db/embedded";
import { migrate } from "../db/migrate";
import { isConnectionError } from "../db/unavailable";

/** How a start waits for a PostgreSQL that cannot be reached yet. */
export interface WaitOptions {
	/** how often it tries */
	retryMs?: number;
	/** how often it says it still waits */
	sayEveryMs?: number;
	/** how long one attempt may take to connect */
	connectTimeoutMs?: number;
}

/** The database of the configured services: DATABASE_URL or an embedded server, migrated. */
export async function prepareDatabase(
	config: Config,
	log: (message: string) => void,
	onEmbedded: (pg: EmbeddedPostgres) => void
): Promise<string> {
	let url = config.databaseUrl;
	if (!url) {
		const pg = new EmbeddedPostgres({
			dataDir: path.join(config.dataDir, "postgres"),
			port: config.embeddedPgPort,
			database: "scale",
			log
		});
		onEmbedded(pg);
		await pg.start();
		url = pg.url;
		await migrateOnce(url, log);
		return url;
	}
	// DATABASE_URL's server may not answer yet, or go away again before the migrations are done
	for (;;) {
		await waitForDatabase(url, log);
		try {
			await migrateOnce(url, log);
			return url;
		} catch (error) {
			if (!isConnectionError(error)) throw error;
		}
	}
}

async function migrateOnce(url: string, log: (message: string) => void): Promise<void> {
	// Two connections: one holds the migration lock while the other migrates.
	const sequelize = createSequelize(url, { poolMax: 2 });
	try {
		await migrate(sequelize, log);
	} finally {
		await sequelize.close();
	}
}

/** Where `url` points, as may be printed: host and port, never the user or password. */
export function databaseAddress(url: string): string {
	try {
		const u = new URL(url);
		return `${u.hostname || "localhost"}:${u.port || "5432"}`;
	} catch {
		return "the address of DATABASE_URL";
	}
}

/** The reason an attempt gives, without what the URL holds. */
function reasonOf(error: unknown): string {
	const e = error as { code?: unknown; message?: unknown };
	const message = typeof e?.message === "string" && e.message ? e.message : String(error);
	return typeof e?.code === "string" && !message.includes(e.code)
		? `${message} (${e.code})`
		: message;
}

/**
 * Resolves once PostgreSQL at `url` answers a statement. While it cannot be reached (refused,
 * reset, timed out, shutting down or starting up: lib/db/unavailable.ts), it tries again every
 * `retryMs` and says so, "waiting for PostgreSQL at host:port: <reason>", at the first failure
 * and every `sayEveryMs` after: a control plane started before its database (a machine's boot,
 * an outage) waits for it rather than exiting. Any other refusal (a wrong password, a database
 * that does not exist) is thrown: waiting would not change it.
 */
export async function waitForDatabase(
	url: string,
	log: (message: string) => void,
	opts: WaitOptions = {}
): Promise<void> {
	const retryMs = opts.retryMs ?? 1000;
	const sayEveryMs = opts.sayEveryMs ?? 5000;
	const address = databaseAddress(url);
	const started = Date.now();
	let saidAt = 0;
	for (;;) {
		const client = new Client({
			connectionString: url,
			connectionTimeoutMillis: opts.connectTimeoutMs ?? 10000
		});
		// an error after connect (the server going away) must not be an uncaught 'error' event
		client.on("error", () => undefined);
		try {
			await client.connect();
			await client.query("SELECT 1");
			if (saidAt > 0)
				log(
					`PostgreSQL at ${address} answers (after ${Math.round((Date.now() - started) / 1000)} s): starting`
				);
			return;
		} catch (error) {
			if (!isConnectionError(error)) throw error;
			const now = Date.now();
			if (saidAt === 0 || now - saidAt >= sayEveryMs) {
				saidAt = now;
				log(`waiting for PostgreSQL at ${address}: ${reasonOf(error)}`);
			}
		} finally {
			await client.end().catch(() => undefined);
		}
		await new Promise(resolve => setTimeout(resolve, retryMs));
	}
}
