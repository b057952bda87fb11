import path from "path";
import type { QueryInterface, Sequelize } from "sequelize";
import { SequelizeStorage, Umzug } from "umzug";

/**
 * Migrations run from the compiled `dist/migrations/*.js`, or from the TypeScript sources when
 * this module itself runs from source (the test runner).
 */
function migrationsGlob(): string {
	const ext = path.extname(__filename);
	return path.join(__dirname, "..", "..", "migrations", `*${ext}`).replace(/\\/g, "/");
}

export function createMigrator(
	sequelize: Sequelize,
	log?: (msg: string) => void
): Umzug<QueryInterface> {
	return new Umzug({
		migrations: {
			glob: migrationsGlob(),
			// Recorded without the extension: the same migration runs as .ts in tests and .js in dist.
			resolve: ({ name, path: file, context }) => {
				const migration = require(file!);
				return {
					name: name.replace(/\.(ts|js)$/, ""),
					up: () => migration.up({ context, name, path: file }),
					down: () => migration.down({ context, name, path: file })
				};
			}
		},
		context: sequelize.getQueryInterface(),
		storage: new SequelizeStorage({ sequelize, tableName: "schema_migration" }),
		logger: log
			? {
					info: (m: Record<string, unknown>) =>
						m.event === "migrated" && log(`migrated ${m.name}`),
					warn: () => undefined,
					error: (m: Record<string, unknown>) =>
						log(`migration error ${JSON.stringify(m)}`),
					debug: () => undefined
				}
			: undefined
	});
}

/**
 * Applies pending migrations. A session-level advisory lock, held on one dedicated connection,
 * serialises concurrent starts of several replicas: the second waits, then finds nothing pending.
 */
export async function migrate(sequelize: Sequelize, log?: (msg: string) => void): Promise<void> {
	const LOCK = 727272;
	const manager = sequelize.connectionManager as any;
	const conn = await manager.getConnection({ type: "write" });
	try {
		await conn.query("SELECT pg_advisory_lock($1)", [LOCK]);
		try {
			await createMigrator(sequelize, log).up();
		} finally {
			await conn.query("SELECT pg_advisory_unlock($1)", [LOCK]);
		}
	} finally {
		manager.releaseConnection(conn);
	}
}
