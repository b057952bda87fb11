import {
	isConflictAbort,
	poolSql,
	select,
	transaction,
	write,
	type TransactionSql
} from "../../lib/db/run";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
	await test.db.query("CREATE TABLE run_probe (id int PRIMARY KEY, note text)");
	await test.db.query("CREATE TABLE skew_probe (id int PRIMARY KEY, seen int)");
});

afterAll(() => test.drop());

beforeEach(() => test.db.query("TRUNCATE run_probe, skew_probe"));

const notes = async () =>
	(
		await select<{ id: number; note: string }>(test.db, "SELECT * FROM run_probe ORDER BY id")
	).map(r => `${r.id}:${r.note}`);

/** A promise and the function that settles it. */
function signal() {
	let resolve!: () => void;
	const done = new Promise<void>(r => (resolve = r));
	return { done, resolve };
}

describe("a statement", () => {
	it("runs on the pool with its values bound, as select and as an Sql", async () => {
		await write(test.db, "INSERT INTO run_probe VALUES ($1, $2) RETURNING id", [1, "one"]);
		expect(
			await poolSql(test.db).query("SELECT note FROM run_probe WHERE id = $1", [1])
		).toEqual([{ note: "one" }]);
	});
});

describe("transaction", () => {
	it("commits what fn wrote and answers what fn answered", async () => {
		const answer = await transaction(test.db, async t => {
			await t.query("INSERT INTO run_probe VALUES ($1, $2)", [1, "a"]);
			await write(test.db, "INSERT INTO run_probe VALUES ($1, $2) RETURNING id", [2, "b"], t);
			return "done";
		});
		expect(answer).toBe("done");
		expect(await notes()).toEqual(["1:a", "2:b"]);
	});

	it("rolls everything back when fn throws, and throws fn's error", async () => {
		const error = await transaction(test.db, async t => {
			await t.query("INSERT INTO run_probe VALUES ($1, $2)", [1, "a"]);
			throw new Error("refused");
		}).catch(e => e);
		expect(error.message).toBe("refused");
		expect(await notes()).toEqual([]);
	});

	it("rolls back a savepoint alone: the transaction goes on and commits the rest", async () => {
		const outcomes = await transaction(test.db, async t => {
			await t.query("INSERT INTO run_probe VALUES ($1, $2)", [1, "before"]);
			const thrown = await t
				.savepoint(async sp => {
					await sp.query("INSERT INTO run_probe VALUES ($1, $2)", [2, "undone"]);
					throw new Error("not this one");
				})
				.catch(e => (e as Error).message);
			// a statement PostgreSQL refuses in a savepoint does not abort the transaction
			const refused = await t
				.savepoint(sp => sp.query("INSERT INTO run_probe VALUES ($1, $2)", [1, "again"]))
				.catch(e => (e as { code: string }).code);
			const kept = await t.savepoint(sp =>
				sp.query("INSERT INTO run_probe VALUES ($1, $2) RETURNING id", [3, "kept"])
			);
			await t.query("INSERT INTO run_probe VALUES ($1, $2)", [4, "after"]);
			return { thrown, refused, kept };
		});
		expect(outcomes).toEqual({ thrown: "not this one", refused: "23505", kept: [{ id: 3 }] });
		expect(await notes()).toEqual(["1:before", "3:kept", "4:after"]);
	});

	/**
	 * Two SERIALIZABLE transactions each read the table the other writes (a write skew): the
	 * first to commit wins and PostgreSQL ends the other with a serialization failure (40001).
	 * `reader` reads, lets `other` read, write and commit, then writes itself.
	 */
	async function skew(retry: boolean) {
		const otherRead = signal();
		const otherDone = signal();
		const readerRead = signal();
		let runs = 0;
		const skewed = async (t: TransactionSql, id: number) => {
			await t.query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
			const [{ n }] = await t.query<{ n: number }>(
				"SELECT count(*)::int AS n FROM skew_probe"
			);
			return async () => t.query("INSERT INTO skew_probe VALUES ($1, $2)", [id, n]);
		};
		const reader = transaction(test.db, retry ? { retry: { attempts: 3 } } : {}, async t => {
			runs++;
			const insert = await skewed(t, 1);
			if (runs === 1) {
				readerRead.resolve();
				await otherDone.done;
			}
			await insert();
		});
		const other = (async () => {
			await readerRead.done;
			await transaction(test.db, async t => {
				const insert = await skewed(t, 2);
				otherRead.resolve();
				await insert();
			});
			otherDone.resolve();
		})();
		const [readerOutcome] = await Promise.allSettled([reader, other]);
		await otherRead.done;
		return { readerOutcome, runs };
	}

	it("runs a transaction ended by a serialization failure again when told to", async () => {
		const { readerOutcome, runs } = await skew(true);
		expect(readerOutcome.status).toBe("fulfilled");
		expect(runs).toBe(2);
		// the second run saw what the other committed
		expect(await select(test.db, "SELECT id, seen FROM skew_probe ORDER BY id")).toEqual([
			{ id: 1, seen: 1 },
			{ id: 2, seen: 0 }
		]);
	});

	it("throws a serialization failure when not told to retry", async () => {
		const { readerOutcome, runs } = await skew(false);
		expect(readerOutcome.status).toBe("rejected");
		const reason = (readerOutcome as PromiseRejectedResult).reason;
		expect(reason.code).toBe("40001");
		expect(isConflictAbort(reason)).toBe(true);
		expect(runs).toBe(1);
		expect(await select(test.db, "SELECT id FROM skew_probe")).toEqual([{ id: 2 }]);
	});

	it("runs a transaction again after an error the caller names, up to the attempts given", async () => {
		let runs = 0;
		const error = await transaction(
			test.db,
			{ retry: { attempts: 4, also: e => (e as Error).message === "again" } },
			async t => {
				runs++;
				await t.query("INSERT INTO run_probe VALUES ($1, $2)", [runs, "tried"]);
				throw new Error("again");
			}
		).catch(e => e);
		expect(error.message).toBe("again");
		expect(runs).toBe(4);
		expect(await notes()).toEqual([]);
	});
});
