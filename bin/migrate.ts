import path from "path";
import { loadConfig } from "../lib/launch/config";
import { createSequelize } from "../lib/db/connection";
import { EmbeddedPostgres } from "../lib/db/embedded";
import { migrate } from "../lib/db/migrate";

/** `npm run migrate`: applies pending migrations to DATABASE_URL, or to the embedded database. */
async function main() {
	const config = loadConfig();
	let pg: EmbeddedPostgres | null = null;
	let url = config.databaseUrl;
	if (!url) {
		pg = new EmbeddedPostgres({
			dataDir: path.join(config.dataDir, "postgres"),
			port: config.embeddedPgPort,
			database: "scale",
			log: m => console.log(m)
		});
		await pg.start();
		url = pg.url;
	}
	const sequelize = createSequelize(url, { poolMax: 2 });
	try {
		await migrate(sequelize, m => console.log(m));
		console.log("migrations are up to date");
	} finally {
		await sequelize.close();
		if (pg) await pg.stop();
	}
}

main().catch(err => {
	console.error(`migration failed: ${err && err.stack ? err.stack : err}`);
	process.exit(1);
});
