/**
 * Followed logs (issue "[5 of 8]"): one chatty execution (a line every millisecond for 10 s,
 * LOGS_LINES lines) on a real agent process over NATS, with the cluster's identities and
 * permissions, followed by LOGS_FOLLOWERS (100) clients of the control plane's REST API
 * (`?follow=true&stream=stdout`). Printed: the lines each follower received (all of them, in
 * order, is the target), and the agent process's own CPU during the run, beside the same
 * execution with no follower (the reference: what the job's output costs the agent anyway).
 *
 *   npm run bench:live-logs          LOGS_FOLLOWERS (100), LOGS_LINES (10000)
 */
import fs from "fs";
import http from "http";
import os from "os";
import path from "path";
import { ownCpuSeconds, treeCpuSeconds } from "./lib/cpu";
import { controlPlaneOverNats, startAgent } from "./lib/agent-process";
import { postJson, waitForCount } from "./lib/cluster";

const FOLLOWERS = Number(process.env.LOGS_FOLLOWERS || 100);
const LINES = Number(process.env.LOGS_LINES || 10000);
const CONTROL = "control-1";
const AGENT = "agent-1";

const say = (line: string) => console.log(line);

/** A job type printing LINES lines, one a millisecond (node's timer), then ending. */
const chattyType = (name: string) => ({
	name,
	version: "1.0",
	cpus_required: 0.1,
	mem_required: 64,
	disk_out_const_required: 0,
	max_tries: 1,
	interface: {
		command: process.execPath,
		command_arguments: `-e "let i = 0; const t = setInterval(() => { process.stdout.write('line ' + i + '\\\\n'); if (++i === ${LINES}) clearInterval(t); }, 1)"`
	}
});

/** One follower: counts the lines it receives and whether they came in order. */
function follow(url: string): Promise<{ lines: number; inOrder: boolean }> {
	return new Promise((resolve, reject) => {
		http.get(url, res => {
			let rest = "";
			let lines = 0;
			let inOrder = true;
			res.setEncoding("utf8");
			res.on("data", (chunk: string) => {
				const parts = (rest + chunk).split("\n");
				rest = parts.pop()!;
				for (const line of parts) {
					if (line !== `line ${lines}`) inOrder = false;
					lines++;
				}
			});
			res.on("end", () => resolve({ lines, inOrder: inOrder && rest === "" }));
			res.on("error", reject);
		}).on("error", reject);
	});
}

async function main() {
	const work = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-logs-"));
	const cluster = await controlPlaneOverNats(work, { NODE_ID: CONTROL }, [
		{ name: CONTROL, role: "control" },
		{ name: AGENT, role: "agent" }
	]);
	const agentDir = path.join(work, "agent");
	fs.mkdirSync(agentDir);
	const env = cluster.envOf(AGENT);
	const agent = startAgent(env.TRANSPORTER, agentDir, AGENT, env);
	try {
		const { db, service } = cluster;
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM node WHERE agent_id IS NOT NULL AND is_active",
			1,
			60000
		);
		const api = service.api;
		const type = await postJson(`${api}/job-types/`, chattyType("chatty"));
		const run = async (followers: number) => {
			const job = await postJson(`${api}/queue/new-job/`, {
				job_type_id: type.id,
				job_data: { input_data: [], output_data: [] }
			});
			const exeId = job.job_exes[0].id;
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM job_exe WHERE id = ${exeId} AND status <> 'QUEUED'`,
				1,
				30000,
				5
			);
			const agentBefore = ownCpuSeconds(agent.pid!);
			const controlBefore = treeCpuSeconds(service.proc.pid!);
			const started = Date.now();
			const got = await Promise.all(
				Array.from({ length: followers }, () =>
					follow(`${api}/job-executions/${exeId}/logs/?follow=true&stream=stdout`)
				)
			);
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM job WHERE id = ${job.id} AND status IN ('COMPLETED', 'FAILED')`,
				1,
				60000,
				5
			);
			const seconds = (Date.now() - started) / 1000;
			return {
				got,
				seconds,
				agentCpu: ownCpuSeconds(agent.pid!) - agentBefore,
				controlCpu: treeCpuSeconds(service.proc.pid!) - controlBefore
			};
		};
		const reference = await run(0);
		// with no follower, the run's length is the job's: wait it out the same way
		const followed = await run(FOLLOWERS);
		const lines = followed.got.map(g => g.lines).sort((a, b) => a - b);
		const inOrder = followed.got.filter(g => g.inOrder).length;
		say(
			`live logs: ${FOLLOWERS} followers of one execution printing ${LINES} lines (one a ms): lines received min ${lines[0]}, max ${lines[lines.length - 1]} (of ${LINES}); all in order: ${inOrder} of ${FOLLOWERS}`
		);
		say(
			`live logs: agent process CPU ${followed.agentCpu.toFixed(2)} s over ${followed.seconds.toFixed(1)} s (${((100 * followed.agentCpu) / followed.seconds).toFixed(1)}% of a cpu) with ${FOLLOWERS} followers; reference, no follower: ${reference.agentCpu.toFixed(2)} s over ${reference.seconds.toFixed(1)} s`
		);
		say(
			`live logs: control plane CPU ${followed.controlCpu.toFixed(2)} s with ${FOLLOWERS} followers (fan-out to HTTP), ${reference.controlCpu.toFixed(2)} s without`
		);
		const violations = cluster.violations();
		if (violations.length > 0) say(`NATS permission violations: ${violations.join("; ")}`);
	} finally {
		agent.kill("SIGTERM");
		await new Promise(r => agent.once("exit", r));
		await cluster.stop();
	}
}

main().catch(err => {
	console.error(err);
	process.exit(1);
});
