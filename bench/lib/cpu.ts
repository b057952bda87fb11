import fs from "fs";

/** Each live process's parent and its /proc/<pid>/stat fields after the command name. */
function readProcesses(): Map<number, { parent: number; fields: string[] }> {
	const processes = new Map<number, { parent: number; fields: string[] }>();
	for (const entry of fs.readdirSync("/proc")) {
		if (!/^\d+$/.test(entry)) continue;
		let stat: string;
		try {
			stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
		} catch {
			continue; // gone meanwhile
		}
		// the fields after the command name, which may itself hold spaces and parentheses
		const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
		processes.set(Number(entry), { parent: Number(fields[1]), fields });
	}
	return processes;
}

/** A process and its live descendants, with their stat fields, from /proc (Linux). */
function processTree(root: number): { pid: number; fields: string[] }[] {
	const processes = readProcesses();
	const children = new Map<number, number[]>();
	for (const [pid, { parent }] of processes) {
		if (!children.has(parent)) children.set(parent, []);
		children.get(parent)!.push(pid);
	}
	const tree: { pid: number; fields: string[] }[] = [];
	const walk = (pid: number) => {
		const found = processes.get(pid);
		if (found) tree.push({ pid, fields: found.fields });
		for (const child of children.get(pid) ?? []) walk(child);
	};
	walk(root);
	return tree;
}

/**
 * CPU seconds (user + system, with those of reaped children) used so far by a process and all
 * its live descendants, read from /proc (Linux). Differences of two readings say where the
 * machine's time went during a benchmark.
 */
export function treeCpuSeconds(root: number): number {
	const tick = 100; // USER_HZ on Linux
	let total = 0;
	for (const { fields } of processTree(root))
		total +=
			(Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) /
			tick;
	return total;
}

/** The resident memory of a process and its live descendants, in KiB, from /proc (Linux). */
export function treeRssKiB(root: number): number {
	return rssKiBOf(processTree(root).map(({ pid }) => pid));
}

/** The resident memory of these processes, in KiB (those gone count nothing). */
function rssKiBOf(pids: number[]): number {
	let total = 0;
	for (const pid of pids) {
		try {
			const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
			total += Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
		} catch {
			// gone meanwhile
		}
	}
	return total;
}

/**
 * Samples the RSS of a process tree every `everyMs` until stopped. The tree is found again once
 * a second; each sample reads only its processes' files. (Walking all of /proc at every sample
 * held the event loop of the process that runs it for 1–10 ms under load: a load generator in
 * that process counted the wait in its requests' latency.)
 */
export function rssSampler(root: number, everyMs = 200): { mark(): number; stop(): number } {
	let pids: number[] = [];
	let samples = 0;
	let largest = 0;
	let sinceMark = 0;
	const sample = () => {
		if (samples++ % Math.max(1, Math.round(1000 / everyMs)) === 0)
			pids = processTree(root).map(({ pid }) => pid);
		const kib = rssKiBOf(pids);
		largest = Math.max(largest, kib);
		sinceMark = Math.max(sinceMark, kib);
	};
	sample();
	const timer = setInterval(sample, everyMs);
	return {
		/** the largest sample since the last mark (or the start), MiB; the next stretch begins */
		mark() {
			sample();
			const mib = sinceMark / 1024;
			sinceMark = 0;
			return mib;
		},
		/** stops; the largest sample of all, MiB */
		stop() {
			clearInterval(timer);
			sample();
			return largest / 1024;
		}
	};
}

/** CPU seconds (user + system) of one process alone, all its threads, without its children. */
export function ownCpuSeconds(pid: number): number {
	const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
	const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds so far of a service's process tree, PostgreSQL's (null: not ours) and this process. */
export interface CpuReading {
	service: number;
	pg: number | null;
	client: number;
}

/** Reads CpuReadings of the service `servicePid` and the PostgreSQL `pgPid` (null: not ours). */
export function cpuReader(servicePid: number, pgPid: number | null): () => CpuReading {
	return () => {
		const own = process.cpuUsage();
		return {
			service: treeCpuSeconds(servicePid),
			pg: pgPid === null ? null : treeCpuSeconds(pgPid),
			client: (own.user + own.system) / 1e6
		};
	};
}
