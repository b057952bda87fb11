import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi, expectJsonError } from "../helpers/broker";

/**
 * Metrics over real HTTP and PostgreSQL: the types, a type's details with its choices, and plot
 * data for one, several and no choices, by column and group, on daily rows inserted here with
 * the answers worked out by hand; and the call Scale 3.0's web UI makes for failure rates.
 */

let tdb: TestDatabase;
let app: TestApi;
let api: string;
const ids = { a: 0, b: 0, c: 0, strike: 0, error: 0 };
let others: number[] = [];

async function query<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	const [rows] = await tdb.db.query(sql, { bind });
	return rows as T[];
}

async function get(pathAndQuery: string): Promise<any> {
	const reply = await request("GET", `${api}${pathAndQuery}`);
	if (reply.status !== 200) throw new Error(`GET ${pathAndQuery}: ${reply.status} ${reply.text}`);
	return reply.body;
}

const day = (offset: number) => new Date(Date.now() + offset * 86400000).toISOString().slice(0, 10);

beforeAll(async () => {
	tdb = await createTestDatabase();
	const types = await query<{ id: number }>(
		`INSERT INTO job_type (name, version, title, category, interface) VALUES
			('jt-a', '1.0', 'A', 'test', '{}'), ('jt-b', '2.0', 'B', 'test', '{}'),
			('jt-c', '1.0', 'C', 'test', '{}')
		 RETURNING id`
	);
	[ids.a, ids.b, ids.c] = types.map(t => t.id);
	others = (
		await query<{ id: number }>(
			`INSERT INTO job_type (name, version, category, interface)
			 SELECT 'jt-x' || n, '1.0', 'test', '{}' FROM generate_series(1, 57) n RETURNING id`
		)
	).map(r => r.id);
	[{ id: ids.strike }] = await query<{ id: number }>(
		`INSERT INTO strike (name, title, description, configuration)
		 VALUES ('feed', 'Feed', 'A feed', '{}') RETURNING id`
	);
	[{ id: ids.error }] = await query<{ id: number }>(
		`INSERT INTO error (name, title, category, is_builtin) VALUES ('boom', 'Boom', 'SYSTEM', true)
		 RETURNING id`
	);
	// job type, day, completed, failed, total, system, data, algorithm, run min, run avg
	const rows: [number, string, ...(number | null)[]][] = [
		[ids.a, "2024-01-01", 2, 1, 3, 1, 0, 0, 10, 30],
		[ids.a, "2024-01-02", 4, 0, 4, 0, 0, 0, 5, 20],
		[ids.b, "2024-01-01", 1, 2, 3, 0, 1, 1, 7, 11],
		[ids.b, "2024-01-03", 5, 0, 5, 0, 0, 0, null, null],
		[ids.a, day(-1), 1, 3, 4, 1, 1, 1, 1, 1],
		[ids.a, day(0), 2, 0, 2, 0, 0, 0, 1, 1],
		[ids.b, day(0), 0, 1, 1, 1, 0, 0, 1, 1]
	];
	for (const row of rows) {
		await query(
			`INSERT INTO metrics_job_type (job_type_id, occurred, completed_count, failed_count,
				total_count, error_system_count, error_data_count, error_algorithm_count,
				run_time_min, run_time_avg)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			row
		);
	}
	await query(
		`INSERT INTO metrics_ingest (strike_id, occurred, ingested_count, total_count, file_size_sum)
		 VALUES ($1, '2024-01-01', 3, 4, 5000000000)`,
		[ids.strike]
	);
	await query(
		`INSERT INTO metrics_error (error_id, occurred, total_count) VALUES ($1, '2024-01-02', 7)`,
		[ids.error]
	);
	app = await startServices(tdb.url, ["api", "metrics"]);
	api = app.api;
}, 120000);

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

const RANGE = "started=2024-01-01T00:00:00Z&ended=2024-01-31T00:00:00Z";

describe("GET /metrics/", () => {
	it("lists the three types with filters, groups and columns", async () => {
		const body = await get("/metrics/");
		expect(body.count).toBe(3);
		expect(body.next).toBeNull();
		expect(body.results.map((t: any) => t.name).sort()).toEqual([
			"errors",
			"ingests",
			"job-types"
		]);
		const jobTypes = body.results.find((t: any) => t.name === "job-types");
		expect(jobTypes.title).toBe("Job Types");
		expect(jobTypes.description).toBe("Metrics for jobs and executions grouped by job type.");
		expect(jobTypes.filters).toEqual([
			{ param: "name", type: "string" },
			{ param: "version", type: "string" }
		]);
		expect(jobTypes.groups).toHaveLength(8);
		expect(jobTypes.groups[0]).toEqual({
			name: "overview",
			title: "Overview",
			description: "Overall counts based on job status."
		});
		expect(jobTypes.columns).toHaveLength(31);
		expect(jobTypes.columns[0]).toEqual({
			name: "completed_count",
			title: "Completed Count",
			description: "Number of successfully completed jobs.",
			units: "count",
			group: "overview",
			aggregate: "sum"
		});
		expect(jobTypes.columns).toContainEqual({
			name: "run_time_min",
			title: "Run Time (Min)",
			description: "Minimum time spent running the pre, job, and post tasks.",
			units: "seconds",
			group: "run_time",
			aggregate: "min"
		});
		expect(jobTypes).not.toHaveProperty("choices");
		const ingests = body.results.find((t: any) => t.name === "ingests");
		expect(ingests.columns).toHaveLength(17);
		const errors = body.results.find((t: any) => t.name === "errors");
		expect(errors.columns.map((c: any) => c.name)).toEqual(["total_count"]);
	});

	it("pages", async () => {
		const body = await get("/metrics/?page_size=2&page=2");
		expect(body.count).toBe(3);
		expect(body.results).toHaveLength(1);
		expect(body.previous).toMatch(/\/metrics\/\?page_size=2&page=1$/);
	});
});

describe("GET /metrics/{name}/", () => {
	it("answers every job type as a choice, with the type's groups", async () => {
		const body = await get("/metrics/job-types/");
		expect(body.name).toBe("job-types");
		expect(body.groups).toHaveLength(8);
		expect(body.groups[0]).toEqual({
			name: "overview",
			title: "Overview",
			description: "Overall counts based on job status."
		});
		expect(body.columns).toHaveLength(31);
		const all = await query<{ id: number }>(`SELECT id FROM job_type ORDER BY id`);
		// jt-c and the 57 others have no metrics rows: choices all the same, as in Scale 3.0
		expect(body.choices.map((c: any) => c.id)).toEqual(all.map(r => r.id));
		expect(body.choices.map((c: any) => c.id)).toEqual(
			expect.arrayContaining([ids.c, ...others])
		);
		expect(body.choices.find((c: any) => c.id === ids.a)).toEqual({
			id: ids.a,
			name: "jt-a",
			version: "1.0",
			title: "A",
			description: null,
			category: "test",
			author_name: null,
			author_url: null,
			is_system: false,
			is_long_running: false,
			is_active: true,
			is_operational: true,
			is_paused: false,
			icon_code: null
		});
	});

	it("answers every strike and every built-in error as choices", async () => {
		const ingests = await get("/metrics/ingests/");
		expect(ingests.choices).toEqual([
			{ id: ids.strike, name: "feed", title: "Feed", description: "A feed", job: null }
		]);
		expect(ingests.groups.map((g: any) => g.name)).toEqual(
			expect.arrayContaining([...new Set(ingests.columns.map((c: any) => c.group))])
		);
		const errors = await get("/metrics/errors/");
		const builtin = await query<{ id: number }>(
			`SELECT id FROM error WHERE is_builtin ORDER BY id`
		);
		expect(builtin.length).toBeGreaterThan(1);
		expect(errors.choices.map((c: any) => c.id)).toEqual(builtin.map(r => r.id));
		expect(errors.choices).toContainEqual({
			id: ids.error,
			name: "boom",
			title: "Boom",
			description: null,
			category: "SYSTEM",
			is_builtin: true
		});
		const [{ id: own }] = await query<{ id: number }>(
			`INSERT INTO error (name, title, category) VALUES ('own', 'Own', 'ALGORITHM') RETURNING id`
		);
		expect((await get("/metrics/errors/")).choices.map((c: any) => c.id)).not.toContain(own);
		await query(`DELETE FROM error WHERE id = $1`, [own]);
	});

	it("404s an unknown type", async () => {
		expectJsonError(await request("GET", `${api}/metrics/nope/`), 404);
		expectJsonError(await request("GET", `${api}/metrics/nope/plot-data/`), 404);
	});
});

describe("GET /metrics/{name}/plot-data/", () => {
	it("answers one choice's values oldest first, without ids", async () => {
		const body = await get(
			`/metrics/job-types/plot-data/?${RANGE}&choice_id=${ids.a}&column=total_count`
		);
		expect(body).toEqual({
			count: 1,
			next: null,
			previous: null,
			results: [
				{
					column: expect.objectContaining({ name: "total_count", title: "Total Count" }),
					min_x: "2024-01-01",
					max_x: "2024-01-02",
					min_y: 3,
					max_y: 4,
					values: [
						{ date: "2024-01-01", value: 3 },
						{ date: "2024-01-02", value: 4 }
					]
				}
			]
		});
	});

	it("answers several choices' values with their ids", async () => {
		const body = await get(
			`/metrics/job-types/plot-data/?${RANGE}&choice_id=${ids.a}&choice_id=${ids.b}&column=total_count&column=run_time_min`
		);
		expect(body.count).toBe(2);
		const [total, runMin] = body.results;
		expect(total.column.name).toBe("total_count");
		expect(total.values).toEqual([
			{ id: ids.a, date: "2024-01-01", value: 3 },
			{ id: ids.b, date: "2024-01-01", value: 3 },
			{ id: ids.a, date: "2024-01-02", value: 4 },
			{ id: ids.b, date: "2024-01-03", value: 5 }
		]);
		expect([total.min_x, total.max_x, total.min_y, total.max_y]).toEqual([
			"2024-01-01",
			"2024-01-03",
			3,
			5
		]);
		// a day without a value is left out
		expect(runMin.values).toEqual([
			{ id: ids.a, date: "2024-01-01", value: 10 },
			{ id: ids.b, date: "2024-01-01", value: 7 },
			{ id: ids.a, date: "2024-01-02", value: 5 }
		]);
		expect(runMin.max_x).toBe("2024-01-02");
	});

	it("aggregates across choices by date without a choice filter", async () => {
		const body = await get(
			`/metrics/job-types/plot-data/?${RANGE}&column=total_count&column=run_time_min&column=run_time_avg`
		);
		const [total, runMin, runAvg] = body.results;
		expect(total.values).toEqual([
			{ date: "2024-01-01", value: 6 },
			{ date: "2024-01-02", value: 4 },
			{ date: "2024-01-03", value: 5 }
		]);
		expect(runMin.values).toEqual([
			{ date: "2024-01-01", value: 7 },
			{ date: "2024-01-02", value: 5 }
		]);
		expect(runAvg.values).toEqual([
			{ date: "2024-01-01", value: 20 },
			{ date: "2024-01-02", value: 20 }
		]);
	});

	it("selects a group's columns, and every column without column or group", async () => {
		const body = await get(`/metrics/job-types/plot-data/?${RANGE}&group=errors`);
		expect(body.results.map((r: any) => r.column.name)).toEqual([
			"error_system_count",
			"error_data_count",
			"error_algorithm_count"
		]);
		expect(body.results[0].values).toEqual([
			{ date: "2024-01-01", value: 1 },
			{ date: "2024-01-02", value: 0 },
			{ date: "2024-01-03", value: 0 }
		]);
		const all = await get(`/metrics/job-types/plot-data/?${RANGE}&page_size=10&page=2`);
		expect(all.count).toBe(31);
		expect(all.results).toHaveLength(10);
		expect(all.results[0].column.name).toBe("queue_time_avg");
		expect(all.next).toMatch(/page=3/);
		const empty = all.results[0];
		expect(empty).toMatchObject({
			min_x: null,
			max_x: null,
			min_y: null,
			max_y: null,
			values: []
		});
	});

	it("reads bigint columns as numbers and other types' tables", async () => {
		const ingests = await get(`/metrics/ingests/plot-data/?${RANGE}&column=file_size_sum`);
		expect(ingests.results[0].values).toEqual([{ date: "2024-01-01", value: 5000000000 }]);
		const errors = await get(`/metrics/errors/plot-data/?${RANGE}&choice_id=${ids.error}`);
		expect(errors.results[0].values).toEqual([{ date: "2024-01-02", value: 7 }]);
	});

	it("limits to the range, by UTC day", async () => {
		const body = await get(
			`/metrics/job-types/plot-data/?started=2024-01-02T23:00:00Z&ended=2024-01-03T04:30:00%2B05:00&column=total_count`
		);
		// 04:30+05:00 on the 3rd is 23:30Z on the 2nd
		expect(body.results[0].values).toEqual([{ date: "2024-01-02", value: 4 }]);
	});

	it("answers the call Scale's web UI makes for failure rates", async () => {
		const started = `${day(-30)}T00:00:00.000Z`;
		const ended = `${day(0)}T23:59:59.999Z`;
		const choices = [ids.a, ids.b, ids.c, ...others].map(id => `choice_id=${id}`).join("&");
		expect(others.length + 3).toBe(60);
		const body = await get(
			`/metrics/job-types/plot-data/?${choices}&column=system_error_count&column=algorithm_error_count&column=data_error_count&column=total_count&dataType=job-types&started=${started}&ended=${ended}`
		);
		expect(body.count).toBe(4);
		// in the order asked for: the web UI reads them by position
		expect(body.results.map((r: any) => r.column.name)).toEqual([
			"error_system_count",
			"error_algorithm_count",
			"error_data_count",
			"total_count"
		]);
		expect(body.results[0].values).toEqual([
			{ id: ids.a, date: day(-1), value: 1 },
			{ id: ids.a, date: day(0), value: 0 },
			{ id: ids.b, date: day(0), value: 1 }
		]);
		expect(body.results[3].values).toEqual([
			{ id: ids.a, date: day(-1), value: 4 },
			{ id: ids.a, date: day(0), value: 2 },
			{ id: ids.b, date: day(0), value: 1 }
		]);
	});

	it("400s a choice_id that is no choice, an unknown column or group, and bad times", async () => {
		const plot = (q: string) => request("GET", `${api}/metrics/job-types/plot-data/?${q}`);
		expectJsonError(await plot("choice_id=999999"), 400, /^choice_id: /);
		expectJsonError(await plot(`choice_id=${ids.a}&choice_id=x`), 400, /^choice_id: /);
		expectJsonError(await plot(`choice_id=${ids.strike + 1000}`), 400, /choice_id/);
		expectJsonError(await plot("column=nope"), 400, /^column: unknown column "nope"/);
		expectJsonError(await plot("group=nope"), 400, /^group: unknown group "nope"/);
		expectJsonError(await plot("started=yesterday"), 400, /^started: /);
		expectJsonError(
			await plot("started=2024-02-01T00:00:00Z&ended=2024-01-01T00:00:00Z"),
			400,
			/^started: /
		);
		expectJsonError(await plot("page_size=5000"), 400, /page_size/);
		// an error id is not a choice of ingests
		expectJsonError(
			await request("GET", `${api}/metrics/ingests/plot-data/?choice_id=${ids.error + 500}`),
			400,
			/^choice_id: /
		);
	});
});

describe("plot data kept between requests", () => {
	it("answers anew once its metrics table or its choices change, and the same until then", async () => {
		const url = `/metrics/job-types/plot-data/?${RANGE}&choice_id=${ids.a}&column=total_count`;
		const values = async () => (await get(url)).results[0].values;
		const setFirstDayTotal = (total: number) =>
			query(
				`UPDATE metrics_job_type SET total_count = $2 WHERE job_type_id = $1 AND occurred = '2024-01-01'`,
				[ids.a, total]
			);
		expect(await values()).toEqual([
			{ date: "2024-01-01", value: 3 },
			{ date: "2024-01-02", value: 4 }
		]);
		await setFirstDayTotal(9);
		expect(await values()).toEqual([
			{ date: "2024-01-01", value: 9 },
			{ date: "2024-01-02", value: 4 }
		]);
		await setFirstDayTotal(3);
		expect((await values())[0].value).toBe(3);

		// a choice that goes away is no choice any more, though the answer was kept
		const [{ id: gone }] = await query<{ id: number }>(
			`INSERT INTO job_type (name, version, category, interface) VALUES ('jt-gone', '1.0', 'test', '{}')
			 RETURNING id`
		);
		const byGone = `/metrics/job-types/plot-data/?${RANGE}&choice_id=${gone}&column=total_count`;
		expect((await get(byGone)).results[0].values).toEqual([]);
		await query(`DELETE FROM job_type WHERE id = $1`, [gone]);
		expectJsonError(await request("GET", `${api}${byGone}`), 400, /^choice_id: /);
	});

	it("answers a type's choices anew once a choice is added, changed or removed", async () => {
		const choiceIds = async () =>
			(await get("/metrics/job-types/")).choices.map((c: any) => c.id);
		const before = await choiceIds();
		const [{ id: added }] = await query<{ id: number }>(
			`INSERT INTO job_type (name, version, category, interface) VALUES ('jt-new', '1.0', 'test', '{}')
			 RETURNING id`
		);
		// a new job type is a choice at once, before any of its metrics are computed
		expect(await choiceIds()).toEqual([...before, added]);
		await query(`UPDATE job_type SET title = 'Retitled' WHERE id = $1`, [added]);
		const retitled = (await get("/metrics/job-types/")).choices.find(
			(c: any) => c.id === added
		);
		expect(retitled.title).toBe("Retitled");
		await query(`DELETE FROM job_type WHERE id = $1`, [added]);
		expect(await choiceIds()).toEqual(before);
		const direct: any = await app.broker.call("metrics.get", { name: "job-types" });
		expect(direct.choices.map((c: any) => c.id)).toEqual(before);
	});

	it("answers broker callers the envelope as an object", async () => {
		const body = await app.broker.call("metrics.plotData", {
			name: "job-types",
			choice_id: String(ids.b),
			column: "total_count",
			started: "2024-01-01T00:00:00Z",
			ended: "2024-01-31T00:00:00Z"
		});
		expect(body).toMatchObject({
			count: 1,
			results: [{ min_x: "2024-01-01", max_x: "2024-01-03", min_y: 3, max_y: 5 }]
		});
	});
});

describe("metrics.compute (the action the clock's rule and the REPL use)", () => {
	it("computes a day, answering the rows written, and refuses a day that is not one", async () => {
		const rows = await app.broker.call("metrics.compute", { day: "2031-02-03" });
		// nothing happened that day: nothing written, and the plot data still answers
		expect(rows).toEqual({ jobTypes: 0, ingests: 0, errors: 0 });
		await expect(
			app.broker.call("metrics.compute", { day: "2031-02-30" })
		).rejects.toMatchObject({ type: "BAD_REQUEST", message: expect.stringMatching(/^day: /) });
	});
});

/**
 * Scale 3.0's metrics page (scale-ui/app/modules/metrics), its calls made as the page makes
 * them and its answers read as it reads them: the data types, a type's options (each column's
 * group title looked up in `groups`, each choice labelled title + version), then the plot data
 * for the choices and columns picked, its window the page's absolute timestamps, drawn as the
 * page draws a chart (one series per choice, zero where a day has no value).
 */
describe("Scale 3.0's metrics page", () => {
	const DAY = 86400000;

	/** The chart's series as the page builds them (metricsController.initChart). */
	function draw(
		started: Date,
		ended: Date,
		picked: any[],
		results: any[],
		dataTypeTitle: string
	): Record<string, number[]> {
		const first = Date.UTC(
			started.getUTCFullYear(),
			started.getUTCMonth(),
			started.getUTCDate()
		);
		const days: string[] = [];
		for (let at = first; at <= ended.getTime(); at += DAY) {
			days.push(new Date(at).toISOString().slice(0, 10));
		}
		const series: Record<string, number[]> = {};
		const valuesOn = (values: any[]) =>
			days.map(d => values.find(v => v.date === d)?.value ?? 0);
		for (const result of results) {
			expect(typeof result.column.title).toBe("string");
			if (picked.length === 0) {
				series[`${result.column.title} for all ${dataTypeTitle}`] = valuesOn(result.values);
				continue;
			}
			if (result.values.length === 0) continue;
			for (const choice of picked) {
				// several choices: values carry their id; one: none, all are the choice's
				const values =
					picked.length > 1
						? result.values.filter((v: any) => v.id === choice.id)
						: result.values;
				const label = choice.version ? `${choice.title} ${choice.version}` : choice.title;
				series[`${result.column.name} ${label}`] = valuesOn(values);
			}
		}
		return series;
	}

	it("picks a data source, its metrics and choices, and draws the chart", async () => {
		const types = await get("/metrics/");
		const dataType = types.results.find((t: any) => t.name === "job-types");

		// changeDataTypeSelection -> getDataTypeOptions
		const options = await get(`/metrics/${dataType.name}/`);
		const byGroup = new Map<string, any[]>();
		for (const c of options.columns) byGroup.set(c.group, [...(byGroup.get(c.group) ?? []), c]);
		const groupLabels = [...byGroup.keys()].map(
			name => options.groups.find((g: any) => g.name === name).title
		);
		expect(groupLabels).toContain("Overview");
		const labels = options.choices.map((c: any) =>
			c.version ? `${c.title} ${c.version}` : c.title
		);
		expect(labels).toEqual(expect.arrayContaining(["A 1.0", "B 2.0", "C 1.0"]));

		// addToChart: the last month, as absolute timestamps made at the click
		const ended = new Date();
		const started = new Date(ended.getTime() - 30 * DAY);
		const plot = async (choiceIds: number[], columns: string[]) => {
			const q = new URLSearchParams();
			q.append("started", started.toISOString());
			q.append("ended", ended.toISOString());
			for (const id of choiceIds) q.append("choice_id", String(id));
			for (const c of columns) q.append("column", c);
			q.append("dataType", dataType.name);
			return (await get(`/metrics/${dataType.name}/plot-data/?${q}`)).results;
		};
		const pick = (id: number) => options.choices.find((c: any) => c.id === id);

		const several = await plot([ids.a, ids.b, ids.c], ["total_count", "failed_count"]);
		const chart = draw(
			started,
			ended,
			[pick(ids.a), pick(ids.b), pick(ids.c)],
			several,
			dataType.title
		);
		expect(chart["total_count A 1.0"].slice(-2)).toEqual([4, 2]);
		expect(chart["total_count B 2.0"].slice(-2)).toEqual([0, 1]);
		expect(chart["failed_count A 1.0"].slice(-2)).toEqual([3, 0]);
		// C has no values: a zeroed series all the same, as the page draws every choice picked
		expect(chart["total_count C 1.0"]).toHaveLength(chart["total_count A 1.0"].length);
		expect(new Set(chart["total_count C 1.0"])).toEqual(new Set([0]));

		const one = draw(started, ended, [pick(ids.b)], await plot([ids.b], ["total_count"]), "");
		expect(one["total_count B 2.0"].slice(-2)).toEqual([0, 1]);

		const all = draw(started, ended, [], await plot([], ["total_count"]), dataType.title);
		expect(all["Total Count for all Job Types"].slice(-2)).toEqual([4, 3]);
	});

	it("draws the ingests and errors data sources, all and one choice, as the browser did", async () => {
		// the calls scripts/scale-ui-check.js recorded from the page in Chromium: angular orders
		// the parameters by name, and sends no choice_id for "all"
		await query(
			`INSERT INTO metrics_ingest (strike_id, occurred, ingested_count, total_count, file_size_sum)
			 VALUES ($1, $2, 1, 1, 6)`,
			[ids.strike, day(0)]
		);
		await query(
			`INSERT INTO metrics_error (error_id, occurred, total_count) VALUES ($1, $2, 2)`,
			[ids.error, day(0)]
		);
		try {
			const types = await get("/metrics/");
			const sources: [string, string, number, string, number][] = [
				["ingests", "ingested_count", ids.strike, "Feed", 1],
				["errors", "total_count", ids.error, "Boom", 2]
			];
			for (const [name, column, choiceId, title, today] of sources) {
				const dataType = types.results.find((t: any) => t.name === name);
				const options = await get(`/metrics/${name}/`);
				for (const c of options.columns) {
					expect(options.groups.find((g: any) => g.name === c.group).title).toEqual(
						expect.any(String)
					);
				}
				const choice = options.choices.find((c: any) => c.id === choiceId);
				expect(choice.title).toBe(title);
				const picked = options.columns.find((c: any) => c.name === column);

				const ended = new Date();
				const started = new Date(ended.getTime() - 30 * DAY);
				const range = `ended=${ended.toISOString()}&started=${started.toISOString()}`;
				const all = await get(
					`/metrics/${name}/plot-data/?column=${column}&dataType=${name}&${range}`
				);
				const one = await get(
					`/metrics/${name}/plot-data/?choice_id=${choiceId}&column=${column}&dataType=${name}&${range}`
				);
				const total = draw(started, ended, [], all.results, dataType.title);
				const series = `${picked.title} for all ${dataType.title}`;
				expect(Object.keys(total)).toEqual([series]);
				expect(total[series].slice(-1)).toEqual([today]);
				expect(total[series].slice(0, -1).every(v => v === 0)).toBe(true);
				const mine = draw(started, ended, [choice], one.results, dataType.title);
				expect(mine[`${column} ${title}`].slice(-1)).toEqual([today]);
			}
		} finally {
			await query(`DELETE FROM metrics_ingest WHERE strike_id = $1 AND occurred = $2`, [
				ids.strike,
				day(0)
			]);
			await query(`DELETE FROM metrics_error WHERE error_id = $1 AND occurred = $2`, [
				ids.error,
				day(0)
			]);
		}
	});

	it("draws a job type created today, before any metrics of it", async () => {
		const [{ id }] = await query<{ id: number }>(
			`INSERT INTO job_type (name, version, title, category, interface)
			 VALUES ('jt-today', '1.0', 'Today', 'test', '{}') RETURNING id`
		);
		const options = await get("/metrics/job-types/");
		const choice = options.choices.find((c: any) => c.id === id);
		expect(choice.title).toBe("Today");
		const ended = new Date();
		const started = new Date(ended.getTime() - 7 * DAY);
		const body = await get(
			`/metrics/job-types/plot-data/?started=${started.toISOString()}&ended=${ended.toISOString()}&choice_id=${id}&column=total_count&dataType=job-types`
		);
		const chart = draw(started, ended, [choice], body.results, "Job Types");
		expect(chart).toEqual({});
		await query(`DELETE FROM job_type WHERE id = $1`, [id]);
	});
});
