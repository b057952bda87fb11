import fs from "fs";
import os from "os";
import path from "path";
import { EmbeddedPostgres } from "../../lib/db/embedded";
import { createSequelize } from "../../lib/db/connection";
import { migrate } from "../../lib/db/migrate";
import { freePort } from "../helpers/ports";

/**
 * Starts one real PostgreSQL for the whole run (or uses TEST_DATABASE_URL's server) and
 * migrates a template database that every test file clones, so files stay isolated and fast.
 */
export default async function globalSetup() {
	const templateDb = "scale_template";
	let serverUrl: string;
	const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-test-pg-"));
	if (process.env.TEST_DATABASE_URL) {
		serverUrl = process.env.TEST_DATABASE_URL.replace(/\/[^/]*$/, "");
	} else {
		const port = await freePort();
		const pg = new EmbeddedPostgres({
			dataDir: path.join(dataDir, "data"),
			port,
			database: templateDb
		});
		// postgres (when we are root) must be able to enter the temp folder
		fs.chmodSync(dataDir, 0o755);
		await pg.start();
		(globalThis as any).__SCALE_PG__ = pg;
		serverUrl = `postgres://postgres@127.0.0.1:${port}`;
	}
	const admin = createSequelize(`${serverUrl}/postgres`, { poolMax: 1 });
	await admin.query(`DROP DATABASE IF EXISTS ${templateDb}`).catch(() => undefined);
	await admin.query(`CREATE DATABASE ${templateDb}`).catch(() => undefined);
	await admin.close();
	const db = createSequelize(`${serverUrl}/${templateDb}`, { poolMax: 2 });
	await migrate(db);
	await db.close();
	process.env.SCALE_TEST_STATE = JSON.stringify({ serverUrl, templateDb, dataDir });
	(globalThis as any).__SCALE_TEST_DIR__ = dataDir;
}
