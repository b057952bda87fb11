/**
 * Outages: how soon work is placed again after nats-server restarts and after PostgreSQL comes
 * back, on a cluster on this machine (test/helpers/outage-cluster.ts: nats-server over TLS with a
 * user per process, its own embedded PostgreSQL, two control planes and an agent, each an OS
 * process) with jobs running through each outage. Each round: NATS down OUTAGES_NATS_DOWN_S
 * (5) s, then PostgreSQL down OUTAGES_PG_DOWN_S (10) s. Prints, per outage, the time from the
 * server's return to the placement (and the start on the agent) of the jobs queued while NATS
 * was down, or of the first job the API took once PostgreSQL was back; the target is 2 s. Then
 * checks every job COMPLETED with one execution, and times a SIGTERM of every process.
 *
 *   npm run bench:outages            OUTAGES_ROUNDS (3), OUTAGES_NATS_DOWN_S, OUTAGES_PG_DOWN_S,
 *                                    OUTAGES_LOG_LEVEL (warn; info shows the scheduler's steps)
 */
import { OutageCluster, type Resumed } from "../test/helpers/outage-cluster";

const ROUNDS = Number(process.env.OUTAGES_ROUNDS || 3);
const NATS_DOWN_MS = Number(process.env.OUTAGES_NATS_DOWN_S || 5) * 1000;
const PG_DOWN_MS = Number(process.env.OUTAGES_PG_DOWN_S || 10) * 1000;
const TARGET_MS = 2000;

const say = (msg: string) => process.stdout.write(`${msg}\n`);

function line(what: string, r: Resumed): string {
	return (
		`${what.padEnd(24)} back → placed ${String(r.backToPlaced).padStart(5)} ms, started ` +
		`${String(r.backToStarted).padStart(5)} ms | API took a job ${r.backToQueued} ms after; ` +
		`it was placed ${r.queuedToPlaced} ms, started ${r.queuedToStarted} ms after its 201`
	);
}

async function main() {
	const rig = new OutageCluster({
		controlPlanes: 2,
		agents: 1,
		logLevel: process.env.OUTAGES_LOG_LEVEL || "warn",
		write: process.env.OUTAGES_LOG_LEVEL ? line => say(line) : undefined
	});
	const nats: Resumed[] = [];
	const pg: Resumed[] = [];
	const jobIds: number[] = [];
	try {
		await rig.start();
		for (let round = 1; round <= ROUNDS; round++) {
			const n = await rig.natsOutage(NATS_DOWN_MS, 3, 8);
			nats.push(n);
			say(line(`round ${round}: NATS ${NATS_DOWN_MS / 1000} s`, n));
			const p = await rig.postgresOutage(PG_DOWN_MS, 3, 5);
			pg.push(p);
			say(line(`round ${round}: PostgreSQL ${PG_DOWN_MS / 1000} s`, p));
			jobIds.push(...n.jobIds, ...p.jobIds);
		}
		const wrong = await rig.notCompletedOnce(jobIds);
		const stops = await rig.terminate();
		const stuck = rig.log.filter(l => /GracefulStopTimeoutError|running context/.test(l));
		const worst = (rs: Resumed[]) => Math.max(...rs.map(r => r.backToStarted));
		say("");
		say(
			`NATS back → started: ${nats.map(r => r.backToStarted).join(", ")} ms (worst ${worst(nats)}, target ${TARGET_MS})`
		);
		say(
			`PostgreSQL back → started: ${pg.map(r => r.backToStarted).join(", ")} ms (worst ${worst(pg)}, target ${TARGET_MS})`
		);
		say(`jobs: ${jobIds.length}, not COMPLETED with one execution: ${wrong.length}`);
		for (const w of wrong) say(`  ${JSON.stringify(w)}`);
		say(
			`SIGTERM → exit: ${stops.map(s => `${s.name} ${s.ms} ms (code ${s.code})`).join(", ")}`
		);
		say(`GracefulStopTimeoutError or contexts waited for: ${stuck.length}`);
		if (wrong.length > 0 || stuck.length > 0 || stops.some(s => s.code !== 0))
			process.exitCode = 1;
	} finally {
		await rig.stop();
	}
}

main().catch(err => {
	process.stderr.write(`${err?.stack ?? err}\n`);
	process.exit(1);
});
