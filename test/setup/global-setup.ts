import fs from "fs";
import os from "os";
import path from "path";
import { EmbeddedPostgres } from "../../lib/db/embedded";
import { createSequelize } from "../../lib/db/connection";
import { migrate } from "../../lib/db/migrate";
import { ensureTestImage, startDockerd } from "../helpers/dockerd";
import { freePort } from "../helpers/ports";

/**
 * Starts one real PostgreSQL for the whole run (or uses TEST_DATABASE_URL's server) and
 * migrates a template database that every test file clones, so files stay isolated and fast.
 */
async function startPostgres(dataDir: string): Promise<{ serverUrl: string; templateDb: string }> {
	const templateDb = "scale_template";
	let serverUrl: string;
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
		serverUrl = pg.url.replace(/\/[^/]*$/, "");
	}
	const admin = createSequelize(`${serverUrl}/postgres`, { poolMax: 1 });
	await admin.query(`DROP DATABASE IF EXISTS ${templateDb}`).catch(() => undefined);
	await admin.query(`CREATE DATABASE ${templateDb}`).catch(() => undefined);
	await admin.close();
	const db = createSequelize(`${serverUrl}/${templateDb}`, { poolMax: 2 });
	await migrate(db);
	await db.close();
	return { serverUrl, templateDb };
}

/**
 * A Docker engine for the tests that run containers (test/helpers/dockerd.ts): as root, a
 * dockerd of the run's own (docker.io and busybox-static installed if missing); with
 * TEST_DOCKER_HOST, that engine; else none. A failure is kept for requireTestDocker() to
 * throw in the tests that need the engine, so the others still run.
 */
async function startDocker(): Promise<Record<string, string>> {
	const asRoot = process.getuid !== undefined && process.getuid() === 0;
	if (!asRoot && !process.env.TEST_DOCKER_HOST) return {};
	try {
		const engine = await startDockerd();
		(globalThis as any).__SCALE_DOCKERD__ = engine;
		return { dockerHost: engine.host, dockerImage: await ensureTestImage(engine.host) };
	} catch (error: any) {
		return { dockerError: String(error?.message ?? error) };
	}
}

export default async function globalSetup() {
	const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-test-pg-"));
	(globalThis as any).__SCALE_TEST_DIR__ = dataDir;
	// side by side: the engine starts while PostgreSQL does
	const [pg, docker] = await Promise.allSettled([startPostgres(dataDir), startDocker()]);
	if (pg.status === "rejected") {
		// globalTeardown does not run after a failed globalSetup
		await (globalThis as any).__SCALE_DOCKERD__?.stop();
		fs.rmSync(dataDir, { recursive: true, force: true });
		throw pg.reason;
	}
	const dockerState = docker.status === "fulfilled" ? docker.value : {};
	process.env.SCALE_TEST_STATE = JSON.stringify({ ...pg.value, dataDir, ...dockerState });
}
