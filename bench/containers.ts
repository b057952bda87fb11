/**
 * P8: container jobs end to end through the service, beside the docker CLI in the same run.
 *
 *   - a Docker engine of its own (startDockerd, as root; or BENCH_DOCKER_HOST / TEST_DOCKER_HOST,
 *     a unix:// socket of an engine already running) and the busybox test image;
 *   - the docker CLI's rate: `docker run --rm --network none IMAGE /bin/true` P8_JOBS times,
 *     P8_CONCURRENCY at a time, before the service's run and again after it (the machine drifts);
 *     each run is given a `--name` too, to match it to the engine's start event;
 *   - `npm start`'s process (the agent in it) with AGENT_DOCKER_HOST on that engine,
 *     AGENT_DOCKER_NETWORK=none and AGENT_CPUS = the machine's cpus, and a job type of
 *     `docker_image` the test image, `/bin/true`, cpus_required = cpus / P8_CONCURRENCY (so that
 *     exactly P8_CONCURRENCY run at once), mem_required 32: P8_WARMUP jobs unmeasured, then
 *     P8_IDLE jobs one at a time (QUEUED → container started on an idle cluster), then P8_JOBS
 *     posted at once from 8 clients: jobs/s from the first post to the last COMPLETED;
 *   - "container started" is the engine's own `start` event (read from its event stream,
 *     matched to the execution by the container's `scale.job_exe_id` label), beside the agent's
 *     `job_started` (its main step begun: before the container is created);
 *   - CPU per job (per run for the CLI): the service's process tree and its own process;
 *     the engine, i.e. dockerd, containerd, the shims and runc: our dockerd and containerd are
 *     moved into a cpuacct cgroup of their own (cgroup v1, else v2's cpu.stat), so the shims and
 *     runc they start are counted too (without a cgroup: dockerd and containerd alone, from /proc);
 *     PostgreSQL; the docker CLI processes (reaped children of this process); this client.
 *
 *   npm run bench:containers
 *   P8_JOBS=500 P8_CONCURRENCY=4 P8_WARMUP=20 P8_IDLE=50 npm run bench:containers
 */
import { spawn } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";
import Docker from "dockerode";
import {
	benchDatabase,
	percentile,
	postJson,
	postJsonExpecting,
	startService,
	waitForCount
} from "./lib/cluster";
import { ownCpuSeconds, treeCpuSeconds } from "./lib/cpu";
import {
	dockerCliPath,
	dockerSocket,
	ensureTestImage,
	startDockerd,
	type Dockerd
} from "../test/helpers/dockerd";

const JOBS = Number(process.env.P8_JOBS) || 200;
const CONCURRENCY = Number(process.env.P8_CONCURRENCY) || 8;
const WARMUP = Number(process.env.P8_WARMUP ?? 20);
const IDLE = Number(process.env.P8_IDLE ?? 20);
const CLIENTS = 8;
const MEM_MIB = 32;

const say = (msg: string) => process.stdout.write(`${msg}\n`);
const ms = (seconds: number, per: number) => ((seconds / per) * 1000).toFixed(2);
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const p50p99 = (values: number[]) => {
	const s = sorted(values);
	return `p50 ${percentile(s, 50).toFixed(1)} ms, p99 ${percentile(s, 99).toFixed(1)} ms`;
};

// ------------------------------------------------------------------------------ the engine's CPU

function cmdline(pid: number): string[] {
	try {
		return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
	} catch {
		return [];
	}
}

function parentOf(pid: number): number {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
		return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
	} catch {
		return -1;
	}
}

/** The dockerd listening on `socket` (found by its -H argument) and its containerd child. */
function enginePids(socket: string): { dockerd: number | null; containerd: number | null } {
	const pids = fs
		.readdirSync("/proc")
		.filter(e => /^\d+$/.test(e))
		.map(Number);
	const dockerd =
		pids.find(pid => {
			const argv = cmdline(pid);
			return (
				path.basename(argv[0] ?? "") === "dockerd" &&
				argv.some(a => a === `unix://${socket}` || a === socket)
			);
		}) ?? null;
	const containerd =
		dockerd === null
			? null
			: (pids.find(
					pid =>
						parentOf(pid) === dockerd &&
						path.basename(cmdline(pid)[0] ?? "") === "containerd"
				) ?? null);
	return { dockerd, containerd };
}

interface EngineCpu {
	/** what is counted, for the printout */
	what: string;
	/** CPU seconds so far */
	seconds(): number;
	/** undoes the cgroup (after the engine stopped) */
	remove(): void;
}

/**
 * The engine's CPU: our dockerd and containerd moved into a cgroup of their own, so that what
 * they start later (the shims, daemonized, and the runc they run) is counted with them, even
 * once exited. Else dockerd's process tree from /proc (containerd is its child; the shims are not).
 */
function engineCpu(socket: string, ours: boolean): EngineCpu | null {
	const { dockerd, containerd } = enginePids(socket);
	if (dockerd === null) return null;
	const pids = [dockerd, ...(containerd === null ? [] : [containerd])];
	const fromProc: EngineCpu = {
		what: "dockerd and containerd (from /proc: the shims and runc not counted)",
		seconds: () => treeCpuSeconds(dockerd),
		remove: () => undefined
	};
	if (!ours) return fromProc;
	const v1 = "/sys/fs/cgroup/cpuacct";
	const v2 = "/sys/fs/cgroup";
	const root = fs.existsSync(path.join(v1, "cpuacct.usage"))
		? v1
		: fs.existsSync(path.join(v2, "cgroup.controllers"))
			? v2
			: null;
	if (!root) return fromProc;
	const dir = path.join(root, `scale-bench-engine-${process.pid}`);
	try {
		fs.mkdirSync(dir);
		for (const pid of pids) fs.writeFileSync(path.join(dir, "cgroup.procs"), String(pid));
	} catch (error) {
		say(`(the engine's cgroup could not be made: ${(error as Error).message})`);
		try {
			for (const pid of pids) fs.writeFileSync(path.join(root, "cgroup.procs"), String(pid));
			fs.rmdirSync(dir);
		} catch {
			// nothing made
		}
		return fromProc;
	}
	const seconds =
		root === v1
			? () => Number(fs.readFileSync(path.join(dir, "cpuacct.usage"), "utf8")) / 1e9
			: () =>
					Number(
						/usage_usec (\d+)/.exec(
							fs.readFileSync(path.join(dir, "cpu.stat"), "utf8")
						)![1]
					) / 1e6;
	return {
		what: `dockerd, containerd, the shims and runc (a ${root === v1 ? "cpuacct" : "cgroup v2"} group of their own)`,
		seconds,
		remove() {
			for (let i = 0; i < 50; i++) {
				try {
					fs.rmdirSync(dir);
					return;
				} catch {
					// processes left in it (a shim exiting): back to the root group, then again
					const left = fs
						.readFileSync(path.join(dir, "cgroup.procs"), "utf8")
						.split("\n")
						.filter(Boolean);
					for (const pid of left)
						try {
							fs.writeFileSync(path.join(root, "cgroup.procs"), pid);
						} catch {
							// gone meanwhile
						}
				}
			}
		}
	};
}

/** CPU seconds of this process's reaped children (the docker CLI runs), from /proc/self/stat. */
function reapedChildrenCpu(): number {
	const stat = fs.readFileSync("/proc/self/stat", "utf8");
	const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	return (Number(fields[13]) + Number(fields[14])) / 100;
}

// ------------------------------------------------------------------------------ the engine's events

interface Started {
	id: string;
	/** ms since the epoch, from the engine's timeNano */
	at: number;
	name: string;
	jobExeId: number | null;
}

/** The engine's container start and die events, from now on, and the peak running at once. */
async function watchEvents(docker: Docker) {
	const stream = (await docker.getEvents({
		filters: { type: ["container"], event: ["start", "die"] }
	})) as NodeJS.ReadableStream & { destroy(): void };
	const starts: Started[] = [];
	const running = { service: new Set<string>(), bare: new Set<string>() };
	const peak = { service: 0, bare: 0 };
	let rest = "";
	stream.on("data", (chunk: Buffer) => {
		rest += chunk.toString("utf8");
		let nl: number;
		while ((nl = rest.indexOf("\n")) >= 0) {
			const line = rest.slice(0, nl).trim();
			rest = rest.slice(nl + 1);
			if (!line) continue;
			const event = JSON.parse(line);
			const attributes = event.Actor?.Attributes ?? {};
			const id: string = event.Actor?.ID ?? event.id;
			const exe = attributes["scale.job_exe_id"];
			const kind = exe ? "service" : "bare";
			if (event.Action === "start") {
				starts.push({
					id,
					at: Number(BigInt(event.timeNano) / 1000n) / 1000,
					name: attributes.name ?? "",
					jobExeId: exe ? Number(exe) : null
				});
				running[kind].add(id);
				peak[kind] = Math.max(peak[kind], running[kind].size);
			} else running[kind].delete(id);
		}
	});
	return {
		starts,
		/** the peak since the last call, and resets it */
		peak(kind: "service" | "bare") {
			const found = peak[kind];
			peak[kind] = running[kind].size;
			return found;
		},
		stop: () => stream.destroy()
	};
}

// ------------------------------------------------------------------------------ the docker CLI

/**
 * `docker run --rm --network none IMAGE /bin/true` n times, `concurrency` at a time: seconds,
 * each run's spawn time by its container name (to match the engine's start event), failures.
 */
async function bareRuns(host: string, image: string, n: number, concurrency: number, tag: string) {
	const cli = dockerCliPath();
	const env: NodeJS.ProcessEnv = { ...process.env, DOCKER_HOST: host };
	delete env.DOCKER_CONTEXT;
	const spawned = new Map<string, number>();
	let failures = 0;
	let firstFailure = "";
	let next = 0;
	const started = performance.now();
	const worker = async () => {
		while (next < n) {
			const name = `scale-bench-bare-${process.pid}-${tag}-${next++}`;
			await new Promise<void>(resolve => {
				spawned.set(name, Date.now());
				const child = spawn(
					cli,
					["run", "--rm", "--network", "none", "--name", name, image, "/bin/true"],
					{ env, stdio: ["ignore", "ignore", "pipe"] }
				);
				let stderr = "";
				child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
				child.on("close", code => {
					if (code !== 0) {
						failures++;
						firstFailure ||= `exit ${code}: ${stderr.trim()}`;
					}
					resolve();
				});
			});
		}
	};
	await Promise.all(Array.from({ length: concurrency }, worker));
	return { seconds: (performance.now() - started) / 1000, spawned, failures, firstFailure };
}

// ------------------------------------------------------------------------------ the bench

async function main() {
	const cpus = os.cpus().length;
	// what each job asks for, so that the agent's cpus (all of the machine's) hold CONCURRENCY
	const cpusRequired = Math.floor((cpus / CONCURRENCY) * 1000) / 1000;
	say(
		`${cpus} cpus, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, load average ${os
			.loadavg()
			.map(l => l.toFixed(2))
			.join(" ")}`
	);
	const given = process.env.BENCH_DOCKER_HOST || process.env.TEST_DOCKER_HOST;
	if (given) process.env.TEST_DOCKER_HOST = given;
	const engine: Dockerd = await startDockerd();
	const ours = !given;
	let cgroup: EngineCpu | null = null;
	let events: Awaited<ReturnType<typeof watchEvents>> | null = null;
	let db: Awaited<ReturnType<typeof benchDatabase>> | null = null;
	let service: Awaited<ReturnType<typeof startService>> | null = null;
	/** the service's agent's slave id: its containers' `scale.node` label */
	let node: string | null = null;
	const docker = new Docker({ socketPath: dockerSocket(engine.host) });
	try {
		cgroup = engineCpu(engine.socket, ours);
		const image = await ensureTestImage(engine.host);
		const version = await docker.version();
		const info = await docker.info();
		say(
			`engine: ${ours ? "a dockerd of this bench" : `given (${given})`} on ${engine.host}, Docker ${version.Version} (storage driver ${info.Driver}, cgroup driver ${info.CgroupDriver}), ${version.Os}/${version.Arch}; engine CPU counted: ${cgroup?.what ?? "not measured (no dockerd found on that socket)"}`
		);
		events = await watchEvents(docker);
		const engineSeconds = () => cgroup?.seconds() ?? NaN;

		// the docker CLI, warmed up, then measured: before the service's run
		await bareRuns(engine.host, image, 2 * CONCURRENCY, CONCURRENCY, "w");
		events.peak("bare");
		const bare = async (tag: string) => {
			const engine0 = engineSeconds();
			const cli0 = reapedChildrenCpu();
			const run = await bareRuns(engine.host, image, JOBS, CONCURRENCY, tag);
			const engineCpuS = engineSeconds() - engine0;
			const cliCpu = reapedChildrenCpu() - cli0;
			const latency: number[] = [];
			for (const s of events!.starts) {
				const at = run.spawned.get(s.name);
				if (at !== undefined) latency.push(s.at - at);
			}
			return {
				...run,
				rate: JOBS / run.seconds,
				engineCpu: engineCpuS,
				cliCpu,
				latency,
				peak: events!.peak("bare")
			};
		};
		const before = await bare("a");

		// the service
		db = await benchDatabase();
		const pgPid = db.pgPid;
		service = await startService(db.url, {
			AGENT_DOCKER_HOST: engine.host,
			AGENT_DOCKER_NETWORK: "none",
			AGENT_CPUS: String(cpus)
		});
		const api = service.api;
		const slaveIdFile = path.join(service.workDir, "slave_id");
		const jobType = await postJson(`${api}/job-types/`, {
			name: "container-true",
			version: "1.0",
			docker_image: image,
			cpus_required: cpusRequired,
			mem_required: MEM_MIB,
			disk_out_const_required: 0,
			max_tries: 1,
			interface: { command: "/bin/true", command_arguments: "" }
		});
		await waitForCount(db.db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 30000);
		node = fs.readFileSync(slaveIdFile, "utf8").trim();
		const NEW_JOB = { job_type_id: jobType.id, job_data: { input_data: [], output_data: [] } };
		const TERMINAL =
			"SELECT count(*) AS n FROM job WHERE status IN ('COMPLETED', 'FAILED', 'CANCELED')";
		let total = 0;
		/** Posts n jobs from `clients` clients, waits for all jobs so far to end: seconds. */
		const round = async (n: number, clients: number) => {
			const started = performance.now();
			let next = 0;
			const submit = async () => {
				while (next < n) {
					next++;
					await postJsonExpecting(`${api}/queue/new-job/`, NEW_JOB, 201);
				}
			};
			await Promise.all(Array.from({ length: clients }, submit));
			total += n;
			await waitForCount(db!.db, TERMINAL, total, 600000, 50);
			return (performance.now() - started) / 1000;
		};
		const failures = async () => {
			const [rows] = (await db!.db.query(
				`SELECT e.id, e.status, er.name AS error, l.stderr
				 FROM job_exe e LEFT JOIN error er ON er.id = e.error_id
				 LEFT JOIN job_exe_log l ON l.job_exe_id = e.id
				 WHERE e.status <> 'COMPLETED' ORDER BY e.id`
			)) as any;
			return rows as {
				id: number;
				status: string;
				error: string | null;
				stderr: string | null;
			}[];
		};
		const stopIfFailed = async (phase: string) => {
			const failed = await failures();
			if (failed.length === 0) return;
			const first = failed[0];
			throw new Error(
				`${phase}: ${failed.length} container jobs did not complete; the first, execution ${first.id}: ${first.status} ${first.error ?? ""}; its stderr: ${(first.stderr ?? "").trim().split("\n").slice(-5).join(" | ")}`
			);
		};
		/** Per execution from `fromId` on: QUEUED → main step begun, → container started, placed → started. */
		const latencies = async (fromId: number) => {
			const [rows] = (await db!.db.query(
				`SELECT id, extract(epoch FROM queued) * 1000 AS queued,
				        extract(epoch FROM started) * 1000 AS placed,
				        extract(epoch FROM job_started) * 1000 AS main
				 FROM job_exe WHERE id >= ${fromId} AND status = 'COMPLETED'`
			)) as any;
			const startOf = new Map<number, number>();
			for (const s of events!.starts) if (s.jobExeId !== null) startOf.set(s.jobExeId, s.at);
			const toMain: number[] = [];
			const toContainer: number[] = [];
			const placedToContainer: number[] = [];
			for (const r of rows) {
				toMain.push(Number(r.main) - Number(r.queued));
				const at = startOf.get(Number(r.id));
				if (at === undefined) continue;
				toContainer.push(at - Number(r.queued));
				placedToContainer.push(at - Number(r.placed));
			}
			return { toMain, toContainer, placedToContainer };
		};
		/** The most executions from `fromId` on that were RUNNING (placed, not ended) at once. */
		const peakRunning = async (fromId: number) => {
			const [[row]] = (await db!.db.query(
				`SELECT coalesce(max((SELECT count(*) FROM job_exe b
				   WHERE b.id >= ${fromId} AND b.started <= a.started AND b.ended > a.started)), 0) AS n
				 FROM job_exe a WHERE a.id >= ${fromId}`
			)) as any;
			return Number(row.n);
		};
		const maxExeId = async () => {
			const [[row]] = (await db!.db.query(
				"SELECT coalesce(max(id), 0) AS id FROM job_exe"
			)) as any;
			return Number(row.id);
		};

		// warm-up, unmeasured
		const warmSeconds = WARMUP > 0 ? await round(WARMUP, CLIENTS) : 0;
		await stopIfFailed("warm-up");
		// idle cluster: one job at a time
		const idleFrom = (await maxExeId()) + 1;
		for (let i = 0; i < IDLE; i++) {
			await round(1, 1);
			await new Promise(r => setTimeout(r, 10));
		}
		await stopIfFailed("idle");
		await new Promise(r => setTimeout(r, 200)); // the last start events
		const idle = await latencies(idleFrom);
		events.peak("service");

		// under load
		const loadFrom = (await maxExeId()) + 1;
		const read = () => ({
			service: treeCpuSeconds(service!.proc.pid!),
			serviceOwn: ownCpuSeconds(service!.proc.pid!),
			engine: engineSeconds(),
			pg: treeCpuSeconds(pgPid),
			client: process.cpuUsage()
		});
		const cpu0 = read();
		const seconds = await round(JOBS, CLIENTS);
		const cpu1 = read();
		await stopIfFailed("load");
		await new Promise(r => setTimeout(r, 200));
		const load = await latencies(loadFrom);
		const servicePeak = events.peak("service");
		const exePeak = await peakRunning(loadFrom);
		const rate = JOBS / seconds;
		await service.stop();
		service = null;

		// the docker CLI again, after
		const after = await bare("b");
		const bareMean = (before.rate + after.rate) / 2;

		const perJob = (a: number, b: number) => ms(b - a, JOBS);
		const clientCpu =
			(cpu1.client.user + cpu1.client.system - cpu0.client.user - cpu0.client.system) / 1e6;
		const busy =
			cpu1.service -
			cpu0.service +
			(cpu1.engine - cpu0.engine || 0) +
			cpu1.pg -
			cpu0.pg +
			clientCpu;
		say(
			`P8 concurrency ${CONCURRENCY}: the job type asks cpus_required ${cpusRequired} (AGENT_CPUS=${cpus}), mem_required ${MEM_MIB}; the bare runs ${CONCURRENCY} CLI processes at a time`
		);
		for (const [label, b] of [
			["before", before],
			["after", after]
		] as const)
			say(
				`P8 docker CLI (${label}): \`docker run --rm --network none --name <n> ${image} /bin/true\` x${JOBS}, ${CONCURRENCY} at a time: ${b.rate.toFixed(1)} runs/s (${b.seconds.toFixed(1)} s, ${b.failures} failed${b.failures ? `: ${b.firstFailure}` : ""}; at most ${b.peak} containers running at once); CLI spawned -> container started ${p50p99(b.latency)}; CPU per run: docker CLI ${ms(b.cliCpu, JOBS)} ms, engine ${ms(b.engineCpu, JOBS)} ms`
			);
		say(
			`P8 container jobs through REST, one agent: ${rate.toFixed(1)} jobs/s (${JOBS} jobs from ${CLIENTS} clients in ${seconds.toFixed(1)} s; at most ${exePeak} executions RUNNING at once, of ${CONCURRENCY} the agent's cpus allow, and ${servicePeak} containers running), after a warm-up of ${WARMUP} jobs${WARMUP > 0 ? ` that ran at ${(WARMUP / warmSeconds).toFixed(1)} jobs/s` : ""}`
		);
		say(
			`P8 ratio: ${(rate / bareMean).toFixed(3)} of the CLI's mean rate (${(rate / before.rate).toFixed(3)} of before, ${(rate / after.rate).toFixed(3)} of after) (target >= 1.0)`
		);
		say(
			`P8 QUEUED -> container started, idle cluster (${idle.toContainer.length} jobs one at a time): ${p50p99(idle.toContainer)}; QUEUED -> the agent's main step begun (job_started): ${p50p99(idle.toMain)}; placed -> container started: ${p50p99(idle.placedToContainer)}`
		);
		say(
			`P8 QUEUED -> container started, under load (${load.toContainer.length} jobs, ${CONCURRENCY} at a time): ${p50p99(load.toContainer)}; QUEUED -> job_started: ${p50p99(load.toMain)}; placed -> container started: ${p50p99(load.placedToContainer)}`
		);
		say(
			`P8 CPU per container job: service ${perJob(cpu0.service, cpu1.service)} ms (its own process ${perJob(cpu0.serviceOwn, cpu1.serviceOwn)} ms: the agent, scheduler and API in one), engine ${perJob(cpu0.engine, cpu1.engine)} ms, PostgreSQL ${perJob(cpu0.pg, cpu1.pg)} ms, this client ${ms(clientCpu, JOBS)} ms; ${((busy / seconds / cpus) * 100).toFixed(0)}% of ${cpus} cpus busy`
		);
		const idleS = sorted(idle.toContainer);
		const loadS = sorted(load.toContainer);
		say(
			`P8 summary: ${rate.toFixed(1)} container jobs/s vs docker CLI ${before.rate.toFixed(1)} / ${after.rate.toFixed(1)} runs/s (ratio ${(rate / bareMean).toFixed(2)}, target >= 1.0); QUEUED -> container started idle p50 ${percentile(idleS, 50).toFixed(0)} / p99 ${percentile(idleS, 99).toFixed(0)} ms, under load p50 ${percentile(loadS, 50).toFixed(0)} / p99 ${percentile(loadS, 99).toFixed(0)} ms; CPU per job: service ${perJob(cpu0.service, cpu1.service)} ms + engine ${perJob(cpu0.engine, cpu1.engine)} ms (CLI per run: ${ms((before.cliCpu + after.cliCpu) / 2, JOBS)} ms + engine ${ms((before.engineCpu + after.engineCpu) / 2, JOBS)} ms)`
		);
		if (before.failures + after.failures > 0) process.exitCode = 1;
	} finally {
		if (service) await service.stop().catch(() => undefined);
		if (db) await db.stop().catch(() => undefined);
		// no container of ours is left: the service's (its agent's label) and the CLI's (--rm, named)
		events?.stop();
		const left = await docker
			.listContainers({ all: true })
			.catch(() => [] as Docker.ContainerInfo[]);
		const ourLeft = left.filter(
			c =>
				(node !== null && c.Labels?.["scale.node"] === node) ||
				(c.Names ?? []).some(n => n.startsWith(`/scale-bench-bare-${process.pid}-`))
		);
		await Promise.all(
			ourLeft.map(c =>
				docker
					.getContainer(c.Id)
					.remove({ force: true })
					.catch(() => undefined)
			)
		);
		say(`P8 containers left on the engine at the end: ${ourLeft.length} (removed)`);
		await engine.stop();
		cgroup?.remove();
	}
}

main().then(
	() => process.exit(),
	error => {
		console.error(error);
		process.exit(1);
	}
);
