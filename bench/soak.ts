/**
 * Soak: a cluster on this machine (nats-server with a password, PostgreSQL, two control planes,
 * the ingest and triggers services in processes of their own, three agents) under steady load —
 * jobs queued through the API, files dropped into a strike whose ingests start two-job recipes
 * by a trigger rule — while a random process is SIGKILLed every few seconds and started again
 * with the same identity. At the end, with the load stopped and everything running again:
 * every job terminal, no job with two COMPLETED executions, no product or source file twice,
 * every dropped file ingested once, every stored file on disk, and no work run twice (an
 * execution after one of the same job whose process had in fact finished: each job's script
 * leaves a marker named by its execution as its last act).
 *
 * Besides the SIGKILLs, one fault in SOAK_OUTAGE_EVERY (3) is an outage: the control planes all
 * killed and kept down past the agents' lease (SOAK_CONTROL_OUTAGE_S, 20), nats-server stopped
 * for 3–8 s, or PostgreSQL stopped for SOAK_PG_OUTAGE_S (10), in turn.
 *
 *   npm run bench:soak                 SOAK_MINUTES (10), SOAK_JOBS_PER_S (2),
 *                                      SOAK_FILES_PER_S (1), SOAK_KILL_EVERY_S (20)
 */
import fs from "fs";
import os from "os";
import path from "path";
import { ALL_SERVICES } from "../lib/launch/config";
import { LocalCluster } from "../lib/cluster/cluster";
import type { NodeProcess } from "../lib/cluster/node-process";
import { createSequelize } from "../lib/db/connection";
import { schedulerLeader } from "../lib/records/status";
import { freePort, freePortRun } from "../test/helpers/ports";

const MINUTES = Number(process.env.SOAK_MINUTES || 10);
const JOBS_PER_S = Number(process.env.SOAK_JOBS_PER_S || 2);
const FILES_PER_S = Number(process.env.SOAK_FILES_PER_S || 1);
const KILL_EVERY_S = Number(process.env.SOAK_KILL_EVERY_S || 20);
const SETTLE_TIMEOUT_S = Number(process.env.SOAK_SETTLE_TIMEOUT_S || 600);
const OUTAGE_EVERY = Number(process.env.SOAK_OUTAGE_EVERY || 3);
const CONTROL_OUTAGE_S = Number(process.env.SOAK_CONTROL_OUTAGE_S || 20);
const PG_OUTAGE_S = Number(process.env.SOAK_PG_OUTAGE_S || 10);

const say = (msg: string) => process.stdout.write(`${new Date().toISOString()} ${msg}\n`);
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/**
 * The job's work: a wait, then out.txt (its input's text, if any, plus a line), then a marker
 * named by its execution in `ran` (the work is done: a later execution of its job runs it twice).
 */
const stepScript = (ran: string) => `#!/bin/sh
# usage: soak-step.sh <output dir> <text> [input file]
set -e
sleep "$(( $$ % 3 )).$(( $$ % 9 + 1 ))"
{ if [ -n "$3" ]; then cat "$3"; fi; echo "$2"; } > "$1/out.txt"
: > "${ran}/$SCALE_JOB_EXE_ID"
echo "ARTIFACT:out:$1/out.txt"
`;

class Api {
	constructor(private readonly bases: string[]) {}

	/** A request to the first control plane that answers; a 5xx or no answer tries the next. */
	async call(method: string, p: string, body?: unknown, tries = 20): Promise<any> {
		let last = "";
		for (let attempt = 0; attempt < tries; attempt++) {
			for (const base of this.bases) {
				let res: Response;
				let text: string;
				try {
					res = await fetch(`${base}${p}`, {
						method,
						headers: body ? { "Content-Type": "application/json" } : {},
						body: body ? JSON.stringify(body) : undefined,
						signal: AbortSignal.timeout(10000)
					});
					text = await res.text();
				} catch (err) {
					last = `${method} ${p}: ${(err as Error).message}`;
					continue;
				}
				if (res.status < 300) return text ? JSON.parse(text) : null;
				last = `${method} ${p}: ${res.status} ${text.slice(0, 300)}`;
				if (res.status < 500) throw new Error(last);
			}
			await sleep(500);
		}
		throw new Error(`no control plane answered: ${last}`);
	}
}

async function main() {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-soak-"));
	fs.chmodSync(dir, 0o755);
	const script = path.join(dir, "soak-step.sh");
	const products = path.join(dir, "products");
	const raw = path.join(dir, "raw");
	const drop = path.join(dir, "drop");
	const ran = path.join(dir, "ran");
	for (const d of [products, raw, drop, ran]) {
		fs.mkdirSync(d, { recursive: true });
		fs.chmodSync(d, 0o777); // the jobs run under uids of their own
	}
	fs.writeFileSync(script, stepScript(ran), { mode: 0o755 });

	const apiPort = await freePortRun(2); // the second control plane takes apiPort + 1
	const log = fs.createWriteStream(path.join(dir, "cluster.log"));
	const cluster = new LocalCluster({
		dataDir: path.join(dir, "cluster"),
		apiPort,
		natsPort: await freePort(),
		pgPort: await freePort(),
		controlPlanes: 2,
		agents: 3,
		controlServices: ALL_SERVICES.filter(
			s => !["node-agent", "ingest", "triggers"].includes(s)
		),
		extra: [
			{ name: "ingest", services: ["ingest"] },
			{ name: "triggers", services: ["triggers"] }
		],
		logLevel: "warn",
		write: line => log.write(`${line}\n`)
	});
	const api = new Api([cluster.apiUrl(0), cluster.apiUrl(1)]);
	let failed = false;
	try {
		say(
			`soak: ${MINUTES} min, ${JOBS_PER_S} jobs/s, ${FILES_PER_S} files/s, a SIGKILL every ${KILL_EVERY_S} s; work in ${dir}`
		);
		await cluster.start();
		const db = createSequelize(cluster.databaseUrl, { poolMax: 2 });
		const q = async <T = any>(sql: string, bind: unknown[] = []): Promise<T[]> =>
			(await db.query(sql, { bind }))[0] as T[];
		try {
			for (;;) {
				const [row] = await q<{ n: string }>(
					"SELECT count(*) AS n FROM node WHERE is_active"
				);
				if (Number(row.n) === 3) break;
				await sleep(500);
			}
			failed = !(await soak(cluster, api, q, () => schedulerLeader(db), {
				script,
				products,
				raw,
				drop,
				ran
			}));
		} finally {
			await db.close();
		}
	} catch (err) {
		failed = true;
		say(`soak failed: ${(err as Error).stack ?? err}`);
	} finally {
		await cluster.stop().catch(() => undefined);
		log.end();
		if (!failed) fs.rmSync(dir, { recursive: true, force: true });
		else say(`kept ${dir} (cluster.log has every process's output)`);
	}
	process.exit(failed ? 1 : 0);
}

type Query = <T = any>(sql: string, bind?: unknown[]) => Promise<T[]>;

async function soak(
	cluster: LocalCluster,
	api: Api,
	q: Query,
	leaderOf: () => Promise<string | null>,
	dirs: { script: string; products: string; raw: string; drop: string; ran: string }
): Promise<boolean> {
	const ws = async (name: string, dir: string) =>
		(
			await api.call("POST", "/workspaces/", {
				name,
				title: name,
				json_config: { version: "1.0", broker: { type: "host", host_path: dir } }
			})
		).id as number;
	const productsId = await ws("products", dirs.products);
	await ws("raw", dirs.raw);
	const jobType = (name: string, args: string, inputs: unknown[]) =>
		api.call("POST", "/job-types/", {
			name,
			version: "1.0",
			title: name,
			cpus_required: 0.1,
			mem_required: 16,
			max_tries: 5,
			interface: {
				version: "1.0",
				command: dirs.script,
				command_arguments: args,
				input_data: inputs,
				output_data: [{ name: "out", type: "file", media_type: "text/plain" }]
			}
		});
	const plain = await jobType("soak-plain", "${job_output_dir} plain", []);
	const fileInput = [{ name: "in", type: "file" }];
	await jobType("soak-a", "${job_output_dir} A ${in}", fileInput);
	await jobType("soak-b", "${job_output_dir} B ${in}", fileInput);
	await api.call("POST", "/recipe-types/", {
		name: "soak-recipe",
		version: "1.0",
		definition: {
			version: "1.0",
			input_data: [{ name: "image", type: "file" }],
			jobs: [
				{
					name: "A",
					job_type: { name: "soak-a", version: "1.0" },
					recipe_inputs: [{ recipe_input: "image", job_input: "in" }]
				},
				{
					name: "B",
					job_type: { name: "soak-b", version: "1.0" },
					dependencies: [{ name: "A", connections: [{ output: "out", input: "in" }] }]
				}
			]
		},
		trigger_rule: {
			type: "INGEST",
			configuration: {
				condition: { media_type: "text/plain", data_types: ["soak"] },
				data: { input_data_name: "image", workspace_name: "products" }
			}
		}
	});
	await api.call("POST", "/strike/create/", {
		name: "soak-drop",
		title: "Soak drop",
		configuration: {
			version: "1.0",
			mount: dirs.drop,
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{
					filename_regex: ".*\\.txt$",
					data_types: ["soak"],
					workspace_path: "in",
					workspace_name: "raw"
				}
			]
		}
	});

	const jobData = {
		version: "1.0",
		input_data: [],
		output_data: [{ name: "out", workspace_id: productsId }]
	};
	const kills = new Map<string, number>();
	const stats = { queued: 0, queueErrors: 0, dropped: 0 };
	const dropped: string[] = [];
	const end = Date.now() + MINUTES * 60_000;
	let loading = true;

	const queueLoop = (async () => {
		while (loading) {
			const t = Date.now();
			for (let i = 0; i < JOBS_PER_S; i++)
				try {
					await api.call(
						"POST",
						"/queue/new-job/",
						{ job_type_id: plain.id, job_data: jobData },
						3
					);
					stats.queued++;
				} catch {
					stats.queueErrors++; // refused while both control planes were down: not queued
				}
			await sleep(Math.max(0, 1000 - (Date.now() - t)));
		}
	})();
	const dropLoop = (async () => {
		let n = 0;
		while (loading) {
			for (let i = 0; i < FILES_PER_S; i++) {
				const name = `soak-${++n}.txt`;
				const temp = path.join(dirs.drop, `${name}_tmp`);
				fs.writeFileSync(temp, `file ${n}\n`);
				fs.renameSync(temp, path.join(dirs.drop, name));
				dropped.push(name);
				stats.dropped++;
			}
			await sleep(1000);
		}
	})();
	const killLoop = (async () => {
		let faults = 0;
		let outages = 0;
		while (loading) {
			await sleep(KILL_EVERY_S * 1000);
			if (!loading) break;
			if (OUTAGE_EVERY > 0 && ++faults % OUTAGE_EVERY === 0) {
				const kind = await outage(cluster, outages++);
				kills.set(kind, (kills.get(kind) ?? 0) + 1);
				continue;
			}
			const victim = await pickVictim(cluster, leaderOf);
			const kind = victim.kind;
			say(`kill ${victim.node.name} (${kind})`);
			await victim.node.kill();
			kills.set(kind, (kills.get(kind) ?? 0) + 1);
			await sleep(1000 + Math.random() * 4000);
			victim.node.start();
		}
	})();
	const progress = setInterval(async () => {
		const [row] = await q(
			`SELECT count(*) FILTER (WHERE status = 'COMPLETED') AS completed, count(*) AS jobs
			 FROM job j JOIN job_type t ON t.id = j.job_type_id WHERE NOT t.is_system`
		).catch(() => [{ completed: "?", jobs: "?" }]);
		say(
			`progress: ${stats.queued} jobs queued, ${stats.dropped} files dropped; ${row.jobs} jobs, ${row.completed} completed; kills ${[...kills.values()].reduce((a, b) => a + b, 0)}`
		);
	}, 30_000);
	while (Date.now() < end) await sleep(1000);
	loading = false;
	clearInterval(progress);
	await Promise.all([queueLoop, dropLoop, killLoop]);
	for (const p of cluster.processes) if (!p.running) p.start();
	say("load stopped; every process running; waiting for the work to settle");

	// Settle: every job terminal and every dropped file ingested.
	const settleEnd = Date.now() + SETTLE_TIMEOUT_S * 1000;
	let open = { jobs: -1, files: -1 };
	while (Date.now() < settleEnd) {
		const [row] = await q<{ jobs: string; files: string }>(
			`SELECT (SELECT count(*) FROM job j JOIN job_type t ON t.id = j.job_type_id
				WHERE NOT t.is_system AND j.status NOT IN ('COMPLETED', 'FAILED', 'CANCELED')) AS jobs,
			 (SELECT count(*) FROM unnest($1::text[]) f(name) WHERE NOT EXISTS (
				SELECT 1 FROM ingest i WHERE i.file_name = f.name
					AND i.status IN ('INGESTED', 'DUPLICATE', 'ERRORED', 'DEFERRED'))) AS files`,
			[dropped]
		);
		open = { jobs: Number(row.jobs), files: Number(row.files) };
		if (open.jobs === 0 && open.files === 0) {
			// a last ingest may yet trigger a recipe: look again after the trigger poll
			await sleep(10_000);
			const [again] = await q<{ n: string }>(
				`SELECT count(*) AS n FROM job j JOIN job_type t ON t.id = j.job_type_id
				 WHERE NOT t.is_system AND j.status NOT IN ('COMPLETED', 'FAILED', 'CANCELED')`
			);
			if (Number(again.n) === 0) break;
		}
		say(`settling: ${open.jobs} jobs not terminal, ${open.files} dropped files not ingested`);
		await sleep(5000);
	}
	return report(q, dropped, stats, kills, dirs);
}

/** The `n`th outage, in turn: the control planes, nats-server, PostgreSQL. Answers its kind. */
async function outage(cluster: LocalCluster, n: number): Promise<string> {
	const kind = ["control-plane outage", "NATS restart", "PostgreSQL stop"][n % 3];
	if (kind === "control-plane outage") {
		say(`kill every control plane for ${CONTROL_OUTAGE_S} s (past the agents' lease)`);
		const down = cluster.controls.filter(c => c.running);
		await Promise.all(down.map(c => c.kill()));
		await sleep(CONTROL_OUTAGE_S * 1000);
		for (const c of down) c.start();
	} else if (kind === "NATS restart") {
		const s = 3 + Math.random() * 5;
		say(`stop nats-server for ${s.toFixed(1)} s`);
		await cluster.stopNats();
		await sleep(s * 1000);
		await cluster.startNats();
	} else {
		say(`stop PostgreSQL for ${PG_OUTAGE_S} s`);
		await cluster.pg!.stop();
		await sleep(PG_OUTAGE_S * 1000);
		await cluster.pg!.start();
	}
	return kind;
}

async function pickVictim(
	cluster: LocalCluster,
	leaderOf: () => Promise<string | null>
): Promise<{ node: NodeProcess; kind: string }> {
	const lead = await leaderOf().catch(() => null);
	const leader = cluster.controls.find(c => c.name === lead && c.running);
	const choices: { node: NodeProcess; kind: string }[] = [];
	if (leader) choices.push({ node: leader, kind: "scheduler leader" });
	for (const c of cluster.controls)
		if (c !== leader && c.running) choices.push({ node: c, kind: "API replica" });
	for (const a of cluster.agents) if (a.running) choices.push({ node: a, kind: "agent" });
	for (const e of cluster.extras) if (e.running) choices.push({ node: e, kind: e.name });
	return choices[Math.floor(Math.random() * choices.length)];
}

async function report(
	q: Query,
	dropped: string[],
	stats: { queued: number; queueErrors: number; dropped: number },
	kills: Map<string, number>,
	dirs: { products: string; raw: string; ran: string }
): Promise<boolean> {
	// executions whose work was done (their marker), and those of their jobs that came after
	const finishedWork = fs.readdirSync(dirs.ran).map(Number);
	const [ranTwice] = await q(
		`SELECT count(*) AS n FROM job_exe later WHERE EXISTS (SELECT 1 FROM job_exe earlier
			WHERE earlier.job_id = later.job_id AND earlier.id < later.id
				AND earlier.id = ANY($1::int[]))`,
		[finishedWork]
	);
	const [jobs] = await q(
		`SELECT count(*) AS jobs,
			count(*) FILTER (WHERE j.status = 'COMPLETED') AS completed,
			count(*) FILTER (WHERE j.status = 'FAILED') AS failed,
			count(*) FILTER (WHERE j.status NOT IN ('COMPLETED', 'FAILED', 'CANCELED')) AS open,
			count(*) FILTER (WHERE t.name = 'soak-plain') AS plain
		 FROM job j JOIN job_type t ON t.id = j.job_type_id WHERE NOT t.is_system`
	);
	const [exes] = await q(
		`SELECT count(*) AS exes, count(*) FILTER (WHERE e.status = 'FAILED') AS failed_exes
		 FROM job_exe e JOIN job j ON j.id = e.job_id JOIN job_type t ON t.id = j.job_type_id
		 WHERE NOT t.is_system`
	);
	const [twice] = await q(
		`SELECT count(*) AS n FROM (SELECT job_id FROM job_exe WHERE status = 'COMPLETED'
			GROUP BY job_id HAVING count(*) > 1) x`
	);
	const [dupProducts] = await q(
		`SELECT count(*) AS n FROM (SELECT job_id, file_name FROM scale_file
			WHERE file_type = 'PRODUCT' AND NOT is_deleted GROUP BY job_id, file_name
			HAVING count(*) > 1) x`
	);
	const [dupSources] = await q(
		`SELECT count(*) AS n FROM (SELECT file_name FROM scale_file WHERE file_type = 'SOURCE'
			GROUP BY file_name HAVING count(*) > 1) x`
	);
	const ingests = await q<{ status: string; n: string }>(
		`SELECT status, count(*) AS n FROM ingest WHERE file_name = ANY($1::text[]) GROUP BY status`,
		[dropped]
	);
	const [ingestDups] = await q(
		`SELECT count(*) AS n FROM (SELECT file_name FROM ingest WHERE file_name = ANY($1::text[])
			AND status = 'INGESTED' GROUP BY file_name HAVING count(*) > 1) x`,
		[dropped]
	);
	const [notIngested] = await q(
		`SELECT count(*) AS n FROM unnest($1::text[]) f(name) WHERE NOT EXISTS (
			SELECT 1 FROM scale_file s WHERE s.file_type = 'SOURCE' AND s.file_name = f.name)`,
		[dropped]
	);
	const [recipes] = await q(
		`SELECT count(*) AS recipes, count(*) FILTER (WHERE completed IS NOT NULL) AS completed
		 FROM recipe`
	);
	const files = await q<{ file_type: string; workspace: string; file_path: string }>(
		`SELECT s.file_type, w.name AS workspace, s.file_path FROM scale_file s
		 JOIN workspace w ON w.id = s.workspace_id WHERE NOT s.is_deleted`
	);
	const roots: Record<string, string> = { products: dirs.products, raw: dirs.raw };
	const missingFiles = files.filter(
		f => !fs.existsSync(path.join(roots[f.workspace] ?? "/nonexistent", f.file_path))
	).length;
	const [plainJobs] = await q(
		`SELECT count(*) AS n FROM job j JOIN job_type t ON t.id = j.job_type_id WHERE t.name = 'soak-plain'`
	);

	const lostJobs = Number(jobs.open) + Math.max(0, stats.queued - Number(plainJobs.n));
	const lost = lostJobs + Number(notIngested.n) + missingFiles;
	const duplicates =
		Number(twice.n) + Number(dupProducts.n) + Number(dupSources.n) + Number(ingestDups.n);
	const killed = [...kills.entries()].map(([k, n]) => `${k} ${n}`).join(", ");
	say("soak result");
	say(
		`  jobs: ${jobs.jobs} (${jobs.plain} queued through the API of ${stats.queued} accepted, ${stats.queueErrors} refused while no control plane answered; the rest by recipes), ${jobs.completed} COMPLETED, ${jobs.failed} FAILED, ${jobs.open} not terminal`
	);
	say(
		`  executions: ${exes.exes}, ${exes.failed_exes} FAILED (killed agents' node-lost, retried)`
	);
	say(
		`  files dropped: ${dropped.length}; ingests: ${ingests.map(i => `${i.status} ${i.n}`).join(", ")}; recipes: ${recipes.recipes}, ${recipes.completed} completed`
	);
	say(`  stored files checked on disk: ${files.length}, missing ${missingFiles}`);
	say(`  faults: ${[...kills.values()].reduce((a, b) => a + b, 0)} (${killed || "none"})`);
	say(
		`  lost = ${lost} (jobs not terminal or never created ${lostJobs}, dropped files without a source file ${notIngested.n}, stored files missing ${missingFiles})`
	);
	say(
		`  duplicates = ${duplicates} (jobs completed twice ${twice.n}, products twice ${dupProducts.n}, source files twice ${dupSources.n}, files ingested twice ${ingestDups.n})`
	);
	say(
		`  work run twice = ${ranTwice.n} (executions after one of the same job whose work had finished; ${finishedWork.length} executions finished their work)`
	);
	return lost === 0 && duplicates === 0 && Number(ranTwice.n) === 0;
}

void main();
