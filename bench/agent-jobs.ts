/**
 * A node agent of its own (`npm run agent`'s process, as on a cluster machine) under load: one
 * control plane (every service but node-agent, in a process of its own), one real agent, a
 * nats-server with a password between them, a throwaway embedded PostgreSQL. AGENT_JOBS
 * /bin/true jobs are queued with the scheduler paused; from its resume to the last COMPLETED is
 * the agent's rate, beside the bare rate of spawning /bin/true on this machine. The agent's own
 * CPU per job (its process, not the jobs') and its largest RSS are printed with it: the agent's
 * node options (AGENT_NODE_OPTIONS, or P7_AGENT_NODE_ARGS to compare) trade the one for the other.
 *
 * BENCH_NATS_TLS=true puts NATS under TLS (a CA and certificate made as `npm run cluster` does).
 *
 *   npm run bench:agent-jobs        AGENT_JOBS=5000 P7_AGENT_NODE_ARGS="--max-semi-space-size=1" npm run bench:agent-jobs
 *   BENCH_NATS_TLS=true npm run bench:agent-jobs
 */
import fs from "fs";
import os from "os";
import path from "path";
import { queueNewJobs } from "../lib/jobs/new-job";
import { patchJson, postJson, trueJobType, waitForCount } from "./lib/cluster";
import { ownCpuSeconds, treeRssKiB } from "./lib/cpu";
import { controlPlaneOverNats, startAgent } from "./lib/agent-process";
import { bestBareSpawnRate } from "./lib/spawn-rate";
import { transaction } from "../lib/db/run";

const JOBS = Number(process.env.AGENT_JOBS || 3000);
/** runs before the measured one, unmeasured: V8 compiles the hot paths meanwhile */
const WARMUP = Number(process.env.AGENT_WARMUP || 1000);

const say = (msg: string) => process.stdout.write(`${msg}\n`);

async function main() {
	const bare = await bestBareSpawnRate(3, 3000, 4);
	const work = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-agent-jobs-"));
	const cluster = await controlPlaneOverNats(work);
	const { db, service, transporter } = cluster;
	const agentDir = path.join(work, "agent");
	fs.mkdirSync(agentDir);
	const agent = startAgent(transporter, agentDir, "bench-agent", cluster.natsEnv);
	let largestKiB = 0;
	const sampler = setInterval(
		() => (largestKiB = Math.max(largestKiB, treeRssKiB(agent.pid!))),
		100
	);
	try {
		const jobType = await postJson(`${service.api}/job-types/`, trueJobType("agent-true"));
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM node WHERE agent_id = 'bench-agent' AND is_active",
			1,
			30000
		);
		/** Queues n jobs with the scheduler paused, resumes it, waits for them: seconds, agent cpu s. */
		let done = 0;
		const run = async (n: number) => {
			await patchJson(`${service.api}/scheduler/`, { is_paused: true });
			for (let i = 0; i < n; i += 1000) {
				const batch = Array.from({ length: Math.min(1000, n - i) }, () => ({
					jobTypeId: jobType.id,
					jobData: { input_data: [], output_data: [] }
				}));
				await transaction(db, t => queueNewJobs(db, t, batch));
			}
			const cpu0 = ownCpuSeconds(agent.pid!);
			const started = performance.now();
			await patchJson(`${service.api}/scheduler/`, { is_paused: false });
			done += n;
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM job WHERE status = 'COMPLETED' AND job_type_id = ${jobType.id}`,
				done,
				600000
			);
			return {
				seconds: (performance.now() - started) / 1000,
				cpu: ownCpuSeconds(agent.pid!) - cpu0
			};
		};
		if (WARMUP > 0) await run(WARMUP);
		const measured = await run(JOBS);
		const [[check]] = (await db.query(
			`SELECT count(*) FILTER (WHERE status <> 'COMPLETED') AS not_completed
			 FROM job WHERE job_type_id = ${jobType.id}`
		)) as any;
		const rate = JOBS / measured.seconds;
		say(
			`agent of its own (${process.env.P7_AGENT_NODE_ARGS ?? "npm run agent's node options"}; NATS ${cluster.tls ? "over TLS" : "in the clear"}): ${JOBS} /bin/true jobs (after ${WARMUP} unmeasured) at ${rate.toFixed(0)} jobs/s, bare spawn ${bare.toFixed(0)}/s (ratio ${(rate / bare).toFixed(2)}); the agent's own CPU ${((1000 * measured.cpu) / JOBS).toFixed(3)} ms per job; its largest RSS ${(largestKiB / 1024).toFixed(0)} MiB; jobs not COMPLETED ${check.not_completed}`
		);
		if (Number(check.not_completed) > 0) process.exitCode = 1;
	} finally {
		clearInterval(sampler);
		agent.kill("SIGTERM");
		await cluster.stop();
	}
}

main().catch(error => {
	console.error(error);
	process.exit(1);
});
