import type { QueryInterface } from "sequelize";
import { up as clearEmptyStatistics } from "../../migrations/0018-no-statistics-of-empty-tables";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * A new database's hot tables are planned as tables that will grow, not as the empty pages they
 * are (migrations 0005 and 0018): the foreign-key checks of their first thousands of rows look
 * rows up by index instead of scanning the table each time.
 */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

const HOT_TABLES = ["job", "job_exe", "scale_file"];

async function reltuples(table: string): Promise<number> {
	const [[row]] = (await test.db.query(
		`SELECT reltuples::int AS n FROM pg_class WHERE oid = '${table}'::regclass`
	)) as [{ n: number }[], unknown];
	return row.n;
}

/** Runs migration 0018 again on the test's database. */
function migrate0018(): Promise<void> {
	return clearEmptyStatistics({
		context: test.db.getQueryInterface() as QueryInterface,
		name: "0018",
		path: ""
	} as any) as Promise<void>;
}

/** The plan a foreign-key check of `table` keeps: generic, for any id. */
async function keyLookupPlan(table: string): Promise<string> {
	return test.db.transaction(async transaction => {
		const query = (sql: string) => test.db.query(sql, { transaction });
		await query("SET LOCAL plan_cache_mode = force_generic_plan");
		await query(`PREPARE key_lookup (int) AS SELECT 1 FROM ${table} WHERE id = $1`);
		const [rows] = (await query("EXPLAIN (COSTS OFF) EXECUTE key_lookup(1)")) as [
			{ "QUERY PLAN": string }[],
			unknown
		];
		await query("DEALLOCATE key_lookup");
		return rows.map(r => r["QUERY PLAN"]).join("\n");
	});
}

describe("statistics of the hot tables of a new database", () => {
	it("leaves them never analyzed, so that a row is looked up by its key", async () => {
		for (const table of HOT_TABLES) {
			expect(await reltuples(table)).toBe(-1);
			expect(await keyLookupPlan(table)).toMatch(/Index (Only )?Scan using/);
		}
	});

	it("clears the statistics of a table analyzed while empty (0018), which planned a scan", async () => {
		await test.db.query("ANALYZE scale_file");
		expect(await reltuples("scale_file")).toBe(0);
		expect(await keyLookupPlan("scale_file")).toMatch(/Seq Scan on scale_file/);

		await migrate0018();
		expect(await reltuples("scale_file")).toBe(-1);
		expect(await keyLookupPlan("scale_file")).toMatch(/Index (Only )?Scan using/);
	});

	it("keeps the statistics of a table with rows", async () => {
		await test.db.query("ANALYZE error");
		const before = await reltuples("error");
		expect(before).toBeGreaterThan(0);
		await migrate0018();
		expect(await reltuples("error")).toBe(before);
	});
});
