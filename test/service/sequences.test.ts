import { createTestDatabase, type TestDatabase } from "../helpers/db";

/**
 * The statements that write new jobs and recipes draw their rows' ids from sequences they name
 * (lib/jobs/new-job.ts, lib/recipes/create.ts): the same the columns' defaults draw from.
 */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

it("names the sequences the id columns' defaults draw from", async () => {
	const tables = ["job", "job_exe", "trigger_event", "recipe"];
	const [rows] = (await test.db.query(
		`SELECT table_name, column_default FROM information_schema.columns
		 WHERE table_schema = current_schema() AND column_name = 'id'
			AND table_name = ANY($1::text[]) ORDER BY table_name`,
		{ bind: [tables] }
	)) as [{ table_name: string; column_default: string }[], unknown];
	expect(rows).toEqual(
		[...tables].sort().map(table => ({
			table_name: table,
			column_default: `nextval('${table}_id_seq'::regclass)`
		}))
	);
});
