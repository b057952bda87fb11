import { randomBytes } from "crypto";
import type { Sequelize } from "sequelize";
import { createSequelize } from "../../lib/db/connection";

interface TestState {
	serverUrl: string;
	templateDb: string;
}

function state(): TestState {
	const raw = process.env.SCALE_TEST_STATE;
	if (!raw)
		throw new Error("SCALE_TEST_STATE is unset: run the tests through jest (globalSetup)");
	return JSON.parse(raw);
}

export interface TestDatabase {
	url: string;
	db: Sequelize;
	drop(): Promise<void>;
}

/** A fresh, migrated database of its own for one test file (a copy of the template). */
export async function createTestDatabase(): Promise<TestDatabase> {
	const { serverUrl, templateDb } = state();
	const name = `t_${randomBytes(6).toString("hex")}`;
	const admin = createSequelize(`${serverUrl}/postgres`, { poolMax: 1 });
	await admin.query(`CREATE DATABASE ${name} TEMPLATE ${templateDb}`);
	await admin.close();
	const url = `${serverUrl}/${name}`;
	const db = createSequelize(url, { poolMax: 4 });
	return {
		url,
		db,
		async drop() {
			await db.close();
			const a = createSequelize(`${serverUrl}/postgres`, { poolMax: 1 });
			await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
			await a.close();
		}
	};
}

/** Statements on a test's database (read when called, so it may be created in beforeAll). */
export function sqlOn(database: () => Sequelize) {
	async function query<T = any>(sql: string, bind: unknown[] = []): Promise<T[]> {
		const [rows] = await database().query(sql, { bind });
		return rows as T[];
	}
	return {
		query,
		async one<T = any>(sql: string, bind: unknown[] = []): Promise<T> {
			return (await query<T>(sql, bind))[0];
		},
		/** The SQLSTATE and message a statement fails with, or null. */
		async failure(sql: string, bind: unknown[] = []): Promise<[string, string] | null> {
			try {
				await query(sql, bind);
				return null;
			} catch (error: any) {
				return [error.original?.code ?? error.parent?.code, error.message];
			}
		}
	};
}
