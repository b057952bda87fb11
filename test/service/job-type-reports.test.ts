import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { addFileJobType } from "../helpers/completion";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";
import { FOLD_DELTAS, foldFailedJobDeltas } from "../../lib/records/job-type-reports";
import * as migration from "../../migrations/0013-failed-job-counts";
import * as generation from "../../migrations/0014-failed-job-count-generation";

/**
 * The job type reports (/job-types/status/, /running/, /system-failures/) over real HTTP and
 * PostgreSQL, on jobs inserted here at times relative to the test's start, with the answers
 * worked out by hand.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;

const NOW = Date.now();
/** `hours` before the test's start, as the API writes it. */
const t = (hours: number) => new Date(NOW - Math.round(hours * 3600 * 1000)).toISOString();

const ids = { a: 0, b: 0, c: 0, sys1: 0, sys2: 0, alg: 0, data: 0 };

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function get(pathAndQuery: string): Promise<any> {
	const reply = await request("GET", `${api}${pathAndQuery}`);
	if (reply.status !== 200) throw new Error(`GET ${pathAndQuery}: ${reply.status} ${reply.text}`);
	return reply.body;
}

const JOB_TYPE_FIELDS = [
	"id",
	"name",
	"version",
	"title",
	"description",
	"category",
	"author_name",
	"author_url",
	"is_system",
	"is_long_running",
	"is_active",
	"is_operational",
	"is_paused",
	"icon_code"
];

beforeAll(async () => {
	tdb = await createTestDatabase();
	// Older than the migrations' system types, so these three come first by last_modified.
	ids.a = await addFileJobType(tdb.db, "alpha", {
		title: "Alpha",
		category: "test",
		icon_code: "f013",
		last_modified: "2000-01-01T00:00:00Z"
	});
	ids.b = await addFileJobType(tdb.db, "beta", { last_modified: "2000-01-02T00:00:00Z" });
	ids.c = await addFileJobType(tdb.db, "gamma", { last_modified: "2000-01-03T00:00:00Z" });
	const errors = await query<{ id: number }>(
		`INSERT INTO error (name, title, description, category) VALUES
			('sys-one', 'System One', 'The first system error', 'SYSTEM'),
			('sys-two', NULL, NULL, 'SYSTEM'),
			('alg-one', 'Algorithm One', NULL, 'ALGORITHM'),
			('data-one', NULL, NULL, 'DATA')
		 RETURNING id`
	);
	[ids.sys1, ids.sys2, ids.alg, ids.data] = errors.map(e => e.id);
	const [event] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type) VALUES ('TEST') RETURNING id`
	);
	// type, status, error, last status change (hours back), started (hours back)
	const jobs: [number, string, number | null, number, number | null][] = [
		[ids.a, "COMPLETED", null, 1, 1.5],
		[ids.a, "COMPLETED", null, 2, 2.5],
		[ids.a, "COMPLETED", null, 5, 5.5],
		[ids.a, "FAILED", ids.sys1, 0.5, 0.6],
		[ids.a, "FAILED", ids.sys1, 10, 11],
		[ids.a, "FAILED", ids.alg, 1 / 3, 0.4],
		[ids.a, "RUNNING", null, 47, 48],
		[ids.a, "RUNNING", null, 1, 1],
		// a SYSTEM error on a job that is not FAILED (requeued): no system failure
		[ids.a, "QUEUED", ids.sys2, 4, null],
		[ids.b, "FAILED", ids.sys2, 24, 25],
		[ids.b, "FAILED", ids.data, 2, 2.2],
		[ids.b, "RUNNING", null, 72, 72]
	];
	for (const [type, status, error, changed, started] of jobs) {
		await query(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, error_id, priority,
				timeout, max_tries, data, started, last_status_change)
			 VALUES ($1, (SELECT id FROM job_type_rev WHERE job_type_id = $1), $2, $3, $4, 5, 0, 1,
				'{}', $5, $6)`,
			[type, event.id, status, error, started === null ? null : t(started), t(changed)]
		);
	}
	app = await startServices(tdb.url, ["api", "job-type-reports", "job-types"]);
	api = app.api;
}, 60000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

function byType(body: any, id: number): any {
	return body.results.find((r: any) => r.job_type.id === id);
}

describe("GET /job-types/status/", () => {
	test("the default range is the last 3 hours; RUNNING jobs count whatever their time", async () => {
		const [{ n }] = await query<{ n: number }>(`SELECT count(*)::int AS n FROM job_type`);
		const body = await get("/job-types/status/");
		expect(Object.keys(body)).toEqual(["count", "next", "previous", "results"]);
		expect(body.count).toBe(n);
		expect(body.next).toBeNull();
		expect(body.previous).toBeNull();
		// by last_modified: the three inserted here first
		expect(body.results.slice(0, 3).map((r: any) => r.job_type.id)).toEqual([
			ids.a,
			ids.b,
			ids.c
		]);
		const a = byType(body, ids.a);
		expect(Object.keys(a)).toEqual(["job_type", "job_counts"]);
		expect(a.job_type).toEqual({
			id: ids.a,
			name: "alpha",
			version: "1.0",
			title: "Alpha",
			description: null,
			category: "test",
			author_name: null,
			author_url: null,
			is_system: false,
			is_long_running: false,
			is_active: true,
			is_operational: true,
			is_paused: false,
			icon_code: "f013"
		});
		expect(Object.keys(a.job_type)).toEqual(JOB_TYPE_FIELDS);
		expect(a.job_counts).toEqual([
			{ status: "COMPLETED", count: 2, most_recent: t(1), category: null },
			{ status: "FAILED", count: 1, most_recent: t(1 / 3), category: "ALGORITHM" },
			{ status: "FAILED", count: 1, most_recent: t(0.5), category: "SYSTEM" },
			{ status: "RUNNING", count: 2, most_recent: t(1), category: null }
		]);
		expect(byType(body, ids.b).job_counts).toEqual([
			{ status: "FAILED", count: 1, most_recent: t(2), category: "DATA" },
			{ status: "RUNNING", count: 1, most_recent: t(72), category: null }
		]);
		expect(byType(body, ids.c).job_counts).toEqual([]);
	});

	test("the web UI's call, ?started=PT3H, answers as the default", async () => {
		const [byDefault, ui] = await Promise.all([
			get("/job-types/status/"),
			get("/job-types/status/?started=PT3H")
		]);
		expect(byType(ui, ids.a).job_counts).toEqual(byType(byDefault, ids.a).job_counts);
		expect(byType(ui, ids.b).job_counts).toEqual(byType(byDefault, ids.b).job_counts);
		expect(ui.count).toBe(byDefault.count);
	});

	test("a longer duration, and a range of datetimes", async () => {
		const long = await get("/job-types/status/?started=PT12H");
		expect(byType(long, ids.a).job_counts).toEqual([
			{ status: "COMPLETED", count: 3, most_recent: t(1), category: null },
			{ status: "FAILED", count: 1, most_recent: t(1 / 3), category: "ALGORITHM" },
			{ status: "FAILED", count: 2, most_recent: t(0.5), category: "SYSTEM" },
			{ status: "QUEUED", count: 1, most_recent: t(4), category: null },
			{ status: "RUNNING", count: 2, most_recent: t(1), category: null }
		]);
		const range = await get(`/job-types/status/?started=${t(6)}&ended=${t(1.5)}`);
		expect(byType(range, ids.a).job_counts).toEqual([
			{ status: "COMPLETED", count: 2, most_recent: t(2), category: null },
			{ status: "QUEUED", count: 1, most_recent: t(4), category: null },
			{ status: "RUNNING", count: 2, most_recent: t(1), category: null }
		]);
		expect(byType(range, ids.b).job_counts).toEqual([
			{ status: "FAILED", count: 1, most_recent: t(2), category: "DATA" },
			{ status: "RUNNING", count: 1, most_recent: t(72), category: null }
		]);
	});

	test("pages over the job types, keeping the query in its links", async () => {
		const total = (await get("/job-types/status/")).count;
		const first = await get("/job-types/status/?page_size=2&started=PT12H");
		expect(first.count).toBe(total);
		expect(first.results.map((r: any) => r.job_type.id)).toEqual([ids.a, ids.b]);
		expect(first.previous).toBeNull();
		expect(first.next).toMatch(/\/api\/job-types\/status\/\?page_size=2&started=PT12H&page=2$/);
		const second = await get("/job-types/status/?page_size=2&started=PT12H&page=2");
		expect(second.results[0].job_type.id).toBe(ids.c);
		expect(second.results[0].job_counts).toEqual([]);
		expect(second.previous).toMatch(/page=1$/);
		const past = await get("/job-types/status/?page=99");
		expect(past.count).toBe(total);
		expect(past.results).toEqual([]);
	});

	test("a bad started or ended is a 400 naming it", async () => {
		expectJsonError(
			await request("GET", `${api}/job-types/status/?started=yesterday`),
			400,
			/^started: /
		);
		expectJsonError(
			await request("GET", `${api}/job-types/status/?ended=2024-01-01`),
			400,
			/^ended: .*no timezone/
		);
		expectJsonError(
			await request("GET", `${api}/job-types/status/?started=PT1H&ended=PT2H`),
			400,
			/^started: must be before ended/
		);
		expectJsonError(
			await request("GET", `${api}/job-types/status/?page_size=0`),
			400,
			/page_size/
		);
	});
});

describe("GET /job-types/running/", () => {
	test("per type with RUNNING jobs, their count and the earliest start, longest first", async () => {
		const body = await get("/job-types/running/");
		expect(body).toEqual({
			count: 2,
			next: null,
			previous: null,
			results: [
				{ job_type: expect.any(Object), count: 1, longest_running: t(72) },
				{ job_type: expect.any(Object), count: 2, longest_running: t(48) }
			]
		});
		expect(body.results.map((r: any) => r.job_type.id)).toEqual([ids.b, ids.a]);
		expect(Object.keys(body.results[0])).toEqual(["job_type", "count", "longest_running"]);
		expect(Object.keys(body.results[0].job_type)).toEqual(JOB_TYPE_FIELDS);
		expect(body.results[0].job_type.name).toBe("beta");
	});

	test("the web UI's call: its own pageNumber and pageSize are ignored", async () => {
		expect(await get("/job-types/running/?pageNumber=0&pageSize=25")).toEqual(
			await get("/job-types/running/")
		);
	});

	test("pages", async () => {
		const first = await get("/job-types/running/?page_size=1");
		expect(first.count).toBe(2);
		expect(first.results.map((r: any) => r.job_type.id)).toEqual([ids.b]);
		expect(first.next).toMatch(/\/api\/job-types\/running\/\?page_size=1&page=2$/);
		const second = await get("/job-types/running/?page_size=1&page=2");
		expect(second.results.map((r: any) => r.job_type.id)).toEqual([ids.a]);
		expect(second.next).toBeNull();
		expect(second.previous).toMatch(/page=1$/);
		const past = await get("/job-types/running/?page=3&page_size=1");
		expect(past).toMatchObject({ count: 2, next: null, results: [] });
	});
});

describe("GET /job-types/system-failures/", () => {
	test("per type and SYSTEM error of FAILED jobs: count, first and last, latest first", async () => {
		const body = await get("/job-types/system-failures/");
		expect(body.count).toBe(2);
		expect(body.next).toBeNull();
		const [a, b] = body.results;
		expect(Object.keys(a)).toEqual(["job_type", "error", "count", "first_error", "last_error"]);
		expect(a.job_type.id).toBe(ids.a);
		expect(Object.keys(a.job_type)).toEqual(JOB_TYPE_FIELDS);
		expect(a.error).toEqual({
			id: ids.sys1,
			name: "sys-one",
			title: "System One",
			description: "The first system error",
			category: "SYSTEM",
			is_builtin: false,
			created: expect.stringMatching(/Z$/),
			last_modified: expect.stringMatching(/Z$/)
		});
		expect(a).toMatchObject({ count: 2, first_error: t(10), last_error: t(0.5) });
		expect(b.job_type.id).toBe(ids.b);
		expect(b.error.id).toBe(ids.sys2);
		expect(b).toMatchObject({ count: 1, first_error: t(24), last_error: t(24) });
	});

	test("pages", async () => {
		const first = await get("/job-types/system-failures/?page_size=1");
		expect(first.count).toBe(2);
		expect(first.results[0].error.id).toBe(ids.sys1);
		expect(first.next).toMatch(/\/api\/job-types\/system-failures\/\?page_size=1&page=2$/);
		const second = await get("/job-types/system-failures/?page_size=1&page=2");
		expect(second.results[0].error.id).toBe(ids.sys2);
		expect(second.next).toBeNull();
		expect((await get("/job-types/system-failures/?page=2")).results).toEqual([]);
	});
});

describe("system failures counted as jobs change (migration 0013)", () => {
	const failures = async () =>
		(await get("/job-types/system-failures/")).results.map((r: any) => [
			r.job_type.id,
			r.error.id,
			r.count,
			r.first_error,
			r.last_error
		]);

	test("a requeue, a new failure, a changed error and a deleted job move the counts; a fold keeps them", async () => {
		const before = await failures();
		expect(before).toEqual([
			[ids.a, ids.sys1, 2, t(10), t(0.5)],
			[ids.b, ids.sys2, 1, t(24), t(24)]
		]);
		const [{ id: oldest }] = await query<{ id: number }>(
			`SELECT id FROM job WHERE job_type_id = $1 AND error_id = $2 AND status = 'FAILED'
			 ORDER BY last_status_change LIMIT 1`,
			[ids.a, ids.sys1]
		);
		// requeued: no longer a failure, and the first error is the next one
		await query(`UPDATE job SET status = 'QUEUED' WHERE id = $1`, [oldest]);
		expect((await failures())[0]).toEqual([ids.a, ids.sys1, 1, t(0.5), t(0.5)]);
		// failed again later, with the other SYSTEM error
		await query(
			`UPDATE job SET status = 'FAILED', error_id = $2, last_status_change = $3 WHERE id = $1`,
			[oldest, ids.sys2, t(0.1)]
		);
		expect(await failures()).toEqual([
			[ids.a, ids.sys2, 1, t(0.1), t(0.1)],
			[ids.a, ids.sys1, 1, t(0.5), t(0.5)],
			[ids.b, ids.sys2, 1, t(24), t(24)]
		]);
		// an error that is not SYSTEM any more: not a system failure
		await query(`UPDATE job SET error_id = $2 WHERE id = $1`, [oldest, ids.alg]);
		expect(await failures()).toEqual([
			[ids.a, ids.sys1, 1, t(0.5), t(0.5)],
			[ids.b, ids.sys2, 1, t(24), t(24)]
		]);
		const [{ n: deltas }] = await query<{ n: number }>(
			`SELECT count(*)::int AS n FROM failed_job_delta`
		);
		expect(deltas).toBeGreaterThan(0);
		const folded = await foldFailedJobDeltas(tdb.db);
		expect(folded).toBe(deltas);
		expect(await query(`SELECT * FROM failed_job_delta`)).toEqual([]);
		expect(await failures()).toEqual([
			[ids.a, ids.sys1, 1, t(0.5), t(0.5)],
			[ids.b, ids.sys2, 1, t(24), t(24)]
		]);
		// deleted: gone from the counts (its type's only SYSTEM failure)
		const [{ id: bFailure }] = await query<{ id: number }>(
			`SELECT id FROM job WHERE job_type_id = $1 AND error_id = $2`,
			[ids.b, ids.sys2]
		);
		await query(`DELETE FROM job WHERE id = $1`, [bFailure]);
		expect(await failures()).toEqual([[ids.a, ids.sys1, 1, t(0.5), t(0.5)]]);
		await foldFailedJobDeltas(tdb.db);
		expect(await query(`SELECT * FROM failed_job_count WHERE count = 0`)).toEqual([]);
		// what is kept is what the jobs say, times included
		expect(
			await query(
				`SELECT first_error, last_error FROM failed_job_count
				 WHERE job_type_id = $1 AND error_id = $2`,
				[ids.a, ids.sys1]
			)
		).toEqual([{ first_error: new Date(t(0.5)), last_error: new Date(t(0.5)) }]);
		// a fold with nothing to fold writes nothing: the kept answer stays good
		const countsGeneration = `SELECT generation FROM list_generation WHERE name = 'failed_job_count'`;
		const [unfolded] = await query(countsGeneration);
		expect(await foldFailedJobDeltas(tdb.db)).toBe(0);
		expect(await query(countsGeneration)).toEqual([unfolded]);
		expect(await failures()).toEqual([[ids.a, ids.sys1, 1, t(0.5), t(0.5)]]);
	});

	test("the migration counts the FAILED jobs already there", async () => {
		const shown = await failures();
		const qi = tdb.db.getQueryInterface();
		// 0014 depends on 0013's table: undone first, done again after
		await generation.down({ context: qi, name: "0014", path: "" });
		await migration.down({ context: qi, name: "0013", path: "" });
		await migration.up({ context: qi, name: "0013", path: "" });
		await generation.up({ context: qi, name: "0014", path: "" });
		expect(await query(`SELECT * FROM failed_job_delta`)).toEqual([]);
		const counted = `SELECT job_type_id, error_id, count::int, first_error, last_error FROM failed_job_count
			ORDER BY job_type_id, error_id`;
		const grouped = `SELECT job_type_id, error_id, count(*)::int AS count,
			min(last_status_change) AS first_error, max(last_status_change) AS last_error FROM job
			WHERE status = 'FAILED' AND error_id IS NOT NULL GROUP BY job_type_id, error_id
			ORDER BY job_type_id, error_id`;
		expect((await query(counted)).length).toBeGreaterThan(0);
		expect(await query(counted)).toEqual(await query(grouped));
		expect(await failures()).toEqual(shown);
	});

	test("a reader folds the deltas once they pass FOLD_DELTAS", async () => {
		const [event] = await query<{ id: number }>(
			`INSERT INTO trigger_event (type) VALUES ('TEST') RETURNING id`
		);
		await query(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, error_id, priority,
				timeout, max_tries, data, last_status_change)
			 SELECT $1, (SELECT id FROM job_type_rev WHERE job_type_id = $1), $2, 'FAILED', $3, 5, 0,
				1, '{}', $4
			 FROM generate_series(1, $5::int)`,
			[ids.c, event.id, ids.sys2, t(3), FOLD_DELTAS + 1]
		);
		const body = await get("/job-types/system-failures/");
		expect(body.results[1]).toMatchObject({
			job_type: { id: ids.c },
			error: { id: ids.sys2 },
			count: FOLD_DELTAS + 1
		});
		expect(await query(`SELECT * FROM failed_job_delta`)).toEqual([]);
		expect(
			await query(`SELECT count FROM failed_job_count WHERE job_type_id = $1`, [ids.c])
		).toEqual([{ count: FOLD_DELTAS + 1 }]);
		expect((await get("/job-types/system-failures/")).results[1].count).toBe(FOLD_DELTAS + 1);
		await query(`DELETE FROM job WHERE job_type_id = $1`, [ids.c]);
	});
});

describe("job types and errors shown as they are now", () => {
	test("an edited job type or error shows at the next request of each report", async () => {
		const status = async () => byType(await get("/job-types/status/"), ids.a).job_type;
		const failure = async () =>
			(await get("/job-types/system-failures/")).results.find(
				(r: any) => r.job_type.id === ids.a
			);
		expect((await status()).title).toBe("Alpha");
		expect((await failure()).error.title).toBe("System One");
		await query(`UPDATE job_type SET title = 'Alpha Two', icon_code = 'f014' WHERE id = $1`, [
			ids.a
		]);
		await query(`UPDATE error SET title = 'System Uno' WHERE id = $1`, [ids.sys1]);
		expect(await status()).toMatchObject({ title: "Alpha Two", icon_code: "f014" });
		expect(await failure()).toMatchObject({
			job_type: { title: "Alpha Two" },
			error: { title: "System Uno" }
		});
		// a new job type is listed at once
		const added = await addFileJobType(tdb.db, "delta", { title: "Delta" });
		const listed = (await get("/job-types/status/?page_size=1000")).results.map(
			(r: any) => r.job_type.id
		);
		expect(listed).toContain(added);
		await query(`UPDATE job_type SET title = 'Alpha', icon_code = 'f013' WHERE id = $1`, [
			ids.a
		]);
		await query(`UPDATE error SET title = 'System One' WHERE id = $1`, [ids.sys1]);
	});

	test("broker callers get the envelopes as objects", async () => {
		const body: any = await app.broker.call("job-type-reports.systemFailures", {});
		expect(body.results[0].job_type.id).toBe(ids.a);
		const status: any = await app.broker.call("job-type-reports.status", {});
		expect(byType(status, ids.a).job_type.name).toBe("alpha");
	});
});

describe("the id route beside the reports", () => {
	test("/job-types/{id}/ still answers the job type; the reports answer without a slash too", async () => {
		const details = await get(`/job-types/${ids.a}/`);
		expect(details.id).toBe(ids.a);
		expect(details.name).toBe("alpha");
		for (const report of ["status", "running", "system-failures"]) {
			const body = await get(`/job-types/${report}`);
			expect(Object.keys(body)).toEqual(["count", "next", "previous", "results"]);
		}
		expectJsonError(await request("GET", `${api}/job-types/nonsense/`), 404);
	});
});
