import path from "path";
import type { Config } from "../config";
import { createSequelize } from "./connection";
import { EmbeddedPostgres } from "./embedded";
import { migrate } from "./migrate";

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
	}
	// Two connections: one holds the migration lock while the other migrates.
	const sequelize = createSequelize(url, { poolMax: 2 });
	try {
		await migrate(sequelize, log);
	} finally {
		await sequelize.close();
	}
	return url;
}
