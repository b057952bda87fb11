import type { QueryInterface } from "sequelize";
import { down, up } from "../../migrations/0020-index-entries-nobody-reads";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * Migration 0020: the indexes an ingested file no longer writes entries to, and the statements
 * that read the partial ones still reading them (generic plans, as prepared statements get).
 */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

const context = () => ({ context: test.db.getQueryInterface() as QueryInterface }) as any;

async function definitions(): Promise<Map<string, string>> {
	const [rows] = (await test.db.query(
		`SELECT indexname, indexdef FROM pg_indexes
		 WHERE tablename IN ('trigger_event', 'scale_file') AND schemaname = current_schema()`
	)) as [{ indexname: string; indexdef: string }[], unknown];
	return new Map(rows.map(r => [r.indexname, r.indexdef]));
}

/** The generic plan of `sql` with `args` (SQL literals). */
async function genericPlan(sql: string, args: string[]): Promise<string> {
	return test.db.transaction(async transaction => {
		const query = (text: string) => test.db.query(text, { transaction });
		await query("SET LOCAL plan_cache_mode = force_generic_plan");
		await query(`PREPARE statement AS ${sql}`);
		const [rows] = (await query(
			`EXPLAIN (COSTS OFF) EXECUTE statement(${args.join(", ")})`
		)) as [{ "QUERY PLAN": string }[], unknown];
		await query("DEALLOCATE statement");
		return rows.map(r => r["QUERY PLAN"]).join("\n");
	});
}

describe("index entries nobody reads (0020)", () => {
	it("drops the unread indexes and leaves the null keys out of the others", async () => {
		const made = await definitions();
		expect(made.has("trigger_event_type_occurred_idx")).toBe(false);
		expect(made.has("scale_file_file_name_idx")).toBe(false);
		expect(made.get("trigger_event_rule_id_idx")).toMatch(/WHERE \(rule_id IS NOT NULL\)/);
		expect(made.get("scale_file_data_started_idx")).toMatch(
			/WHERE \(data_started IS NOT NULL\)/
		);
		expect(made.get("scale_file_uuid_idx")).toMatch(/WHERE \(\(file_type\)::text = 'PRODUCT'/);
	});

	it("still serves the statements that read them", async () => {
		// the products a new product supersedes (lib/records/product.ts)
		expect(
			await genericPlan(
				`SELECT id FROM scale_file WHERE uuid = ANY($1::text[]) AND file_type = 'PRODUCT'
				 AND is_published`,
				["'{a}'"]
			)
		).toMatch(/Index Scan (using|on) scale_file_uuid_idx/);
		// the ingest status by data time (lib/records/ingest-status.ts)
		expect(
			await genericPlan(
				`SELECT id FROM scale_file f WHERE f.data_started >= $1::timestamptz
				 AND f.data_started < $2::timestamptz`,
				["'2026-01-01'", "'2026-01-02'"]
			)
		).toMatch(/Index Scan (using|on) scale_file_data_started_idx/);
		// a rule's removal, as its foreign key checks the events naming it
		expect(
			await genericPlan(`SELECT 1 FROM trigger_event WHERE rule_id = $1::int`, ["1"])
		).toMatch(/Index (Only )?Scan (using|on) trigger_event_rule_id_idx/);
	});

	it("down makes them as they were, up as above", async () => {
		await down(context());
		const was = await definitions();
		expect(was.get("trigger_event_type_occurred_idx")).toMatch(/\(type, occurred\)$/);
		expect(was.get("scale_file_file_name_idx")).toMatch(/\(file_name\)$/);
		expect(was.get("scale_file_uuid_idx")).toMatch(/\(uuid\)$/);
		await up(context());
		expect((await definitions()).has("scale_file_file_name_idx")).toBe(false);
	});
});
