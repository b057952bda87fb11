import { Sequelize } from "sequelize";
import { installTimestampParser } from "./timestamps";

/**
 * One Sequelize instance per database URL per process, shared by the services of the process
 * and closed when the last of them lets go.
 */
const shared = new Map<string, { sequelize: Sequelize; users: number }>();

export function createSequelize(url: string, opts: { poolMax?: number } = {}): Sequelize {
	installTimestampParser();
	return new Sequelize(url, {
		dialect: "postgres",
		logging: false,
		pool: { max: opts.poolMax ?? 20, min: 0, idle: 10000, acquire: 30000 },
		// A server that does not answer at all (its host down) fails a connection after 10 s,
		// as a refused one does at once, rather than holding requests for the acquire timeout.
		dialectOptions: { connectionTimeoutMillis: 10000 },
		define: { freezeTableName: true, underscored: true, timestamps: false }
	});
}

export function acquireSequelize(url: string): Sequelize {
	let entry = shared.get(url);
	if (!entry) {
		entry = { sequelize: createSequelize(url), users: 0 };
		shared.set(url, entry);
	}
	entry.users++;
	return entry.sequelize;
}

export async function releaseSequelize(url: string): Promise<void> {
	const entry = shared.get(url);
	if (!entry || --entry.users > 0) return;
	shared.delete(url);
	await entry.sequelize.close();
}

/** A `pg` client of the pool, as Sequelize hands it out. */
export interface PgConnection {
	query(
		q: string | { text: string; values: unknown[]; name?: string; types?: unknown },
		values?: unknown[]
	): Promise<{ rows: any[] }>;
}

/** The pool Sequelize keeps: its connections are `pg` clients with the settings made above. */
export function poolOf(db: Sequelize) {
	return db.connectionManager as unknown as {
		getConnection(o: { type: string }): Promise<PgConnection>;
		releaseConnection(c: PgConnection): void;
	};
}
