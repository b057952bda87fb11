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
