/**
 * What it costs to know who sent a packet, per packet: the sender read from the subject that
 * nats-server let it publish on (lib/transport/subjects.ts), beside an ed25519 signature made by
 * the sender and verified by the receiver (the alternative the issue names: nkeys are ed25519),
 * on a `node-agent.run` request of 20 executions and a finish report as the cluster sends them.
 *
 *   npm run build && node dist/bench/packet-auth.js
 */
import { generateKeyPairSync, sign, verify } from "crypto";
import { packetSubject, subjectSender } from "../lib/transport/subjects";

const spec = (i: number) => ({
	jobExeId: 100000 + i,
	jobId: 50000 + i,
	jobType: { id: 7, name: "p6-placed", version: "1.0", revision: 1 },
	command: "/bin/true",
	args: ["--input", `/work/${i}/in.dat`, "--output", `/work/${i}/out`],
	resources: { cpus: 1, mem: 64, disk: 0 },
	inputs: [],
	outputWorkspaces: [],
	timeoutS: 3600,
	env: {}
});
const packets: Record<string, Buffer> = {
	"a run of 20 executions": Buffer.from(
		JSON.stringify({
			ver: "5",
			sender: "control-1",
			id: "3f1c2a4e-0d4b-4e59-a6c1-7b0b8d1c9e21",
			action: "node-agent.run",
			params: { executions: Array.from({ length: 20 }, (_, i) => spec(i)) },
			meta: {},
			timeout: 30000,
			level: 1
		})
	),
	"a finish report": Buffer.from(
		JSON.stringify({
			ver: "5",
			sender: "agent-7",
			id: "9a8b7c6d-0d4b-4e59-a6c1-7b0b8d1c9e21",
			action: "scheduler.exeFinished",
			params: {
				reports: [
					{
						jobExeId: 100001,
						agentId: "agent-7",
						status: "COMPLETED",
						exitCode: 0,
						products: [],
						stdout: "x".repeat(2000),
						stderr: "",
						steps: {}
					}
				]
			},
			meta: {},
			timeout: 10000,
			level: 1
		})
	)
};

function usPer(n: number, fn: () => unknown): number {
	let best = Infinity;
	for (let round = 0; round < 5; round++) {
		const start = process.hrtime.bigint();
		for (let i = 0; i < n; i++) fn();
		best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e3 / n);
	}
	return best;
}

const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const subject = packetSubject("REQ", "control", "control-1", "agent-7");
for (const [what, data] of Object.entries(packets)) {
	const signature = sign(null, data, privateKey);
	const bySubject = usPer(200000, () => subjectSender(subject)?.sender === "control-1");
	const signing = usPer(2000, () => sign(null, data, privateKey));
	const verifying = usPer(2000, () => verify(null, data, publicKey, signature));
	console.log(
		`${what} (${data.length} bytes): sender from the subject ${bySubject.toFixed(2)} µs; ed25519 sign ${signing.toFixed(1)} µs + verify ${verifying.toFixed(1)} µs`
	);
}
