import { Sequelize, type Transaction } from "sequelize";

/**
 * One Sequelize instance per database URL per process, shared by the services of the process
 * and closed when the last of them lets go.
 */
const shared = new Map<string, { sequelize: Sequelize; users: number }>();

export function createSequelize(url: string, opts: { poolMax?: number } = {}): Sequelize {
	return new Sequelize(url, {
		dialect: "postgres",
		logging: false,
		pool: { max: opts.poolMax ?? 20, min: 0, idle: 10000, acquire: 30000 },
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

interface PgConnection {
	query(sql: string, values: unknown[]): Promise<{ rows: any[] }>;
}

/**
 * Runs one statement on a pooled connection (the transaction's, when given) through the `pg`
 * client directly: Sequelize's query pipeline costs a quarter of a millisecond per statement,
 * as much as PostgreSQL itself on an index-backed page, for nothing we use.
 */
async function run(db: Sequelize, sql: string, bind: unknown[], transaction?: Transaction) {
	const conn = (transaction as unknown as { connection?: PgConnection } | undefined)?.connection;
	if (conn) return (await conn.query(sql, bind)).rows;
	const manager = db.connectionManager as unknown as {
		getConnection(o: { type: string }): Promise<PgConnection>;
		releaseConnection(c: PgConnection): void;
	};
	const pooled = await manager.getConnection({ type: "write" });
	try {
		return (await pooled.query(sql, bind)).rows;
	} finally {
		manager.releaseConnection(pooled);
	}
}

/** Runs a SELECT with positional binds ($1, $2 ...) and returns its rows. */
export async function select<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Transaction
): Promise<T[]> {
	return run(db, sql, bind, transaction) as Promise<T[]>;
}

/** Runs an INSERT/UPDATE/DELETE ... RETURNING and returns the returned rows. */
export async function write<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Transaction
): Promise<T[]> {
	return run(db, sql, bind, transaction) as Promise<T[]>;
}
