import type { QueryInterface } from "sequelize";
import { up as clearEmptyStatistics } from "../../migrations/0018-no-statistics-of-empty-tables";
import {
	COLUMNS_WITHOUT_STATISTICS,
	down as documentStatisticsDown,
	up as documentStatisticsUp
} from "../../migrations/0019-no-statistics-of-documents";
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

describe("statistics nobody reads (0019)", () => {
	async function statsColumns(table: string): Promise<string[]> {
		const [rows] = (await test.db.query(
			`SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1
			 ORDER BY attname`,
			{ bind: [table] }
		)) as [{ attname: string }[], unknown];
		return rows.map(r => r.attname);
	}

	it("gathers none for documents, paths and messages; keeps those of filters and times", async () => {
		await test.db.query(
			`INSERT INTO trigger_event (type, description, occurred)
			 SELECT 'INGEST', jsonb_build_object('file_name', 'f' || n), now() - n * interval '1 s'
			 FROM generate_series(1, 200) n`
		);
		await test.db.query("ANALYZE trigger_event");
		const columns = await statsColumns("trigger_event");
		expect(columns).toEqual(expect.arrayContaining(["type", "occurred"]));
		expect(columns).not.toContain("description");
	});

	it("sets a target of 0 on every column it names, and down gives them the default back", async () => {
		const targets = async () => {
			const [rows] = (await test.db.query(
				`SELECT c.relname AS t, a.attname AS c, coalesce(a.attstattarget, -1) AS target
				 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
				 WHERE c.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped`,
				{ bind: [Object.keys(COLUMNS_WITHOUT_STATISTICS)] }
			)) as [{ t: string; c: string; target: number }[], unknown];
			return new Map(rows.map(r => [`${r.t}.${r.c}`, r.target]));
		};
		const named = Object.entries(COLUMNS_WITHOUT_STATISTICS).flatMap(([t, cs]) =>
			cs.map(c => `${t}.${c}`)
		);
		const before = await targets();
		for (const column of named) expect([column, before.get(column)]).toEqual([column, 0]);
		expect(before.get("job.status")).toBe(-1);

		const context = { context: test.db.getQueryInterface() as QueryInterface } as any;
		await documentStatisticsDown(context);
		const after = await targets();
		for (const column of named) expect([column, after.get(column)]).toEqual([column, -1]);
		await documentStatisticsUp(context);
		expect((await targets()).get("job.data")).toBe(0);
	});
});
