import { plannedQuery, PIPELINED, select, transaction } from "../../lib/db/run";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
	await test.db.query("CREATE TABLE tx_probe (id int PRIMARY KEY, note text)");
});

afterAll(() => test.drop());

describe("a pipelined transaction", () => {
	it("commits what fn wrote and answers what fn answered", async () => {
		const answer = await transaction(test.db, PIPELINED, async ({ query }) => {
			await query("INSERT INTO tx_probe VALUES ($1, $2)", [1, "one"]);
			return query("SELECT note FROM tx_probe WHERE id = $1", [1]);
		});
		expect(answer).toEqual([{ note: "one" }]);
		expect(await select(test.db, "SELECT note FROM tx_probe WHERE id = 1")).toEqual([
			{ note: "one" }
		]);
	});

	it("rolls everything back when fn throws, the database's error code kept", async () => {
		const error = await transaction(test.db, PIPELINED, async ({ query }) => {
			await query("INSERT INTO tx_probe VALUES ($1, $2)", [2, "two"]);
			await query("INSERT INTO tx_probe VALUES ($1, $2)", [1, "again"]);
		}).catch((e: unknown) => e);
		expect((error as { code?: string }).code).toBe("23505");
		expect(await select(test.db, "SELECT id FROM tx_probe ORDER BY id")).toEqual([{ id: 1 }]);
	});

	it("sends statements started together in turn, inside the one transaction", async () => {
		const ids = [10, 11, 12, 13, 14, 15];
		const rows = await transaction(test.db, PIPELINED, async ({ query }) => {
			await Promise.all(ids.map(id => query("INSERT INTO tx_probe VALUES ($1, 'x')", [id])));
			return query("SELECT count(*)::int AS n FROM tx_probe WHERE id >= 10");
		});
		expect(rows).toEqual([{ n: ids.length }]);
	});

	it("throws the error of a statement fn did not wait for, and writes nothing", async () => {
		const error = await transaction(test.db, PIPELINED, async ({ query }) => {
			void query("INSERT INTO tx_probe VALUES ($1, $2)", [20, "twenty"]);
			void query("INSERT INTO tx_probe VALUES ($1, $2)", [1, "again"]);
			void query("INSERT INTO tx_probe VALUES ($1, $2)", [21, "after the failure"]);
			return "answered";
		}).catch((e: unknown) => e);
		expect((error as { code?: string }).code).toBe("23505");
		expect(await select(test.db, "SELECT id FROM tx_probe WHERE id >= 20")).toEqual([]);
	});

	it("sends COMMIT with the statement given to commitWith, and refuses one after it", async () => {
		const refused = await transaction(test.db, PIPELINED, async ({ query, commitWith }) => {
			await query("INSERT INTO tx_probe VALUES ($1, $2)", [530, "thirty"]);
			const rows = await commitWith!("INSERT INTO tx_probe VALUES ($1, $2) RETURNING id", [
				531,
				"thirty-one"
			]);
			expect(rows).toEqual([{ id: 531 }]);
			return query("INSERT INTO tx_probe VALUES ($1, $2)", [532, "too late"]).catch(
				(e: Error) => e.message
			);
		});
		expect(refused).toMatch(/after the transaction's last one/);
		expect(
			await select(test.db, "SELECT id FROM tx_probe WHERE id >= 530 ORDER BY id")
		).toEqual([{ id: 530 }, { id: 531 }]);
	});

	it("rolls back when the statement given to commitWith fails, and throws its error", async () => {
		const error = await transaction(test.db, PIPELINED, async ({ query, commitWith }) => {
			await query("INSERT INTO tx_probe VALUES ($1, $2)", [40, "forty"]);
			await commitWith!("INSERT INTO tx_probe VALUES ($1, $2)", [1, "again"]);
		}).catch((e: unknown) => e);
		expect((error as { code?: string }).code).toBe("23505");
		expect(await select(test.db, "SELECT id FROM tx_probe WHERE id BETWEEN 40 AND 49")).toEqual(
			[]
		);
	});

	it("gives its connection back, after a commit and after a failure", async () => {
		// more transactions than the pool has connections (4)
		for (let i = 0; i < 10; i++) {
			await transaction(test.db, PIPELINED, ({ query }) => query("SELECT 1"));
			await transaction(test.db, PIPELINED, async () => {
				throw new Error("no");
			}).catch(() => undefined);
		}
		expect(await select(test.db, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
	});
});

describe("plannedQuery", () => {
	it("names a statement (one name per text) unless an array bound to it is large", () => {
		const text = "SELECT * FROM tx_probe WHERE id = ANY($1::int[])";
		const small = plannedQuery(text, [[1, 2, 3]]);
		expect(small.name).toMatch(/^s\d+$/);
		expect(plannedQuery(text, [[4]]).name).toBe(small.name);
		expect(plannedQuery(`${text} ORDER BY id`, [[4]]).name).not.toBe(small.name);
		const large = plannedQuery(text, [Array.from({ length: 500 }, (_, i) => i)]);
		expect(large).toEqual({ text, values: [expect.any(Array)] });
		expect("name" in large).toBe(false);
	});

	it("runs the same either way", async () => {
		const text = "SELECT count(*)::int AS n FROM tx_probe WHERE id = ANY($1::int[])";
		const many = Array.from({ length: 500 }, (_, i) => i);
		const answers = await transaction(test.db, PIPELINED, async ({ query }) => [
			await query(text, [[1, 10]]),
			await query(text, [many])
		]);
		expect(answers).toEqual([[{ n: 2 }], [{ n: 7 }]]);
	});
});

describe("the embedded PostgreSQL", () => {
	// TEST_DATABASE_URL's server keeps its own settings
	const embedded = process.env.TEST_DATABASE_URL ? it.skip : it;
	embedded("runs with the settings it was given: autovacuum every second", async () => {
		expect(await select(test.db, "SHOW autovacuum_naptime")).toEqual([
			{ autovacuum_naptime: "1s" }
		]);
		expect(await select(test.db, "SHOW listen_addresses")).toEqual([
			{ listen_addresses: "127.0.0.1" }
		]);
	});
});
