import { Sequelize, type Transaction } from "sequelize";
import { installTimestampParser, ISO_TIMESTAMP_TYPES } from "./timestamps";
import { ArrayLiteral } from "./array-literal";

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

interface PgConnection {
	query(
		q: string | { text: string; values: unknown[]; name?: string },
		values?: unknown[]
	): Promise<{ rows: any[] }>;
}

/**
 * A transaction's statements run on its one connection. Callers may start several at once
 * (Promise.all); they are sent one after another, as the pg client wants.
 */
const lastOnConnection = new WeakMap<PgConnection, Promise<unknown>>();

function inTurn<T>(conn: PgConnection, fn: () => Promise<T>): Promise<T> {
	const previous = lastOnConnection.get(conn) ?? Promise.resolve();
	const next = previous.then(fn, fn);
	lastOnConnection.set(
		conn,
		next.catch(() => undefined)
	);
	return next;
}

/** Statement names for `prepare`: one per distinct SQL text, kept by each connection. */
const statementNames = new Map<string, string>();

/**
 * The largest array bind a statement may carry and still run under its cached plan. PostgreSQL
 * plans a prepared statement for the values of its first runs, then may keep a generic plan;
 * for the scheduler's batches of a few dozen rows that spares a planning per statement (P1 rose
 * ~10%), but a batch of hundreds under a plan made for dozens ran slower (P2 fell ~35%). Larger
 * batches are run unnamed, planned for their own values.
 */
const CACHED_PLAN_ROWS = 64;

/** The query for `text` and `values`: named (prepared) unless a bound array is large. */
export function plannedQuery(
	text: string,
	values: unknown[]
): { text: string; values: unknown[]; name?: string } {
	const small = values.every(
		v => !(Array.isArray(v) || v instanceof ArrayLiteral) || v.length <= CACHED_PLAN_ROWS
	);
	return small ? { text, values, name: statementName(text) } : { text, values };
}

function statementName(sql: string): string {
	let name = statementNames.get(sql);
	if (!name) {
		name = `s${statementNames.size}`;
		statementNames.set(sql, name);
	}
	return name;
}

/**
 * Runs one statement on a pooled connection (the transaction's, when given) through the `pg`
 * client directly: Sequelize's query pipeline costs a quarter of a millisecond per statement,
 * as much as PostgreSQL itself on an index-backed page, for nothing we use.
 */
async function run(
	db: Sequelize,
	sql: string,
	bind: unknown[],
	transaction?: Transaction,
	prepare = false,
	types?: typeof ISO_TIMESTAMP_TYPES
) {
	const query: { text: string; values: unknown[]; name?: string; types?: unknown } = prepare
		? { text: sql, values: bind, name: statementName(sql) }
		: { text: sql, values: bind };
	if (types) query.types = types;
	const conn = (transaction as unknown as { connection?: PgConnection } | undefined)?.connection;
	if (conn) return inTurn(conn, async () => (await conn.query(query)).rows);
	const manager = poolOf(db);
	const pooled = await manager.getConnection({ type: "write" });
	try {
		return (await pooled.query(query)).rows;
	} finally {
		manager.releaseConnection(pooled);
	}
}

function poolOf(db: Sequelize) {
	return db.connectionManager as unknown as {
		getConnection(o: { type: string }): Promise<PgConnection>;
		releaseConnection(c: PgConnection): void;
	};
}

/** Runs one statement of a pooledTransaction, answering its rows. */
export type TransactionQuery = (text: string, values?: unknown[]) => Promise<any[]>;

/** What a pooledTransaction hands its function. */
export interface TransactionStatements {
	query: TransactionQuery;
	/**
	 * Runs the transaction's last statement with COMMIT sent right behind it, one round trip for
	 * both, and answers its rows once the commit succeeded. Nothing may run after it.
	 */
	commitWith: TransactionQuery;
}

/** A pg client whose pipeline mode can be switched for a while (pg 8.23's `pipeline`). */
type PipelinedConnection = PgConnection & { pipeline: boolean };

/**
 * Runs `fn` in a transaction on a pooled connection through the `pg` client directly: BEGIN,
 * fn, COMMIT (ROLLBACK when fn or a statement fails). For hot transactions made only of plain
 * statements (reports of finished executions, ingests): a Sequelize transaction costs its BEGIN
 * and COMMIT two trips through Sequelize's query pipeline. They run as named prepared statements
 * (plannedQuery): the SQL given must come from a fixed set of texts, its values bound, never
 * embedded.
 *
 * The connection is in pg's pipeline mode meanwhile: a statement is sent when it is called, not
 * when the one before it is answered. BEGIN goes with the first statement, statements a caller
 * starts together go together (PostgreSQL still runs them in order, each seeing what the ones
 * before it did), and `commitWith` sends the last with COMMIT. Under load every round trip waits
 * for a cpu twice (the backend's, the event loop's), so a trip saved is worth more than the
 * statement (docs/decisions.md, "Recipes"). After a statement fails, PostgreSQL refuses the
 * ones behind it (the transaction is aborted) and COMMIT rolls back: the first error is thrown.
 */
export async function pooledTransaction<T>(
	db: Sequelize,
	fn: (query: TransactionQuery, statements: TransactionStatements) => Promise<T>
): Promise<T> {
	const manager = poolOf(db);
	const conn = (await manager.getConnection({ type: "write" })) as PipelinedConnection;
	const sent: Promise<unknown>[] = [];
	const send = <R>(q: Parameters<PgConnection["query"]>[0]): Promise<R> => {
		const answer = conn.query(q) as Promise<R>;
		sent.push(answer);
		answer.catch(() => undefined); // surfaced below, in order
		return answer;
	};
	let commit: Promise<unknown> | null = null;
	// A statement's error is thrown by pooledTransaction itself, so a caller may leave one it
	// does not need the answer of (or that started with others) unwaited.
	const query: TransactionQuery = (text, values = []) => {
		if (commit)
			return Promise.reject(new Error("a statement after the transaction's last one"));
		const rows = send<{ rows: any[] }>(plannedQuery(text, values)).then(r => r.rows);
		rows.catch(() => undefined);
		return rows;
	};
	const commitWith: TransactionQuery = async (text, values = []) => {
		const rows = query(text, values);
		commit = send("COMMIT");
		await commit;
		await settled(sent);
		return rows;
	};
	conn.pipeline = true;
	try {
		send("BEGIN");
		let result: T;
		try {
			result = await fn(query, { query, commitWith });
			commit ??= send("COMMIT");
		} catch (error) {
			await Promise.allSettled(sent);
			if (!commit) await conn.query("ROLLBACK").catch(() => undefined);
			throw error;
		}
		await settled(sent);
		return result;
	} finally {
		conn.pipeline = false;
		manager.releaseConnection(conn);
	}
}

/**
 * Waits for every statement sent and throws the first error among them: COMMIT after a failed
 * statement answers ROLLBACK, not an error, so the statement's own error tells of it.
 */
async function settled(sent: Promise<unknown>[]): Promise<void> {
	for (const outcome of await Promise.allSettled(sent))
		if (outcome.status === "rejected") throw outcome.reason;
}

/**
 * Runs one statement on a pooled connection, named as plannedQuery names it (see
 * pooledTransaction): for the fixed statements of a hot path that needs no transaction.
 */
export async function queryPlanned(db: Sequelize, text: string, values: unknown[] = []) {
	const manager = poolOf(db);
	const conn = await manager.getConnection({ type: "write" });
	try {
		return (await conn.query(plannedQuery(text, values))).rows;
	} finally {
		manager.releaseConnection(conn);
	}
}

/**
 * A SELECT run as a named prepared statement: PostgreSQL parses and plans it once per
 * connection. For the hot paths (lists, job details), whose SQL texts come from a small fixed
 * set of shapes; never for SQL that embeds values.
 */
export async function selectPrepared<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Transaction
): Promise<T[]> {
	return run(db, sql, bind, transaction, true) as Promise<T[]>;
}

/**
 * A SELECT run as selectPrepared runs it, its timestamptz values answered as the API writes them
 * (ISO-8601 text: lib/db/timestamps.ts isoTimestamp) instead of Dates: for rows read to be
 * serialized, whose timestamps would be parsed into a Date only to be written out again.
 */
export async function selectPreparedIsoTimes<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = []
): Promise<T[]> {
	return run(db, sql, bind, undefined, true, ISO_TIMESTAMP_TYPES) as Promise<T[]>;
}

/** A write run as a named prepared statement (see selectPrepared): for the hot, fixed ones. */
export async function writePrepared<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Transaction
): Promise<T[]> {
	return run(db, sql, bind, transaction, true) as Promise<T[]>;
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
