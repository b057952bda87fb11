import { intArray, textArray } from "../../lib/db/array-literal";
import { plannedQuery, select } from "../../lib/db/run";
import { createTestDatabase, type TestDatabase } from "../helpers/db";

/** The array literals of set-based statements (lib/db/array-literal.ts), read by PostgreSQL. */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

it("reads back the strings given, whatever they hold", async () => {
	const values = ["a.txt", 'quo"te', "back\\slash", "com,ma", "{braces}", " spaced ", "NULL", ""];
	const [row] = await select<{ a: string[] }>(test.db, "SELECT $1::text[] AS a", [
		textArray(values)
	]);
	expect(row.a).toEqual(values);
});

it("reads back integers and nulls", async () => {
	const [row] = await select<{ a: (number | null)[] }>(test.db, "SELECT $1::int[] AS a", [
		intArray([3, null, -7, undefined, 2147483647])
	]);
	expect(row.a).toEqual([3, null, -7, null, 2147483647]);
	const [empty] = await select<{ n: number }>(test.db, "SELECT cardinality($1::int[]) AS n", [
		intArray([])
	]);
	expect(empty.n).toBe(0);
});

it("weighs a literal as its array for a cached plan", () => {
	const small = Array.from({ length: 64 }, (_, i) => i);
	const large = Array.from({ length: 65 }, (_, i) => i);
	expect(plannedQuery("SELECT 1", [intArray(small)]).name).toBeDefined();
	expect(plannedQuery("SELECT 1", [intArray(large)]).name).toBeUndefined();
	expect(plannedQuery("SELECT 1", [large]).name).toBeUndefined();
});
