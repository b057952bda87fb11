import type { Sequelize } from "sequelize";

/**
 * The agent's launch pipeline over a bench's run, from the executions' records: an execution is
 * in the backlog from its placement (`started`, the placing statement's time) to its process's
 * start (`job_started`, the agent's clock; both on one machine).
 */
export interface LaunchFigures {
	/** the most executions placed and not launched at once */
	maxBacklog: number;
	/** launches a second while the backlog was not empty */
	busyRate: number;
	launches: number;
}

/** The figures of the executions with ids above `afterExeId`. */
export async function launchFigures(db: Sequelize, afterExeId: number): Promise<LaunchFigures> {
	const [rows] = (await db.query(
		`SELECT extract(epoch FROM started) * 1000 AS placed,
			extract(epoch FROM job_started) * 1000 AS launched
		 FROM job_exe WHERE id > $1 AND started IS NOT NULL AND job_started IS NOT NULL`,
		{ bind: [afterExeId] }
	)) as [{ placed: string; launched: string }[], unknown];
	// +1 at a placement, -1 at a launch; at equal times the launch first (no false peak)
	const events: [number, number][] = [];
	for (const r of rows) {
		events.push([Number(r.placed), 1]);
		events.push([Math.max(Number(r.placed), Number(r.launched)), -1]);
	}
	events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
	let backlog = 0;
	let maxBacklog = 0;
	let busyMs = 0;
	let busyLaunches = 0;
	let last = 0;
	for (const [at, step] of events) {
		if (backlog > 0) busyMs += at - last;
		if (step < 0 && backlog > 0) busyLaunches++;
		backlog += step;
		maxBacklog = Math.max(maxBacklog, backlog);
		last = at;
	}
	return {
		maxBacklog,
		busyRate: busyMs > 0 ? (busyLaunches * 1000) / busyMs : 0,
		launches: rows.length
	};
}

/** "largest backlog 12, 1,043 launches/s while it had one" */
export function describeLaunches(f: LaunchFigures): string {
	return `agent's largest backlog ${f.maxBacklog}, ${Math.round(f.busyRate)} launches/s while it had one`;
}

/**
 * The speeds a bench runs at (BENCH_SPEED: own, slow or both; default both) and how slow the slow
 * one launches (BENCH_SLOW_LAUNCH_MS, default 5: ~170 launches/s, as a machine whose bare spawn
 * runs ~170/s). Each comes with the environment its service is started with.
 */
export function benchSpeeds(): { label: string; env: Record<string, string> }[] {
	const which = process.env.BENCH_SPEED || "both";
	const slowMs = process.env.BENCH_SLOW_LAUNCH_MS || "5";
	const own = { label: "own speed", env: { BENCH_SLOW_LAUNCH_MS: "" } };
	const slow = {
		label: `slowed (one launch per ${slowMs} ms)`,
		env: { BENCH_SLOW_LAUNCH_MS: slowMs }
	};
	if (which === "own") return [own];
	if (which === "slow") return [slow];
	if (which !== "both") throw new Error(`BENCH_SPEED must be own, slow or both, got "${which}"`);
	return [own, slow];
}
