import fs from "fs";
import path from "path";
import { EmbeddedPostgres } from "../../lib/db/embedded";
import { PROJECT_ROOT } from "../../lib/paths";
import { freePort } from "../../test/helpers/ports";

/**
 * Where benchmark P4's embedded PostgreSQL keeps the seeded database between `bench:seed` and
 * `bench:lists`: seeding takes minutes, so unlike the other benchmarks' databases it is kept.
 */
export const P4_DIR = path.resolve(
	process.env.BENCH_P4_DIR || path.join(PROJECT_ROOT, "data", "bench-p4")
);

export interface P4Database {
	url: string;
	/** where the data is: the embedded cluster's folder, or DATABASE_URL without its password */
	where: string;
	/** the postmaster's pid (its backends are its children), when the cluster is the embedded one */
	pgPid: number | null;
	stop(): Promise<void>;
}

/** DATABASE_URL when set, else the embedded cluster under P4_DIR, started (created if new). */
export async function openP4Database(log: (msg: string) => void): Promise<P4Database> {
	const external = process.env.DATABASE_URL;
	if (external) {
		const shown = new URL(external);
		shown.password = "";
		return { url: external, where: shown.toString(), pgPid: null, stop: async () => undefined };
	}
	const pg = new EmbeddedPostgres({
		dataDir: P4_DIR,
		port: await freePort(),
		database: "bench",
		log
	});
	await pg.start();
	// pg.dataDir differs from P4_DIR when root's postgres user cannot enter the project's folders
	const pgPid = Number(
		fs.readFileSync(path.join(pg.dataDir, "postmaster.pid"), "utf8").split("\n")[0]
	);
	return { url: pg.url, where: pg.dataDir, pgPid, stop: () => pg.stop() };
}
