import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { addFileJobType } from "../helpers/completion";
import { computeDailyMetrics } from "../../lib/metrics/compute";
import { FieldError } from "../../lib/errors";
import { transaction } from "../../lib/db/run";

/**
 * Daily metrics (lib/metrics/compute.ts) over real PostgreSQL, on jobs, executions and ingests
 * inserted here with the answers worked out by hand. The day is 2024-03-10 (UTC).
 */

let tdb: TestDatabase;
const DAY = "2024-03-10";
const ids: Record<string, number> = {};

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind }).catch(e => {
		throw new Error(`${e.message} ${e.parent?.message}`);
	});
	return rows as T[];
}

/** A time of the day (or of another, given as a full timestamp). */
const at = (t: string | null) => (t === null ? null : t.includes("T") ? t : `${DAY}T${t}Z`);

async function addError(name: string, category: string, builtin: boolean): Promise<number> {
	const [row] = await query<{ id: number }>(
		`INSERT INTO error (name, title, category, is_builtin) VALUES ($1, $1, $2, $3) RETURNING id`,
		[name, category, builtin]
	);
	return row.id;
}

async function addJob(
	typeId: number,
	status: string,
	ended: string | null,
	errorId: number | null = null
): Promise<number> {
	const [row] = await query<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, error_id, status, priority,
			timeout, max_tries, data, ended)
		 SELECT $1, r.id, $2, $3, $4, 1, 0, 3, '{}', $5
		 FROM job_type_rev r WHERE r.job_type_id = $1 RETURNING id`,
		[typeId, ids.event, errorId, status, at(ended)]
	);
	return row.id;
}

interface Exe {
	status: string;
	errorId?: number;
	queued: string;
	started?: string;
	ended?: string;
	pre?: [string, string];
	job?: [string, string];
	post?: [string, string];
}

async function addExe(jobId: number, e: Exe): Promise<void> {
	await query(
		`INSERT INTO job_exe (job_id, job_type_id, status, error_id, timeout, queued, started,
			ended, pre_started, pre_completed, job_started, job_completed, post_started,
			post_completed)
		 SELECT $1, j.job_type_id, $2, $3, 0, $4, $5, $6, $7, $8, $9, $10, $11, $12
		 FROM job j WHERE j.id = $1`,
		[
			jobId,
			e.status,
			e.errorId ?? null,
			at(e.queued),
			at(e.started ?? null),
			at(e.ended ?? null),
			at(e.pre?.[0] ?? null),
			at(e.pre?.[1] ?? null),
			at(e.job?.[0] ?? null),
			at(e.job?.[1] ?? null),
			at(e.post?.[0] ?? null),
			at(e.post?.[1] ?? null)
		]
	);
}

async function addIngest(
	strikeId: number,
	name: string,
	status: string,
	size: number,
	transfer: [string, string | null],
	ingest: [string, string] | null
): Promise<void> {
	await query(
		`INSERT INTO ingest (file_name, strike_id, status, file_size, transfer_started,
			transfer_ended, ingest_started, ingest_ended)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		[
			name,
			strikeId,
			status,
			size,
			at(transfer[0]),
			at(transfer[1]),
			at(ingest?.[0] ?? null),
			at(ingest?.[1] ?? null)
		]
	);
}

async function allRows() {
	return {
		jobTypes: await query(`SELECT * FROM metrics_job_type ORDER BY occurred, job_type_id`),
		ingests: await query(`SELECT * FROM metrics_ingest ORDER BY occurred, strike_id`),
		errors: await query(`SELECT * FROM metrics_error ORDER BY occurred, error_id`)
	};
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	ids.a = await addFileJobType(tdb.db, "metrics-a");
	ids.b = await addFileJobType(tdb.db, "metrics-b");
	ids.c = await addFileJobType(tdb.db, "metrics-c");
	ids.system = await addError("m-system", "SYSTEM", true);
	ids.algorithm = await addError("m-algorithm", "ALGORITHM", true);
	ids.data = await addError("m-data", "DATA", true);
	ids.custom = await addError("m-custom", "DATA", false);
	[{ id: ids.event }] = await query<{ id: number }>(
		`INSERT INTO trigger_event (type) VALUES ('TEST') RETURNING id`
	);

	// type a: two completed (times below), failed SYSTEM and ALGORITHM, one canceled
	const a1 = await addJob(ids.a, "COMPLETED", "09:06:00");
	// queue 30, pre 20, job 240, post 10, run 330, stage 60
	await addExe(a1, {
		status: "COMPLETED",
		queued: "09:00:00",
		started: "09:00:30",
		pre: ["09:00:40", "09:01:00"],
		job: ["09:01:00", "09:05:00"],
		post: ["09:05:00", "09:05:10"],
		ended: "09:06:00"
	});
	const a2 = await addJob(ids.a, "COMPLETED", "11:04:00.5");
	// queue 90, pre 10, job 100, no post, run 150.5, stage 40.5
	await addExe(a2, {
		status: "COMPLETED",
		queued: "11:00:00",
		started: "11:01:30",
		pre: ["11:01:30", "11:01:40"],
		job: ["11:01:40", "11:03:20"],
		ended: "11:04:00.5"
	});
	const a3 = await addJob(ids.a, "FAILED", "12:00:00", ids.system);
	// an earlier try failed the day before: not in the day's error counts
	await addExe(a3, {
		status: "FAILED",
		errorId: ids.system,
		queued: "2024-03-09T20:00:00Z",
		started: "2024-03-09T20:00:01Z",
		ended: "2024-03-09T20:00:02Z"
	});
	await addExe(a3, {
		status: "FAILED",
		errorId: ids.system,
		queued: "11:59:00",
		started: "11:59:10",
		ended: "12:00:00"
	});
	const a4 = await addJob(ids.a, "FAILED", "13:00:00", ids.algorithm);
	await addExe(a4, {
		status: "FAILED",
		errorId: ids.algorithm,
		queued: "12:59:00",
		started: "12:59:10",
		ended: "13:00:00"
	});
	await addJob(ids.a, "CANCELED", "14:00:00");
	// outside the day or unfinished: ignored
	const a6 = await addJob(ids.a, "COMPLETED", "2024-03-09T23:59:59.999Z");
	await addExe(a6, {
		status: "COMPLETED",
		queued: "2024-03-09T23:00:00Z",
		started: "2024-03-09T23:00:01Z",
		ended: "2024-03-09T23:59:59.999Z"
	});
	await addJob(ids.a, "RUNNING", null);

	// type b: failed DATA at the day's first instant, failed with a custom (non-builtin) DATA error
	const b1 = await addJob(ids.b, "FAILED", "00:00:00", ids.data);
	await addExe(b1, {
		status: "FAILED",
		errorId: ids.data,
		queued: "2024-03-09T23:50:00Z",
		started: "2024-03-09T23:55:00Z",
		ended: "00:00:00"
	});
	const b2 = await addJob(ids.b, "FAILED", "23:59:59.999", ids.custom);
	await addExe(b2, {
		status: "FAILED",
		errorId: ids.custom,
		queued: "23:00:00",
		started: "23:00:01",
		ended: "23:59:59.999"
	});
	const b3 = await addJob(ids.b, "COMPLETED", "2024-03-11T00:00:00Z");
	await addExe(b3, {
		status: "COMPLETED",
		queued: "23:00:00",
		started: "23:00:01",
		ended: "2024-03-11T00:00:00Z"
	});

	const strikes = await query<{ id: number }>(
		`INSERT INTO strike (name, configuration) VALUES ('s1', '{}'), ('s2', '{}') RETURNING id`
	);
	[ids.s1, ids.s2] = strikes.map(s => s.id);
	await addIngest(
		ids.s1,
		"a",
		"INGESTED",
		100,
		["08:00:00", "08:00:10"],
		["08:01:00", "08:01:30"]
	);
	await addIngest(
		ids.s1,
		"b",
		"INGESTED",
		300,
		["09:00:00", "09:00:30"],
		["09:01:00", "09:02:00"]
	);
	// set aside before ingesting: no ingest_ended, ended when transferred
	await addIngest(ids.s1, "c", "DEFERRED", 0, ["10:00:00", "10:00:05"], null);
	await addIngest(ids.s1, "d", "ERRORED", 200, ["11:00:00", "11:00:20"], null);
	await addIngest(ids.s1, "e", "DUPLICATE", 400, ["12:00:00", "12:00:15"], null);
	await addIngest(ids.s1, "f", "TRANSFERRING", 50, ["13:00:00", null], null);
	await addIngest(
		ids.s2,
		"g",
		"INGESTED",
		10,
		["2024-03-09T08:00:00Z", "2024-03-09T08:00:10Z"],
		["2024-03-09T08:01:00Z", "2024-03-09T08:01:30Z"]
	);

	// left from an earlier computation: type c's row of the day goes, another day's stays
	await query(
		`INSERT INTO metrics_job_type (job_type_id, occurred, total_count)
		 VALUES ($1, $2, 7), ($1, '2024-03-09', 9)`,
		[ids.c, DAY]
	);
}, 120000);

afterAll(async () => {
	await tdb?.drop();
});

describe("computeDailyMetrics", () => {
	let first: Awaited<ReturnType<typeof allRows>>;

	it("writes a row per job type, strike and error of the day", async () => {
		const written = await computeDailyMetrics(tdb.db, DAY);
		expect(written).toEqual({ jobTypes: 2, ingests: 1, errors: 3 });
		first = await allRows();
	});

	it("counts the day's finished jobs per type and error category, with execution times", () => {
		const day = first.jobTypes.filter(r => r.occurred === DAY);
		const a = day.find(r => r.job_type_id === ids.a);
		expect(a).toMatchObject({
			completed_count: 2,
			failed_count: 2,
			canceled_count: 1,
			total_count: 5,
			error_system_count: 1,
			error_data_count: 0,
			error_algorithm_count: 1,
			queue_time_sum: 120,
			queue_time_min: 30,
			queue_time_max: 90,
			queue_time_avg: 60,
			pre_time_sum: 30,
			pre_time_min: 10,
			pre_time_max: 20,
			pre_time_avg: 15,
			job_time_sum: 340,
			job_time_min: 100,
			job_time_max: 240,
			job_time_avg: 170,
			post_time_sum: 10,
			post_time_min: 10,
			post_time_max: 10,
			post_time_avg: 10,
			run_time_sum: 480,
			run_time_min: 150,
			run_time_max: 330,
			run_time_avg: 240,
			stage_time_sum: 100,
			stage_time_min: 40,
			stage_time_max: 60,
			stage_time_avg: 50
		});
		const b = day.find(r => r.job_type_id === ids.b);
		expect(b).toMatchObject({
			completed_count: 0,
			failed_count: 2,
			canceled_count: 0,
			total_count: 2,
			error_system_count: 0,
			error_data_count: 2,
			error_algorithm_count: 0,
			queue_time_sum: null,
			run_time_avg: null,
			stage_time_max: null
		});
		// type c's stale row of the day is gone; another day's row is untouched
		expect(day.map(r => r.job_type_id).sort()).toEqual([ids.a, ids.b].sort());
		expect(first.jobTypes.filter(r => r.occurred !== DAY)).toEqual([
			expect.objectContaining({ job_type_id: ids.c, occurred: "2024-03-09", total_count: 9 })
		]);
	});

	it("counts the day's ended ingests per strike, with sizes and times", () => {
		expect(first.ingests).toEqual([
			expect.objectContaining({
				strike_id: ids.s1,
				occurred: DAY,
				deferred_count: 1,
				ingested_count: 2,
				errored_count: 1,
				duplicate_count: 1,
				total_count: 5,
				file_size_sum: "1000",
				file_size_min: "100",
				file_size_max: "400",
				file_size_avg: "250",
				transfer_time_sum: 80,
				transfer_time_min: 5,
				transfer_time_max: 30,
				transfer_time_avg: 16,
				ingest_time_sum: 90,
				ingest_time_min: 30,
				ingest_time_max: 60,
				ingest_time_avg: 45
			})
		]);
	});

	it("counts the day's executions per built-in error", () => {
		const counts = Object.fromEntries(first.errors.map(r => [r.error_id, r.total_count]));
		expect(counts).toEqual({ [ids.system]: 1, [ids.algorithm]: 1, [ids.data]: 1 });
		expect(first.errors.every(r => r.occurred === DAY)).toBe(true);
	});

	it("gives identical rows when computed again, in a caller's transaction", async () => {
		const written = await transaction(tdb.db, t => computeDailyMetrics(tdb.db, DAY, t));
		expect(written).toEqual({ jobTypes: 2, ingests: 1, errors: 3 });
		expect(await allRows()).toEqual(first);
	});

	it("writes nothing for a day without data", async () => {
		expect(await computeDailyMetrics(tdb.db, "2024-02-29")).toEqual({
			jobTypes: 0,
			ingests: 0,
			errors: 0
		});
		expect(await allRows()).toEqual(first);
	});

	it.each(["2024-02-30", "2023-02-29", "2024-3-10", "2024-03-10T00:00:00Z", "", "0000-01-01"])(
		"refuses the day %p with a FieldError naming day",
		async day => {
			const error = await computeDailyMetrics(tdb.db, day).catch(e => e);
			expect(error).toBeInstanceOf(FieldError);
			expect(error.data).toMatchObject({ field: "day" });
			expect(error.message).toMatch(/^day:/);
		}
	);
});
