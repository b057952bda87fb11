import type { Client } from "pg";
import type { Sequelize } from "sequelize";
import { poolOf, type PgConnection } from "./connection";
import { ISO_TIMESTAMP_TYPES } from "./timestamps";
import { ArrayLiteral } from "./array-literal";

/*
 * The one way the code runs SQL: a statement (`select`, `write` and their prepared forms, or an
 * `Sql`'s `query`) and a transaction (`transaction`, with its retry policy). Sequelize owns the
 * pool and the connections' settings (connection.ts); statements and transactions go through the
 * `pg` client directly (docs/decisions.md, "One database access layer").
 */

/**
 * What code that does not care where it runs needs from the database: one statement with
 * positional binds, answering its rows. The leader runs it on its dedicated lock connection
 * (clientSql), others on the pool (poolSql) or inside a transaction (the Sql `transaction`
 * hands its function). A pipelined transaction's statements and clientSql's run as named prepared
 * statements (plannedQuery), so their texts come from a fixed set: values bound, never embedded.
 */
export interface Sql {
	query<T = Record<string, any>>(text: string, values?: unknown[]): Promise<T[]>;
	/**
	 * In a pipelined transaction: runs its last statement with COMMIT in the same round trip,
	 * answering once committed. Nothing may run after it.
	 */
	commitWith?<T = Record<string, any>>(text: string, values?: unknown[]): Promise<T[]>;
	/**
	 * In a transaction: runs `fn` in a savepoint; when it throws, only what it wrote is rolled
	 * back and its error is thrown, the transaction going on.
	 */
	savepoint?<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
}

/** The Sql of a transaction: its statements run on the transaction's one connection. */
export interface TransactionSql extends Sql {
	savepoint<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
	readonly connection: PgConnection;
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
	transaction?: Sql,
	prepare = false,
	types?: typeof ISO_TIMESTAMP_TYPES
) {
	const query: { text: string; values: unknown[]; name?: string; types?: unknown } = prepare
		? { text: sql, values: bind, name: statementName(sql) }
		: { text: sql, values: bind };
	if (types) query.types = types;
	const conn = (transaction as Partial<TransactionSql> | undefined)?.connection;
	if (conn) return inTurn(conn, async () => (await conn.query(query)).rows);
	const manager = poolOf(db);
	const pooled = await manager.getConnection({ type: "write" });
	try {
		return (await pooled.query(query)).rows;
	} finally {
		manager.releaseConnection(pooled);
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
	transaction?: Sql
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
	transaction?: Sql
): Promise<T[]> {
	return run(db, sql, bind, transaction, true) as Promise<T[]>;
}

/** Runs a SELECT with positional binds ($1, $2 ...) and returns its rows. */
export async function select<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Sql
): Promise<T[]> {
	return run(db, sql, bind, transaction) as Promise<T[]>;
}

/** Runs an INSERT/UPDATE/DELETE ... RETURNING and returns the returned rows. */
export async function write<T = Record<string, any>>(
	db: Sequelize,
	sql: string,
	bind: unknown[] = [],
	transaction?: Sql
): Promise<T[]> {
	return run(db, sql, bind, transaction) as Promise<T[]>;
}

/**
 * Runs one statement on a pooled connection, named as plannedQuery names it: for the fixed
 * statements of a hot path that needs no transaction.
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

/** An Sql over a plain `pg` client (the leader's lock connection). */
export function clientSql(client: Pick<Client, "query">): Sql {
	return {
		async query<T>(text: string, values: unknown[] = []) {
			return (await client.query(plannedQuery(text, values))).rows as T[];
		}
	};
}

/** An Sql on the pool, each statement on its own connection (no transaction). */
export function poolSql(db: Sequelize): Sql {
	return { query: (text, values = []) => select(db, text, values) as Promise<any[]> };
}

/** An Sql on the pool whose statements run prepared (see queryPlanned): no transaction. */
export function plannedPoolSql(db: Sequelize): Sql {
	return { query: (text, values = []) => queryPlanned(db, text, values) as Promise<any[]> };
}

/**
 * Whether a database error is worth repeating the whole transaction for: a deadlock or
 * serialization failure (class 40), a lost connection (08), too many connections or an
 * out-of-resources condition (53), an administrator's cancel or restart (57). A report batch
 * that fails so is failed whole, not split item by item (lib/executions/reports.ts).
 */
export function isTransientDbError(error: unknown): boolean {
	const code = sqlState(error);
	if (/^(40|08|53|57)/.test(code)) return true;
	const message = String((error as Error)?.message ?? "");
	return /Connection terminated|ECONNRESET|ECONNREFUSED|connection is closed|Client has encountered a connection error/i.test(
		message
	);
}

/**
 * Whether PostgreSQL ended the transaction for a deadlock or a serialization failure (class 40):
 * nothing of it was written, and run again it may pass. The errors `transaction` retries.
 */
export function isConflictAbort(error: unknown): boolean {
	return /^40/.test(sqlState(error));
}

function sqlState(error: unknown): string {
	const e = error as {
		code?: unknown;
		original?: { code?: unknown };
		parent?: { code?: unknown };
	};
	return String(e?.code ?? e?.original?.code ?? e?.parent?.code ?? "");
}

/** When a transaction is run again: how many runs in all, and what else than a conflict. */
export interface RetryPolicy {
	attempts: number;
	/** an error of the caller's own that also calls for a fresh run */
	also?: (error: unknown) => boolean;
}

/** The retry policy of the transactions that are retried unless told otherwise. */
export const CONFLICT_RETRY: RetryPolicy = { attempts: 3 };

/**
 * Runs `fn` again after a deadlock or serialization failure (isConflictAbort) or an error
 * `policy.also` names, up to `policy.attempts` runs in all; throws the last error. For a
 * caller that must undo something of its own after each failed run, around `transaction`.
 */
export async function retrying<T>(fn: () => Promise<T>, policy: RetryPolicy): Promise<T> {
	for (let attempt = 1; ; attempt++) {
		try {
			return await fn();
		} catch (error) {
			const again = isConflictAbort(error) || (policy.also?.(error) ?? false);
			if (!again || attempt >= policy.attempts) throw error;
		}
	}
}

export interface TransactionOptions {
	/**
	 * Pipelined (the hot transactions: reports of finished executions, ingests): the
	 * connection is in pg's pipeline mode meanwhile, a statement being sent when it is called,
	 * not when the one before it is answered. BEGIN goes with the first statement, statements a
	 * caller starts together go together (PostgreSQL still runs them in order, each seeing what
	 * the ones before it did), and `commitWith` sends the last with COMMIT. Under load every
	 * round trip waits for a cpu twice (the backend's, the event loop's), so a trip saved is
	 * worth more than the statement (docs/decisions.md, "Recipes"). Its `query` runs named
	 * prepared statements (plannedQuery), and a statement's error is thrown by the transaction
	 * itself (after a statement fails, PostgreSQL refuses the ones behind it and COMMIT rolls
	 * back: the first error is thrown), so a caller may leave one unwaited.
	 * Otherwise each statement waits for the one before it, BEGIN and COMMIT alone, as
	 * Sequelize's transactions ran them.
	 */
	pipelined?: boolean;
	/** run again after a conflict (see retrying); once when not given */
	retry?: RetryPolicy;
}

/** A pg client whose pipeline mode can be switched for a while (pg 8.23's `pipeline`). */
type PipelinedConnection = PgConnection & { pipeline: boolean };

/** The options of the hot transactions: pipelined, run once. */
export const PIPELINED: TransactionOptions = { pipelined: true };

/**
 * Runs `fn` in a transaction on a pooled connection through the `pg` client directly: BEGIN,
 * fn, COMMIT (ROLLBACK when fn or a statement fails), run again as `opts.retry` says. The
 * statement helpers (select, write ...) given the Sql run on its connection too.
 */
export function transaction<T>(db: Sequelize, fn: (sql: TransactionSql) => Promise<T>): Promise<T>;
export function transaction<T>(
	db: Sequelize,
	opts: TransactionOptions,
	fn: (sql: TransactionSql) => Promise<T>
): Promise<T>;
export function transaction<T>(
	db: Sequelize,
	a: TransactionOptions | ((sql: TransactionSql) => Promise<T>),
	b?: (sql: TransactionSql) => Promise<T>
): Promise<T> {
	const [opts, fn] = typeof a === "function" ? [{}, a] : [a, b!];
	const once = () => (opts.pipelined ? pipelinedTransaction(db, fn) : plainTransaction(db, fn));
	return opts.retry ? retrying(once, opts.retry) : once();
}

async function plainTransaction<T>(
	db: Sequelize,
	fn: (sql: TransactionSql) => Promise<T>
): Promise<T> {
	const manager = poolOf(db);
	const conn = await manager.getConnection({ type: "write" });
	const send = (text: string) => inTurn(conn, () => conn.query(text));
	try {
		await send("BEGIN");
		let result: T;
		try {
			result = await fn(statementsOn(db, conn));
		} catch (error) {
			await send("ROLLBACK").catch(() => undefined);
			throw error;
		}
		await send("COMMIT");
		return result;
	} finally {
		manager.releaseConnection(conn);
	}
}

/** The Sql of a plain transaction or a savepoint: each statement after the one before it. */
function statementsOn(db: Sequelize, conn: PgConnection): TransactionSql {
	const sql: TransactionSql = {
		connection: conn,
		query: (text, values = []) => select(db, text, values, sql) as Promise<any[]>,
		savepoint: fn => savepoint(db, conn, fn)
	};
	return sql;
}

let savepoints = 0;

async function savepoint<T>(
	db: Sequelize,
	conn: PgConnection,
	fn: (sql: Sql) => Promise<T>
): Promise<T> {
	const name = `sp${++savepoints}`;
	await inTurn(conn, () => conn.query(`SAVEPOINT ${name}`));
	try {
		return await fn(statementsOn(db, conn));
	} catch (error) {
		await inTurn(conn, () => conn.query(`ROLLBACK TO SAVEPOINT ${name}`));
		throw error;
	}
}

async function pipelinedTransaction<T>(
	db: Sequelize,
	fn: (sql: TransactionSql) => Promise<T>
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
	const query = (text: string, values: unknown[] = []): Promise<any[]> => {
		if (commit)
			return Promise.reject(new Error("a statement after the transaction's last one"));
		const rows = send<{ rows: any[] }>(plannedQuery(text, values)).then(r => r.rows);
		rows.catch(() => undefined);
		return rows;
	};
	const commitWith = async (text: string, values: unknown[] = []): Promise<any[]> => {
		const rows = query(text, values);
		commit = send("COMMIT");
		await commit;
		await settled(sent);
		return rows;
	};
	const sql: TransactionSql = {
		connection: conn,
		query,
		commitWith,
		savepoint: inner => savepoint(db, conn, inner)
	};
	conn.pipeline = true;
	try {
		send("BEGIN");
		let result: T;
		try {
			result = await fn(sql);
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
 * Collects items for a short while and hands them to `flush` together, `concurrency` flushes at
 * a time (one unless told): messages that arrive together (hundreds of executions ending at
 * once) cost one transaction. Each `add` resolves with that item's own answer from the flush, or
 * rejects with its error.
 */
export class MicroBatcher<T, R> {
	private pending: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
	private timer: NodeJS.Timeout | null = null;
	private readonly running = new Set<Promise<void>>();

	constructor(
		/** answers one result per item, in order; throwing rejects every item of the batch */
		private readonly flush: (items: T[]) => Promise<R[]>,
		private readonly opts: {
			delayMs: number;
			maxItems: number;
			concurrency?: number;
			/** waited for before a batch is taken: what arrives meanwhile joins the batch */
			ready?: () => Promise<void>;
		}
	) {}

	private get full(): boolean {
		return this.running.size >= (this.opts.concurrency ?? 1);
	}

	add(item: T): Promise<R> {
		return new Promise<R>((resolve, reject) => {
			this.pending.push({ item, resolve, reject });
			this.schedule();
		});
	}

	/** Items waiting or being flushed. */
	get size(): number {
		return this.pending.length;
	}

	/** Flushes whatever is waiting and resolves once nothing is left. */
	async drain(): Promise<void> {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		while (this.running.size > 0 || this.pending.length > 0) {
			if (this.pending.length > 0 && !this.full) this.run();
			else await Promise.race(this.running);
		}
	}

	private schedule(): void {
		if (this.full) return; // a running flush picks the rest up when it ends
		if (this.pending.length >= this.opts.maxItems) {
			if (this.timer) clearTimeout(this.timer);
			this.timer = null;
			this.run();
			return;
		}
		if (!this.timer)
			this.timer = setTimeout(() => {
				this.timer = null;
				this.run();
			}, this.opts.delayMs);
	}

	private run(): void {
		if (this.full || this.pending.length === 0) return;
		const flushing: Promise<void> = (async () => {
			if (this.opts.ready) await this.opts.ready().catch(() => undefined);
			const batch = this.pending.splice(0, this.opts.maxItems);
			try {
				const results = await this.flush(batch.map(b => b.item));
				batch.forEach((b, i) => b.resolve(results[i]));
			} catch (error) {
				for (const b of batch) b.reject(error);
			}
		})().finally(() => {
			this.running.delete(flushing);
			// What arrived during the flush goes at once: it has already waited a flush long.
			if (this.pending.length > 0) this.run();
		});
		this.running.add(flushing);
	}
}
