/**
 * The cluster-scale figures of issue "[8 of 8]", with the cluster's NATS permissions in force:
 *   P6  one control plane (every service but node-agent, as `npm start` runs them, in a process
 *       of its own) and 1,000 simulated agents (bench/lib/simulated-agents.ts: Moleculer nodes
 *       speaking the transit protocol) through one nats-server, on this machine. Each node has
 *       its own NATS user and random password with the permissions `npm run cluster` gives it
 *       (`natsUsers()`, lib/cluster/nats-identities.ts): the control plane (role control), the
 *       P7 agent and every simulated agent (role agent), each simulated agent on a connection of
 *       its own, so nats-server holds each to its permissions. P6_JOBS jobs are queued with the
 *       scheduler paused; from its resume to the last `node-agent.run` received is the placement
 *       rate, beside Nomad's C1M rate (3,750/s). Then every execution is reported COMPLETED
 *       (reports/s), and the record is checked: every job COMPLETED, one execution each, no run
 *       sent twice, no permission violation in nats-server's log (any is a fault of the
 *       simulated protocol or of the permissions). The control plane's RSS is sampled; the CPU
 *       per placement and per report of the control plane, PostgreSQL, nats-server and this
 *       process (the simulated agents, which share the machine's cpus) is printed.
 *   P7  the RSS of a real agent process (as `npm run agent` starts it: SERVICES=node-agent, its
 *       node options, no database URL, its own NATS identity) idle in that cluster: before the
 *       simulated agents join (2 nodes) and after (1,002 nodes).
 *
 *   npm run bench:agents          P6_AGENTS (1000), P6_JOBS (20000), P7_IDLE_S (20)
 *   P6_PERMISSIONS=false npm run bench:agents
 *       as before the identities: one password user for every node, no permissions, the
 *       simulated agents on one connection (what the permissions cost, beside the above);
 *       with P6_CONNECTIONS=per-agent, that user on a connection per simulated agent (what the
 *       connections cost, apart from the permissions)
 */
import fs from "fs";
import os from "os";
import path from "path";
import { queueNewJobs } from "../lib/jobs/new-job";
import { patchJson, percentile, postJson, waitForCount } from "./lib/cluster";
import { ownCpuSeconds, rssSampler, treeCpuSeconds, treeRssKiB } from "./lib/cpu";
import { controlPlaneOverNats, startAgent } from "./lib/agent-process";
import { SimulatedAgents, simulatedAgentIds } from "./lib/simulated-agents";
import { transaction } from "../lib/db/run";

const AGENTS = Number(process.env.P6_AGENTS || 1000);
const JOBS = Number(process.env.P6_JOBS || 20000);
const IDLE_S = Number(process.env.P7_IDLE_S || 20);
// each node its own NATS identity with its permissions (false: one shared password user)
const PERMISSIONS = !/^(0|false|no)$/i.test(process.env.P6_PERMISSIONS || "");
// a NATS connection per simulated agent, as real agents have (by default with the permissions;
// P6_CONNECTIONS=per-agent with P6_PERMISSIONS=false tells the connections' cost from theirs)
const CONNECTION_PER_AGENT =
	(process.env.P6_CONNECTIONS || (PERMISSIONS ? "per-agent" : "one")) === "per-agent";
if (PERMISSIONS && !CONNECTION_PER_AGENT)
	throw new Error(
		"with the permissions, each simulated agent needs its own connection (P6_CONNECTIONS=per-agent)"
	);
// the issue's "80 MB" read as 10^6 bytes, the stricter reading (76.3 MiB)
const TARGET = { placementsPerS: 3750, agentRssMB: 80 };
const mb = (mebibytes: number) => (mebibytes * 1024 * 1024) / 1e6;
const CONTROL_PLANE = "p6-control";
const P7_AGENT = "p7-agent";

const JOB_TYPE = {
	name: "p6-placed",
	version: "1.0",
	cpus_required: 1,
	mem_required: 64,
	disk_out_const_required: 0,
	max_tries: 1,
	interface: { command: "/bin/true", command_arguments: "" }
};

const say = (msg: string) => process.stdout.write(`${msg}\n`);

/** CPU seconds the whole machine has spent busy (all cpus, /proc/stat: not idle, not iowait). */
function machineBusySeconds(): number {
	const fields = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/);
	const ticks = fields.slice(1, 9).map(Number);
	return (ticks.reduce((a, b) => a + b, 0) - ticks[3] - ticks[4]) / 100;
}
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const mib = (kib: number) => kib / 1024;

async function main() {
	const work = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-agents-"));
	const ids = simulatedAgentIds(AGENTS);
	const cluster = await controlPlaneOverNats(
		work,
		{ NODE_ID: CONTROL_PLANE },
		PERMISSIONS
			? [
					{ name: CONTROL_PLANE, role: "control" },
					{ name: P7_AGENT, role: "agent" },
					...ids.map(name => ({ name, role: "agent" as const }))
				]
			: undefined
	);
	const { db, service, nats } = cluster;
	say(
		`NATS: ${PERMISSIONS ? `a user per node (${AGENTS + 2}), with the permissions of \`npm run cluster\`` : "one password user for every node, no permissions (P6_PERMISSIONS=false)"}; the simulated agents on ${CONNECTION_PER_AGENT ? "a connection each" : "one connection"}`
	);
	const controlRss = rssSampler(service.proc.pid!, 100);
	const agentDir = path.join(work, "agent");
	fs.mkdirSync(agentDir);
	const p7Env = cluster.envOf(P7_AGENT);
	const agent = startAgent(p7Env.TRANSPORTER, agentDir, P7_AGENT, p7Env);
	const simulated = new SimulatedAgents({
		servers: nats.address,
		credentials: cluster.credentials,
		connectionPerAgent: CONNECTION_PER_AGENT,
		tlsCaFile: cluster.caFile,
		namespace: "scale",
		ids,
		controlPlane: CONTROL_PLANE,
		resources: { cpus: Math.ceil((2 * JOBS) / AGENTS), mem: 1e6, disk: 1e6 },
		heartbeatMs: 5000,
		brokerHeartbeatMs: 10000
	});
	/**
	 * CPU seconds so far of the control plane, PostgreSQL, nats-server, this process (the
	 * simulated agents, and the bench's sampling and queries), the P7 agent and the whole machine
	 * (any other process's share says the figures were taken under load), and the simulated
	 * agents' packets.
	 */
	const cpu = () => {
		const own = process.cpuUsage();
		return {
			control: ownCpuSeconds(service.proc.pid!),
			pg: treeCpuSeconds(cluster.pgPid),
			nats: ownCpuSeconds(nats.proc.pid!),
			sim: (own.user + own.system) / 1e6,
			agent: treeCpuSeconds(agent.pid!),
			machine: machineBusySeconds(),
			at: performance.now(),
			packetsIn: simulated.packetsIn,
			packetsOut: simulated.packetsOut
		};
	};
	const cpuLine = (from: ReturnType<typeof cpu>, to: ReturnType<typeof cpu>, n: number) => {
		const ms = (k: "control" | "pg" | "nats" | "sim") =>
			((1000 * (to[k] - from[k])) / n).toFixed(3);
		const ours = (["control", "pg", "nats", "sim", "agent"] as const).reduce(
			(sum, k) => sum + to[k] - from[k],
			0
		);
		const elapsed = (to.at - from.at) / 1000;
		const share = (cpuS: number) => `${((100 * cpuS) / elapsed).toFixed(0)}%`;
		return `control plane ${ms("control")} ms, PostgreSQL ${ms("pg")} ms, nats-server ${ms("nats")} ms, simulated agents ${ms("sim")} ms; the simulated agents' packets in ${((to.packetsIn - from.packetsIn) / n).toFixed(2)}, out ${((to.packetsOut - from.packetsOut) / n).toFixed(2)}; the machine's cpus busy ${share(to.machine - from.machine)} of ${100 * os.cpus().length}%: this bench's processes ${share(ours)}, others ${share(Math.max(0, to.machine - from.machine - ours))}`;
	};
	try {
		const jobType = await postJson(`${service.api}/job-types/`, JOB_TYPE);
		// P7 first: the real agent idle beside the control plane alone
		await waitForCount(
			db,
			`SELECT count(*) AS n FROM node WHERE agent_id = '${P7_AGENT}' AND is_active`,
			1,
			30000
		);
		const [[agentNode]] = (await db.query(
			`SELECT id FROM node WHERE agent_id = '${P7_AGENT}'`
		)) as any;
		// it stays out of P6's placements: only the simulated agents are measured
		await patchJson(`${service.api}/nodes/${agentNode.id}/`, { is_paused: true });
		await sleep(IDLE_S * 1000);
		const agentRssSmall = mib(treeRssKiB(agent.pid!));
		const controlRssIdle = mib(treeRssKiB(service.proc.pid!));

		// the simulated agents join and register
		let started = performance.now();
		await simulated.start();
		await simulated.register();
		await waitForCount(
			db,
			`SELECT count(*) AS n FROM node WHERE is_active AND agent_id LIKE 'sim-%'`,
			AGENTS,
			60000
		);
		const registerS = (performance.now() - started) / 1000;
		const simRss = process.memoryUsage().rss / 1024 / 1024;
		const natsRss = mib(treeRssKiB(nats.proc.pid!));
		say(
			`P6 ${AGENTS} simulated agents connected (${simulated.connections} NATS connection${simulated.connections === 1 ? "" : "s"}), announced and registered in ${registerS.toFixed(1)} s`
		);
		// the control plane's registry must list them all before a pass may offer them work
		await sleep(3000);

		// P6: placements from the scheduler's resume to the last run received
		await patchJson(`${service.api}/scheduler/`, { is_paused: true });
		for (let i = 0; i < JOBS; i += 1000) {
			const batch = Array.from({ length: Math.min(1000, JOBS - i) }, () => ({
				jobTypeId: jobType.id,
				jobData: { input_data: [], output_data: [] }
			}));
			await transaction(db, t => queueNewJobs(db, t, batch));
		}
		say(`P6 ${JOBS} jobs queued with the scheduler paused`);
		const cpuPlaceFrom = cpu();
		started = performance.now();
		await patchJson(`${service.api}/scheduler/`, { is_paused: false });
		const progress = setInterval(
			() => say(`  … ${simulated.runs.length} of ${JOBS} runs received`),
			2000
		);
		// (the deadline's timer cleared after: left running, it kept the process alive 10 minutes)
		let deadline: NodeJS.Timeout | undefined;
		await Promise.race([
			simulated.whenRuns(JOBS),
			new Promise((_, reject) => {
				deadline = setTimeout(
					() =>
						reject(
							new Error(`only ${simulated.runs.length} of ${JOBS} runs in 10 minutes`)
						),
					600000
				);
			})
		]).finally(() => clearTimeout(deadline));
		clearInterval(progress);
		const cpuPlaced = cpu();
		const placeS = (simulated.runs[JOBS - 1].at - started) / 1000;
		const placementRate = JOBS / placeS;
		const latencies = simulated.runs.map(r => r.at - started).sort((a, b) => a - b);
		const perAgent = new Map<string, number>();
		for (const r of simulated.runs) perAgent.set(r.agentId, (perAgent.get(r.agentId) ?? 0) + 1);
		const controlRssPlaced = mib(treeRssKiB(service.proc.pid!));

		// the executions reported COMPLETED, as agents would
		started = performance.now();
		const finished = await simulated.finishAll();
		await waitForCount(
			db,
			`SELECT count(*) AS n FROM job WHERE status = 'COMPLETED' AND job_type_id = ${jobType.id}`,
			JOBS,
			600000
		);
		const finishS = (performance.now() - started) / 1000;
		const cpuFinished = cpu();
		const [[check]] = (await db.query(
			`SELECT count(*) FILTER (WHERE j.status <> 'COMPLETED') AS not_completed,
				(SELECT count(*) FROM (SELECT job_id FROM job_exe e JOIN job j2 ON j2.id = e.job_id
					WHERE j2.job_type_id = ${jobType.id} GROUP BY job_id HAVING count(*) > 1) d) AS doubled
			 FROM job j WHERE j.job_type_id = ${jobType.id}`
		)) as any;

		await sleep(IDLE_S * 1000);
		const agentRssLarge = mib(treeRssKiB(agent.pid!));
		const controlRssMax = controlRss.stop();
		const violations = cluster.violations();

		say("");
		say(
			`P6 placements: ${JOBS} jobs on ${perAgent.size} of ${AGENTS} simulated agents in ${placeS.toFixed(2)} s: ${placementRate.toFixed(0)} placements/s (target >= ${TARGET.placementsPerS}, Nomad's C1M): ${placementRate >= TARGET.placementsPerS ? "yes" : "no"}`
		);
		say(
			`P6 time from the scheduler's resume to a run's arrival: p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms; runs per agent ${Math.min(...perAgent.values())}–${Math.max(...perAgent.values())}`
		);
		say(
			`P6 completion reports: ${finished} in ${finishS.toFixed(2)} s: ${(finished / finishS).toFixed(0)} reports/s written`
		);
		say(
			`P6 CPU per placement: ${cpuLine(cpuPlaceFrom, cpuPlaced, JOBS)}; ${simulated.runCalls} run calls (${(JOBS / simulated.runCalls).toFixed(1)} executions each)`
		);
		say(`P6 CPU per report: ${cpuLine(cpuPlaced, cpuFinished, finished)}`);
		say(
			`P6 simulated agents' process: RSS ${simRss.toFixed(0)} MiB with ${AGENTS} agents connected, ${simulated.connections} NATS connection${simulated.connections === 1 ? "" : "s"}; nats-server RSS ${natsRss.toFixed(0)} MiB`
		);
		say(
			`P6 nats-server log: ${violations.length} permission violations${violations.length ? ` (first: ${violations[0]})` : ""}; subscriptions refused to the simulated agents: ${simulated.subscriptionErrors}`
		);
		say(
			`P6 record: jobs not COMPLETED ${check.not_completed}, jobs with more than one execution ${check.doubled}, runs sent twice ${simulated.duplicateRuns}`
		);
		say(
			`P6 control plane RSS: ${controlRssIdle.toFixed(0)} MiB idle with one agent, ${controlRssPlaced.toFixed(0)} MiB with ${AGENTS + 1} nodes and ${JOBS} executions running, largest sample ${controlRssMax.toFixed(0)} MiB`
		);
		say(
			`P7 idle agent RSS: ${agentRssSmall.toFixed(0)} MiB (${mb(agentRssSmall).toFixed(0)} MB) in a cluster of 2 nodes, ${agentRssLarge.toFixed(0)} MiB (${mb(agentRssLarge).toFixed(0)} MB) in a cluster of ${AGENTS + 2} (target <= ${TARGET.agentRssMB} MB): ${mb(Math.max(agentRssSmall, agentRssLarge)) <= TARGET.agentRssMB ? "yes" : "no"}`
		);
		if (
			Number(check.not_completed) > 0 ||
			Number(check.doubled) > 0 ||
			simulated.duplicateRuns > 0 ||
			violations.length > 0 ||
			simulated.subscriptionErrors > 0
		)
			process.exitCode = 1;
	} finally {
		await simulated.stop().catch(() => undefined);
		agent.kill("SIGTERM");
		await cluster.stop();
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
