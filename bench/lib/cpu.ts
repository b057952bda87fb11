import fs from "fs";

/**
 * CPU seconds (user + system, with those of reaped children) used so far by a process and all
 * its live descendants, read from /proc (Linux). Differences of two readings say where the
 * machine's time went during a benchmark.
 */
export function treeCpuSeconds(root: number): number {
	const children = new Map<number, number[]>();
	const times = new Map<number, number>();
	const tick = 100; // USER_HZ on Linux
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
		const pid = Number(entry);
		const parent = Number(fields[1]);
		times.set(
			pid,
			(Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) /
				tick
		);
		if (!children.has(parent)) children.set(parent, []);
		children.get(parent)!.push(pid);
	}
	let total = 0;
	const walk = (pid: number) => {
		total += times.get(pid) ?? 0;
		for (const child of children.get(pid) ?? []) walk(child);
	};
	walk(root);
	return total;
}

/** CPU seconds (user + system) of one process alone, all its threads, without its children. */
export function ownCpuSeconds(pid: number): number {
	const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
	const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	return (Number(fields[11]) + Number(fields[12])) / 100;
}
