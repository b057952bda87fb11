/**
 * Seeds the database of benchmark P4 (the read side at millions of rows) with 90 days of a busy
 * cluster: 20 job types, 10 nodes, 1,000,000 jobs (each with its trigger event) and 1,000,000
 * executions, 50,000 source files, 150,000 products with their ancestry links, one strike and
 * 100,000 ingests. Every row is written by set-based SQL (INSERT ... SELECT FROM generate_series)
 * in one transaction, so a failed seed leaves nothing behind; then VACUUM ANALYZE.
 *
 *   npm run bench:seed                    (embedded PostgreSQL kept under data/bench-p4)
 *   DATABASE_URL=postgres://... npm run bench:seed
 *   SEED_TRUNCATE=1 npm run bench:seed    (empty a database that already has jobs first)
 *   BENCH_SEED_SCALE=0.1 npm run bench:seed   (every count times 0.1)
 */
import { Client } from "pg";
import { createSequelize } from "../lib/db/connection";
import { migrate } from "../lib/db/migrate";
import { parseJobInterface } from "../lib/documents/job-interface";
import { parseStrikeConfiguration } from "../lib/documents/strike-configuration";
import { parseWorkspaceConfig } from "../lib/documents/workspace-config";
import { openP4Database } from "./lib/p4-db";

const SCALE = Number(process.env.BENCH_SEED_SCALE) || 1;
const JOBS = Math.round(1_000_000 * SCALE);
const SOURCES = Math.round(50_000 * SCALE);
const PRODUCTS = Math.round(150_000 * SCALE);
/** one ingest per source file (the odd ids), and as many others (the even ids) */
const INGESTS = 2 * SOURCES;
/**
 * Jobs arrive every ~7.8 s until JOBS_END_SECONDS ago. The newest LATE_JOBS (~13 hours) hold
 * the unfinished ones, a few thousand: a backlog of queued and pending jobs beside finished ones;
 * none of the newest UNFINISHED_JOBS (~2.2 hours) has finished, since the longest job (two waits
 * of at most 10 minutes and two runs of at most 43) could not have; of the newest RUNNING_JOBS
 * (~45 minutes) most run, none for longer than its timeout.
 */
const LATE_JOBS = Math.round(6_000 * SCALE);
const UNFINISHED_JOBS = Math.round(1_000 * SCALE);
const RUNNING_JOBS = Math.round(350 * SCALE);
const JOBS_END_SECONDS = 300;
/** Ingests end an hour earlier: a job's input file was ingested before the job was created. */
const INGESTS_END_SECONDS = 3600 + JOBS_END_SECONDS;
/** the newest ingests, among which the ones still moving are */
const LATE_INGESTS = Math.round(400 * SCALE);
const NODES = 10;
const DAYS = 90;
/** name, category, operational, typical run seconds, priority (the most used first) */
const JOB_TYPES: [string, string, boolean, number, number][] = [
	["landsat-parse", "parse", true, 40, 100],
	["sentinel-parse", "parse", true, 45, 100],
	["modis-parse", "parse", true, 30, 100],
	["viirs-parse", "parse", true, 35, 100],
	["cloud-mask", "processing", true, 240, 150],
	["orthorectify", "processing", true, 600, 150],
	["pansharpen", "processing", true, 300, 150],
	["ndvi", "processing", true, 120, 150],
	["thumbnail", "export", true, 15, 50],
	["tile", "export", true, 180, 100],
	["export-geotiff", "export", true, 60, 100],
	["mosaic", "processing", true, 1200, 200],
	["change-detect", "analysis", true, 900, 200],
	["classify-landcover", "analysis", true, 1500, 200],
	["export-kml", "export", true, 20, 100],
	["archive", "export", true, 90, 300],
	["ship-detect", "analysis", false, 800, 250],
	["flood-extent", "analysis", false, 700, 250],
	["qa-geometry", "analysis", false, 60, 100],
	["index-metadata", "export", false, 10, 50]
];

/** Errors jobs fail with beside the built-in ones (which are SYSTEM but one). */
const EXTRA_ERRORS: [string, string, string][] = [
	["bad-pixels", "Bad Pixels", "DATA"],
	["missing-metadata", "Missing Metadata", "DATA"],
	["corrupt-input", "Corrupt Input", "DATA"],
	["no-convergence", "No Convergence", "ALGORITHM"],
	["out-of-memory", "Out Of Memory", "ALGORITHM"]
];

/** Tables whose rows the seed makes; the rest (errors, scheduler) it leaves. */
const SEEDED_TABLES = ["job_type", "node", "workspace", "trigger_event", "job", "scale_file"];

const say = (msg: string) => process.stdout.write(`${msg}\n`);

/** the largest id of the job types present before seeding (the system ones) */
let typeBase = 0;

async function main() {
	const started = Date.now();
	const database = await openP4Database(say);
	say(`database: ${database.where}`);
	try {
		const sequelize = createSequelize(database.url, { poolMax: 2 });
		try {
			await migrate(sequelize, say);
		} finally {
			await sequelize.close();
		}
		const client = new Client({ connectionString: database.url });
		await client.connect();
		try {
			if (!(await readyToSeed(client))) {
				process.exitCode = 1;
				return;
			}
			await seed(client);
			await timed("VACUUM ANALYZE", async () => {
				await client.query("VACUUM ANALYZE");
				return null;
			});
			await summary(client);
		} finally {
			await client.end();
		}
		say(
			`seeded in ${((Date.now() - started) / 1000).toFixed(0)} s; the database is kept in ${database.where}`
		);
	} finally {
		await database.stop();
	}
}

/** Refuses a database that already has rows of the seeded tables, unless SEED_TRUNCATE=1. */
async function readyToSeed(client: Client): Promise<boolean> {
	const counts: string[] = [];
	for (const table of SEEDED_TABLES) {
		// the system job types (scale-strike) come with the migrations
		const where = table === "job_type" ? " WHERE NOT is_system" : "";
		const { rows } = await client.query(`SELECT count(*)::int AS n FROM ${table}${where}`);
		if (rows[0].n > 0) counts.push(`${rows[0].n} ${table}`);
	}
	if (counts.length === 0) return true;
	if (process.env.SEED_TRUNCATE !== "1") {
		say(
			`refusing to seed: the database already has rows (${counts.join(", ")}). Run with SEED_TRUNCATE=1 to empty it first, or point DATABASE_URL at an empty database.`
		);
		return false;
	}
	say(`the database already has rows (${counts.join(", ")}): truncating them (SEED_TRUNCATE=1)`);
	await timed("truncate", async () => {
		// CASCADE reaches every table that refers to these: jobs, executions, files, ingests...
		await client.query(
			`TRUNCATE trigger_event, node, workspace, strike, recipe_type, job, job_exe, queue,
				scale_file, ingest RESTART IDENTITY CASCADE`
		);
		// the migrations' system job types and clock rules stay
		await client.query(
			`DELETE FROM job_type_rev WHERE job_type_id IN (SELECT id FROM job_type WHERE NOT is_system)`
		);
		await client.query("DELETE FROM job_type WHERE NOT is_system");
		return null;
	});
	return true;
}

/** Runs one step, printing its rows and seconds. */
async function timed(name: string, fn: () => Promise<number | null>): Promise<void> {
	const t = Date.now();
	const rows = await fn();
	const count = rows === null ? "" : `${rows.toLocaleString("en-US")} rows`;
	say(
		`${name.padEnd(26)} ${count.padStart(18)} ${((Date.now() - t) / 1000).toFixed(1).padStart(7)} s`
	);
}

async function seed(client: Client) {
	// A large insert is followed by ANALYZE of its table (it sees this transaction's rows): the
	// foreign-key checks of the next inserts are planned from the statistics, and a table never
	// analysed looks small enough for a sequential scan per checked row.
	const step = (name: string, sql: string, values: unknown[] = []) =>
		timed(name, async () => {
			const rows = (await client.query(sql, values)).rowCount ?? 0;
			const table = /^\s*INSERT INTO (\w+)/.exec(sql)?.[1];
			if (table && rows > 10000) await client.query(`ANALYZE ${table}`);
			return rows;
		});

	await client.query("BEGIN");
	try {
		// the seeded job types are numbered after the system ones the migrations made
		typeBase = (await client.query("SELECT coalesce(max(id), 0)::int AS n FROM job_type"))
			.rows[0].n;
		// Durability per statement buys nothing here (one transaction), and large sorts
		// (the plan's window functions) stay in memory.
		await client.query("SET LOCAL synchronous_commit = off");
		await client.query("SET LOCAL work_mem = '256MB'");
		await client.query("SET LOCAL temp_buffers = '512MB'");

		await step(
			"errors (DATA, ALGORITHM)",
			`INSERT INTO error (name, title, description, category)
			 SELECT name, title, 'Recorded by the P4 benchmark''s jobs', category
			 FROM unnest($1::text[], $2::text[], $3::text[]) AS e(name, title, category)
			 ON CONFLICT (name) DO NOTHING`,
			[0, 1, 2].map(i => EXTRA_ERRORS.map(e => e[i]))
		);
		await step(
			"workspaces",
			`INSERT INTO workspace (id, name, title, json_config, created, last_modified)
			 SELECT id, name, initcap(name), config, now() - interval '${DAYS + 30} days',
				now() - interval '${DAYS + 30} days'
			 FROM unnest($1::int[], $2::text[], $3::jsonb[]) AS w(id, name, config)`,
			[
				[1, 2],
				["raw", "products"],
				["raw", "products"].map(name =>
					JSON.stringify(
						parseWorkspaceConfig({
							version: "1.0",
							broker: { type: "host", host_path: `/tmp/bench-p4/${name}` }
						})
					)
				)
			]
		);
		await step(
			"nodes",
			`INSERT INTO node (id, hostname, port, slave_id, agent_id, cpus_total, mem_total,
				disk_total, last_offer, last_heartbeat, created, last_modified)
			 SELECT n, 'bench-node-' || lpad(n::text, 2, '0'), 0,
				'bench-slave-' || lpad(n::text, 2, '0'), 'bench-agent-' || lpad(n::text, 2, '0'),
				16, 65536, 1000000, now(), now(), now() - interval '${DAYS + 30} days', now()
			 FROM generate_series(1, ${NODES}) n`
		);
		const interfaces = JOB_TYPES.map(([name]) =>
			JSON.stringify(
				parseJobInterface({
					version: "1.0",
					command: `/opt/${name}/run.sh`,
					command_arguments: "${input_file} ${job_output_dir}",
					input_data: [{ name: "input_file", type: "file", media_types: ["image/tiff"] }],
					output_data: [{ name: "output_file", type: "file", media_type: "image/tiff" }]
				})
			)
		);
		await step(
			"job types",
			`INSERT INTO job_type (id, name, version, title, description, category, author_name,
				is_operational, icon_code, interface, priority, timeout, max_tries, cpus_required,
				mem_required, disk_out_const_required, created, last_modified)
			 SELECT t.id + ${typeBase}, t.name, '1.0', initcap(replace(t.name, '-', ' ')),
				'A job type of the P4 benchmark', t.category, 'bench', t.operational, 'f013',
				t.iface, t.priority, 3600, 3, 1 + t.id % 4, 512 * (1 + t.id % 8), 1024,
				now() - interval '${DAYS + 30} days', now() - interval '${DAYS + 30} days'
			 FROM unnest($1::text[], $2::text[], $3::boolean[], $4::int[], $5::jsonb[])
				WITH ORDINALITY AS t(name, category, operational, priority, iface, id)`,
			[
				JOB_TYPES.map(t => t[0]),
				JOB_TYPES.map(t => t[1]),
				JOB_TYPES.map(t => t[2]),
				JOB_TYPES.map(t => t[4]),
				interfaces
			]
		);
		await step(
			"job type revisions",
			`INSERT INTO job_type_rev (id, job_type_id, revision_num, interface, created)
			 SELECT id, id, 1, interface, created FROM job_type WHERE NOT is_system`
		);
		await planJobs(client, step);
		await step(
			"trigger events",
			`INSERT INTO trigger_event (id, type, description, occurred, processed)
			 SELECT s.id, CASE jt.category WHEN 'parse' THEN 'INGEST' WHEN 'processing' THEN 'PARSE'
					ELSE 'USER' END,
				CASE WHEN jt.category IN ('parse', 'processing') THEN '{}'::jsonb
					ELSE '{"user": "Anonymous"}'::jsonb END,
				s.created, s.created
			 FROM seed_job s JOIN job_type jt ON jt.id = s.job_type_id ORDER BY s.id`
		);
		await step(
			"jobs",
			`INSERT INTO job (id, job_type_id, job_type_rev_id, event_id, error_id, status, priority,
				num_exes, timeout, max_tries, cpus_required, mem_required, disk_in_required,
				disk_out_required, data, results, created, queued, started, ended,
				last_status_change, last_modified)
			 SELECT s.id, s.job_type_id, s.job_type_id, s.id,
				CASE WHEN s.status = 'FAILED' THEN s.error_id END, s.status, jt.priority,
				s.num_exes, jt.timeout, jt.max_tries, jt.cpus_required, jt.mem_required,
				s.input_mib, jt.disk_out_const_required,
				jsonb_build_object('version', '1.0',
					'input_data', jsonb_build_array(
						jsonb_build_object('name', 'input_file', 'file_id', s.input_file)),
					'output_data', jsonb_build_array(
						jsonb_build_object('name', 'output_file', 'workspace_id', 2))),
				CASE WHEN s.status = 'COMPLETED' THEN jsonb_build_object('version', '1.0',
					'output_data', CASE WHEN s.product_id IS NULL THEN '[]'::jsonb
						ELSE jsonb_build_array(jsonb_build_object('name', 'output_file',
							'file_id', s.product_id)) END) END,
				s.created, s.queued, s.started, s.ended,
				coalesce(s.ended, s.started, s.queued, s.created),
				coalesce(s.ended, s.started, s.queued, s.created)
			 FROM seed_job s JOIN job_type jt ON jt.id = s.job_type_id ORDER BY s.id`
		);
		await step(
			"job executions",
			`INSERT INTO job_exe (id, job_id, job_type_id, status, error_id, command_arguments,
				timeout, node_id,
				agent_id, cpus_scheduled, mem_scheduled, disk_in_scheduled, disk_out_scheduled,
				disk_total_scheduled, pre_started, pre_completed, pre_exit_code, job_started,
				job_completed, job_exit_code, post_started, post_completed, post_exit_code,
				results, created, queued, started, ended, last_modified)
			 SELECT x.id, x.job_id, x.job_type_id, x.status, x.error_id, '\${input_file} \${job_output_dir}',
				jt.timeout, x.node, 'bench-agent-' || lpad(x.node::text, 2, '0'),
				jt.cpus_required, jt.mem_required, x.input_mib, jt.disk_out_const_required,
				x.input_mib + jt.disk_out_const_required,
				x.started,
				x.started + coalesce((x.ended - x.started) * 0.05, interval '1 second'),
				CASE WHEN x.started IS NOT NULL THEN 0 END,
				x.started + coalesce((x.ended - x.started) * 0.05, interval '1 second'), x.ended,
				CASE x.status WHEN 'COMPLETED' THEN 0 WHEN 'FAILED' THEN x.exit_code END,
				CASE WHEN x.status = 'COMPLETED' THEN x.ended END,
				CASE WHEN x.status = 'COMPLETED' THEN x.ended END,
				CASE WHEN x.status = 'COMPLETED' THEN 0 END,
				CASE WHEN x.status = 'COMPLETED' THEN j.results END,
				x.queued, x.queued, x.started, x.ended, coalesce(x.ended, x.started, x.queued)
			 FROM (
				SELECT s.exe_last - s.num_exes + a AS id, s.id AS job_id, s.job_type_id, s.input_mib,
					CASE WHEN n.retried THEN 'FAILED' ELSE s.status END AS status,
					CASE WHEN n.retried THEN s.sys_error_id
						WHEN s.status = 'FAILED' THEN s.error_id END AS error_id,
					CASE WHEN n.retried THEN NULL ELSE s.exit_code END AS exit_code,
					CASE WHEN n.retried THEN s.node1 WHEN s.started IS NOT NULL THEN s.node END
						AS node,
					CASE WHEN n.retried THEN s.queued1 ELSE s.queued END AS queued,
					CASE WHEN n.retried THEN s.started1 ELSE s.started END AS started,
					CASE WHEN n.retried THEN s.ended1 ELSE s.ended END AS ended
				FROM seed_job s,
					LATERAL (SELECT a, a < s.num_exes AS retried
						FROM generate_series(1, s.num_exes) a) n
			 ) x
			 JOIN job j ON j.id = x.job_id JOIN job_type jt ON jt.id = x.job_type_id
			 ORDER BY x.id`
		);
		await step(
			"queue (QUEUED executions)",
			`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required, mem_required,
				disk_in_required, disk_out_required, disk_total_required, queued, created)
			 SELECT x.id, x.job_id, j.job_type_id, j.priority, x.cpus_scheduled, x.mem_scheduled,
				x.disk_in_scheduled, x.disk_out_scheduled, x.disk_total_scheduled, x.queued, x.queued
			 FROM job_exe x JOIN job j ON j.id = x.job_id WHERE x.status = 'QUEUED'
			 ORDER BY x.queued`
		);
		await seedFiles(step);
		await seedIngests(step);
		await timed("sequences", async () => {
			for (const table of [
				"workspace",
				"node",
				"job_type",
				"job_type_rev",
				"trigger_event",
				"job",
				"job_exe",
				"scale_file",
				"strike",
				"ingest"
			])
				await client.query(
					`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT max(id) FROM ${table}))`
				);
			return null;
		});
		await timed("commit", async () => {
			await client.query("COMMIT");
			return null;
		});
	} catch (error) {
		await client.query("ROLLBACK").catch(() => undefined);
		throw error;
	}
}

type Step = (name: string, sql: string, values?: unknown[]) => Promise<void>;

/**
 * The plan of every job in a temporary table: type, status, executions and their times, error,
 * input source file and product. Jobs, executions, products and links are all read from it, so
 * they agree. Ids are given, not drawn from the sequences, so that each relation is arithmetic:
 * job i has event i; its executions end at id exe_last; products follow the source files.
 */
async function planJobs(client: Client, step: Step) {
	await client.query(
		`CREATE TEMP TABLE seed_job (
			id int NOT NULL, job_type_id int NOT NULL, status text NOT NULL, num_exes int NOT NULL,
			exe_last int NOT NULL, created timestamptz NOT NULL, queued1 timestamptz,
			started1 timestamptz, ended1 timestamptz, node1 int, queued timestamptz,
			started timestamptz, ended timestamptz, node int, error_id int, sys_error_id int,
			exit_code int, input_file int NOT NULL, input_mib int NOT NULL, product_id int
		) ON COMMIT DROP`
	);
	const jobStep = (DAYS * 86400 - JOBS_END_SECONDS - 600) / JOBS;
	// random() is drawn once per job in the materialized CTE `d`; the later CTEs only derive.
	await step(
		"plan (temporary)",
		`INSERT INTO seed_job
		 WITH er AS (
			SELECT array_agg(id ORDER BY id) FILTER (WHERE category = 'SYSTEM') AS sys,
				array_agg(id ORDER BY id) FILTER (WHERE category = 'ALGORITHM') AS alg,
				array_agg(id ORDER BY id) FILTER (WHERE category = 'DATA') AS dat
			FROM error
		 ),
		 d AS MATERIALIZED (
			SELECT g AS id, ${typeBase} + 1 + floor(power(random(), 1.6) * ${JOB_TYPES.length})::int AS jt,
				now() - interval '${DAYS} days'
					+ (600 + (g - 1) * ${jobStep} + random() * 5) * interval '1 second' AS created,
				g > ${JOBS - LATE_JOBS} AS late, g > ${JOBS - UNFINISHED_JOBS} AS unfinished,
				g > ${JOBS - RUNNING_JOBS} AS newest,
				random() AS r_status, random() AS r_cancel, random() AS r_retry, random() AS r_prod,
				1 + power(random(), 3) * 600 AS wait, 1 + power(random(), 3) * 600 AS wait1,
				0.3 + random() * 1.4 AS run_f, random() AS part, random() AS r_err,
				random() AS r_pick, 1 + floor(random() * ${NODES})::int AS node,
				1 + floor(random() * ${NODES})::int AS node1, 1 + floor(random() * 3)::int AS back,
				1 + floor(random() * 2000)::int AS input_mib
			FROM generate_series(1, ${JOBS}) g
		 ),
		 s AS (
			SELECT d.*, CASE WHEN newest THEN
					CASE WHEN r_status < 0.6 THEN 'RUNNING' WHEN r_status < 0.9 THEN 'QUEUED'
						ELSE 'PENDING' END
				WHEN unfinished THEN CASE WHEN r_status < 0.75 THEN 'QUEUED' ELSE 'PENDING' END
				WHEN late THEN
					CASE WHEN r_status < 0.4 THEN 'QUEUED' WHEN r_status < 0.55 THEN 'PENDING'
						WHEN r_status < 0.93 THEN 'COMPLETED' WHEN r_status < 0.97 THEN 'FAILED'
						ELSE 'CANCELED' END
				ELSE CASE WHEN r_status < 0.87 THEN 'COMPLETED' WHEN r_status < 0.95 THEN 'FAILED'
					ELSE 'CANCELED' END
				END AS status
			FROM d
		 ),
		 z AS (
			SELECT s.*, status = 'PENDING' OR (status = 'CANCELED' AND r_cancel < 0.5) AS no_exe,
				status IN ('COMPLETED', 'FAILED') AS ran_out
			FROM s
		 ),
		 -- as many jobs run twice (a failed first try) as never ran: one execution per job
		 k AS (
			SELECT z.*, count(*) FILTER (WHERE no_exe) OVER () AS zeros,
				row_number() OVER (PARTITION BY ran_out ORDER BY r_retry) AS retry_rank,
				row_number() OVER (PARTITION BY status = 'COMPLETED' ORDER BY r_prod) AS prod_rank
			FROM z
		 ),
		 e AS (
			SELECT k.*,
				CASE WHEN no_exe THEN 0 WHEN ran_out AND retry_rank <= zeros THEN 2 ELSE 1 END
					AS num_exes,
				status = 'COMPLETED' AND prod_rank <= ${PRODUCTS} AS has_product
			FROM k
		 ),
		 f AS (
			SELECT e.*, sum(num_exes) OVER (ORDER BY id) AS exe_last,
				row_number() OVER (PARTITION BY has_product ORDER BY id) AS product_rank,
				rt.typical * run_f * interval '1 second' AS run
			FROM e JOIN unnest($1::float8[]) WITH ORDINALITY AS rt(typical, n)
				ON e.jt = rt.n + ${typeBase}
		 ),
		 -- the failed first try of a job run twice
		 t1 AS (
			SELECT f.*,
				CASE WHEN num_exes = 2 THEN created + interval '0.2 second' END AS queued1,
				CASE WHEN num_exes = 2 THEN created + interval '0.2 second'
					+ wait1 * interval '1 second' END AS started1
			FROM f
		 ),
		 t2 AS (
			SELECT t1.*, started1 + run * part AS ended1,
				CASE WHEN status = 'PENDING' OR no_exe THEN NULL
					WHEN num_exes = 2 THEN started1 + run * part + interval '0.05 second'
					ELSE created + interval '0.2 second' END AS queued
			FROM t1
		 ),
		 t3 AS (
			SELECT t2.*,
				CASE WHEN status IN ('RUNNING', 'COMPLETED', 'FAILED')
					OR (status = 'CANCELED' AND NOT no_exe AND r_cancel >= 0.6)
					THEN queued + wait * interval '1 second' END AS started
			FROM t2
		 )
		 SELECT t3.id, jt, status, num_exes, exe_last, created, queued1, started1, ended1, node1,
			queued, started,
			CASE WHEN status = 'COMPLETED' THEN started + run
				WHEN status = 'FAILED' THEN started + run * part
				WHEN status <> 'CANCELED' THEN NULL
				WHEN started IS NOT NULL THEN started + run * part
				WHEN queued IS NOT NULL THEN queued + wait * part * interval '1 second'
				ELSE created + wait * interval '1 second' END,
			node,
			CASE WHEN status <> 'FAILED' THEN NULL
				WHEN r_err < 0.25 THEN er.sys[1 + floor(r_pick * cardinality(er.sys))::int]
				WHEN r_err < 0.65 THEN er.alg[1 + floor(r_pick * cardinality(er.alg))::int]
				ELSE er.dat[1 + floor(r_pick * cardinality(er.dat))::int] END,
			er.sys[1 + floor(r_pick * cardinality(er.sys))::int],
			CASE WHEN status = 'FAILED' AND r_err >= 0.25 THEN 1 + floor(r_pick * 3)::int END,
			greatest(1, floor((t3.id - 1)::float8 * ${SOURCES} / ${JOBS})::int + 1 - back),
			input_mib,
			CASE WHEN has_product THEN ${SOURCES} + product_rank END
		 FROM t3, er`,
		[JOB_TYPES.map(t => t[3])]
	);
}

/** Source files (ids 1..SOURCES, in time order), then products and their ancestry links. */
async function seedFiles(step: Step) {
	// Source s arrives with ingest 2s-1, whose transfer starts at ingestStep * (2s-2); the
	// transfer and ingest take at most 91 s, so the file exists before any job reads it.
	const ingestStep = (DAYS * 86400 - INGESTS_END_SECONDS) / INGESTS;
	await step(
		"source files",
		`INSERT INTO scale_file (id, file_type, workspace_id, file_name, file_path, media_type,
			file_size, data_type, uuid, data_started, data_ended, geometry, center_point,
			countries, is_parsed, parsed, created, last_modified)
		 SELECT id, 'SOURCE', 1, name, 'landsat/' || to_char(created, 'YYYY/MM/DD') || '/' || name,
			'image/tiff', size, ARRAY['landsat'], md5(name), created - interval '1 day',
			created - interval '1 day' + interval '30 seconds',
			format('POLYGON((%s %s, %s %s, %s %s, %s %s, %s %s))', lon, lat, lon + 1, lat, lon + 1,
				lat + 1, lon, lat + 1, lon, lat),
			format('POINT(%s %s)', lon + 0.5, lat + 0.5), ARRAY[country], parsed IS NOT NULL,
			parsed, created, coalesce(parsed, created)
		 FROM (
			SELECT g AS id, created,
				'LC08_' || lpad(g::text, 7, '0') || '_' || to_char(created, 'YYYYMMDD') || '.tif'
					AS name,
				(50000000 + random() * 1500000000)::bigint AS size,
				round((-180 + random() * 350)::numeric, 4) AS lon,
				round((-80 + random() * 150)::numeric, 4) AS lat,
				(ARRAY['USA', 'CAN', 'MEX', 'BRA', 'FRA', 'DEU', 'AUS', 'JPN', 'IND', 'ZAF'])
					[1 + floor(random() * 10)::int] AS country,
				CASE WHEN random() < 0.75
					THEN created + (30 + random() * 600) * interval '1 second' END AS parsed
			FROM (
				SELECT g, now() - interval '${DAYS} days'
					+ ((2 * g - 2) * ${ingestStep} + 91) * interval '1 second' AS created
				FROM generate_series(1, ${SOURCES}) g
			) t
		 ) s
		 ORDER BY id`
	);
	// Published when the job ended, as the service does; then some unpublished, superseded
	// (which also unpublishes) or deleted since.
	await step(
		"products",
		`INSERT INTO scale_file (id, file_type, workspace_id, file_name, file_path, media_type,
			file_size, data_type, uuid, data_started, data_ended, geometry, center_point,
			countries, job_type_id, job_id, job_exe_id, is_operational, has_been_published,
			is_published, published, unpublished, is_superseded, superseded, is_deleted, deleted,
			created, last_modified)
		 SELECT p.product_id, 'PRODUCT', 2, p.name,
			p.jt_name || '/1.0/' || p.id || '/' || p.name, 'image/tiff', p.size, src.data_type,
			md5(p.jt_name || p.id), src.data_started, src.data_ended, src.geometry,
			src.center_point, src.countries, p.job_type_id, p.id, p.exe_last, p.operational, true,
			p.state = 'published', p.ended, CASE WHEN p.state <> 'published' THEN p.later END,
			p.state = 'superseded', CASE WHEN p.state = 'superseded' THEN p.later END,
			p.state = 'deleted', CASE WHEN p.state = 'deleted' THEN p.later END,
			p.ended, CASE WHEN p.state = 'published' THEN p.ended ELSE p.later END
		 FROM (
			SELECT s.*, jt.name AS jt_name, jt.is_operational AS operational,
				jt.name || '_' || s.id || '.tif' AS name,
				(1000000 + random() * 400000000)::bigint AS size,
				s.ended + (now() - s.ended) * random() AS later,
				CASE WHEN r < 0.90 THEN 'published' WHEN r < 0.95 THEN 'unpublished'
					WHEN r < 0.99 THEN 'superseded' ELSE 'deleted' END AS state
			FROM (SELECT seed_job.*, random() AS r FROM seed_job WHERE product_id IS NOT NULL) s
			JOIN job_type jt ON jt.id = s.job_type_id
		 ) p
		 JOIN scale_file src ON src.id = p.input_file
		 ORDER BY p.product_id`
	);
	await step(
		"file ancestry links",
		`INSERT INTO file_ancestry_link (ancestor_id, descendant_id, job_id, job_exe_id, created)
		 SELECT input_file, product_id, id, exe_last, ended
		 FROM seed_job WHERE product_id IS NOT NULL ORDER BY product_id`
	);
}

/** One strike; its ingests, the odd ids bringing the source files, the even ones the rest. */
async function seedIngests(step: Step) {
	const ingestStep = (DAYS * 86400 - INGESTS_END_SECONDS) / INGESTS;
	await step(
		"strike",
		`INSERT INTO strike (id, name, title, description, configuration, created, last_modified)
		 VALUES (1, 'landsat-drop', 'Landsat Drop', 'Landsat scenes dropped by the ground station',
			$1::jsonb, now() - interval '${DAYS + 30} days', now() - interval '${DAYS + 30} days')`,
		[
			JSON.stringify(
				parseStrikeConfiguration({
					version: "1.0",
					mount: "/mnt/drop/landsat",
					transfer_suffix: "_tmp",
					files_to_ingest: [
						{
							filename_regex: "LC08_.*\\.tif$",
							data_types: ["landsat"],
							workspace_path: "landsat",
							workspace_name: "raw"
						}
					]
				})
			)
		]
	);
	await step(
		"ingests of the sources",
		`INSERT INTO ingest (id, file_name, strike_id, status, transfer_path, bytes_transferred,
			transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
			workspace_id, ingest_path, ingest_started, ingest_ended, source_file_id, created,
			last_modified)
		 SELECT 2 * f.id - 1, f.file_name, 1, 'INGESTED', '/mnt/drop/landsat/' || f.file_name,
			f.file_size, t.transfer_started, t.transfer_ended, f.media_type, f.file_size,
			f.data_type, f.file_path, 1, f.file_path, t.ingest_started, f.created, f.id,
			t.transfer_started, f.created
		 FROM scale_file f,
			LATERAL (SELECT f.created - (1 + random() * 29) * interval '1 second' AS ingest_started,
				random() AS r1, random() AS r2) a,
			LATERAL (SELECT a.ingest_started - a.r1 * interval '2 seconds' AS transfer_ended,
				a.ingest_started - a.r1 * interval '2 seconds'
					- (1 + a.r2 * 58) * interval '1 second' AS transfer_started,
				a.ingest_started) t
		 WHERE f.file_type = 'SOURCE'
		 ORDER BY f.id`
	);
	// The newest few are still moving; the others were ingested again (a source that was
	// deleted and dropped again), duplicates of an earlier source, errored or deferred.
	await step(
		"other ingests",
		`INSERT INTO ingest (id, file_name, strike_id, status, transfer_path, bytes_transferred,
			transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
			workspace_id, ingest_path, ingest_started, ingest_ended, source_file_id, created,
			last_modified)
		 SELECT i.id, coalesce(src.file_name, i.new_name), 1, i.status,
			'/mnt/drop/landsat/' || coalesce(src.file_name, i.new_name),
			CASE WHEN i.status = 'TRANSFERRING' THEN i.size / 2 ELSE i.size END,
			i.t0, i.transfer_ended, 'image/tiff', i.size, ARRAY['landsat'],
			CASE WHEN i.status = 'INGESTED' THEN src.file_path END, 1,
			CASE WHEN i.status = 'INGESTED' THEN src.file_path END,
			i.ingest_started, i.ingest_ended,
			CASE WHEN i.status = 'INGESTED' THEN src.id END, i.t0,
			coalesce(i.ingest_ended, i.ingest_started, i.transfer_ended, i.t0)
		 FROM (
			SELECT g.*,
				CASE WHEN status <> 'TRANSFERRING'
					THEN t0 + (1 + r1 * 59) * interval '1 second' END AS transfer_ended,
				CASE WHEN status IN ('INGESTING', 'INGESTED', 'DUPLICATE', 'ERRORED')
					THEN t0 + (62 + r1 * 59) * interval '1 second' END AS ingest_started,
				CASE WHEN status IN ('INGESTED', 'DUPLICATE', 'ERRORED')
					THEN t0 + (92 + r1 * 59) * interval '1 second' END AS ingest_ended
			FROM (
				SELECT i AS id, r1,
					now() - interval '${DAYS} days' + (i - 1) * ${ingestStep} * interval '1 second'
						AS t0,
					CASE WHEN i > ${INGESTS - LATE_INGESTS} THEN
						CASE WHEN r < 0.3 THEN 'TRANSFERRING' WHEN r < 0.6 THEN 'TRANSFERRED'
							ELSE 'INGESTING' END
						WHEN r < 0.25 THEN 'INGESTED' WHEN r < 0.6 THEN 'DUPLICATE'
						WHEN r < 0.8 THEN 'ERRORED' ELSE 'DEFERRED' END AS status,
					-- an earlier source file, for the ingested again and the duplicates
					greatest(1, floor(r2 * (i / 2 - 1))::int) AS source_id,
					'LC08_X' || lpad(i::text, 7, '0') || '.tif' AS new_name,
					(50000000 + r3 * 1500000000)::bigint AS size
				FROM (
					SELECT i, random() AS r, random() AS r1, random() AS r2, random() AS r3
					FROM generate_series(2, ${INGESTS}, 2) i
				) d
			) g
		 ) i
		 LEFT JOIN scale_file src ON src.id = i.source_id AND i.status IN ('INGESTED', 'DUPLICATE')
		 ORDER BY i.id`
	);
}

async function summary(client: Client) {
	const groups = async (sql: string) =>
		(await client.query(sql)).rows
			.map(r => `${r.k} ${Number(r.n).toLocaleString("en-US")}`)
			.join(", ");
	say(
		`jobs: ${await groups("SELECT status AS k, count(*) AS n FROM job GROUP BY 1 ORDER BY 2 DESC")}`
	);
	say(
		`executions: ${await groups("SELECT status AS k, count(*) AS n FROM job_exe GROUP BY 1 ORDER BY 2 DESC")}`
	);
	say(
		`files: ${await groups(
			`SELECT file_type || CASE WHEN file_type = 'SOURCE' THEN
				CASE WHEN is_parsed THEN ' parsed' ELSE ' unparsed' END
				ELSE CASE WHEN is_deleted THEN ' deleted' WHEN is_superseded THEN ' superseded'
				WHEN is_published THEN ' published' ELSE ' unpublished' END END AS k, count(*) AS n
			 FROM scale_file GROUP BY 1 ORDER BY 1`
		)}`
	);
	say(
		`ingests: ${await groups("SELECT status AS k, count(*) AS n FROM ingest GROUP BY 1 ORDER BY 2 DESC")}`
	);
	say(
		`queue rows: ${(await client.query("SELECT count(*)::int AS n FROM queue")).rows[0].n}; database size: ${(await client.query("SELECT pg_size_pretty(pg_database_size(current_database())) AS s")).rows[0].s}`
	);
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
