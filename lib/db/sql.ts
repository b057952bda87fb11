import type { Client } from "pg";
import type { Sequelize, Transaction } from "sequelize";
import { plannedQuery, pooledTransaction, queryPlanned, select } from "./connection";

/**
 * What the scheduling code needs from a database connection: one statement with positional
 * binds, answering its rows. The leader runs it on its dedicated lock connection; completions and
 * failures run it on a pooled connection inside a transaction. Statements run as named prepared
 * statements (plannedQuery in lib/db/connection.ts), so their texts come from a fixed set: values
 * are always bound, never embedded.
 */
export interface Sql {
	query<T = Record<string, any>>(text: string, values?: unknown[]): Promise<T[]>;
	/**
	 * Where the Sql owns its transaction (poolTransaction): runs the transaction's last statement
	 * with COMMIT in the same round trip, answering once committed. Nothing may run after it.
	 */
	commitWith?<T = Record<string, any>>(text: string, values?: unknown[]): Promise<T[]>;
}

/** Runs `fn` inside one transaction, handing it the transaction's Sql. */
export type TxRunner = <T>(fn: (sql: Sql) => Promise<T>) => Promise<T>;

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

/** An Sql inside a Sequelize transaction (its statements on the transaction's connection). */
export function transactionSql(db: Sequelize, t: Transaction): Sql {
	return { query: (text, values = []) => select(db, text, values, t) as Promise<any[]> };
}

/** A transaction on a pooled connection, run through the `pg` client (see pooledTransaction). */
export function poolTransaction(db: Sequelize): TxRunner {
	return fn => pooledTransaction(db, (query, { commitWith }) => fn({ query, commitWith }));
}

/**
 * Whether a database error is worth repeating the whole transaction for: a deadlock or
 * serialization failure (class 40), a lost connection (08), too many connections or an
 * out-of-resources condition (53), an administrator's cancel or restart (57).
 */
export function isTransientDbError(error: unknown): boolean {
	const e = error as {
		code?: unknown;
		original?: { code?: unknown };
		parent?: { code?: unknown };
	};
	const code = String(e?.code ?? e?.original?.code ?? e?.parent?.code ?? "");
	if (/^(40|08|53|57)/.test(code)) return true;
	const message = String((error as Error)?.message ?? "");
	return /Connection terminated|ECONNRESET|ECONNREFUSED|connection is closed|Client has encountered a connection error/i.test(
		message
	);
}

/**
 * Whether PostgreSQL ended the transaction for a deadlock or a serialization failure (class 40):
 * nothing of it was written, and run again it may pass.
 */
export function isConflictAbort(error: unknown): boolean {
	const e = error as {
		code?: unknown;
		original?: { code?: unknown };
		parent?: { code?: unknown };
	};
	return /^40/.test(String(e?.code ?? e?.original?.code ?? e?.parent?.code ?? ""));
}

/** Runs a transaction, repeating it (up to `attempts` times) after a deadlock or serialization failure. */
export async function withRetry<T>(run: () => Promise<T>, attempts = 3): Promise<T> {
	for (let attempt = 1; ; attempt++) {
		try {
			return await run();
		} catch (error) {
			if (attempt >= attempts || !isConflictAbort(error)) throw error;
		}
	}
}
