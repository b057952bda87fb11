import { promises as fs } from "fs";
import path from "path";

/**
 * Host directories a strike may not watch and a workspace may not keep its files in: the
 * system's and the service's own. A strike's monitor moves every file out of its directory and a
 * workspace's files are written, moved and served by the service, so either on one of these would
 * let an API client take, overwrite or read what the machine or the service runs on.
 */

/** Refused themselves; their subdirectories are not (`/var/lib/scale-data`, `/tmp/x`). */
const SYSTEM_DIRECTORIES = [
	"/",
	"/etc",
	"/proc",
	"/sys",
	"/dev",
	"/usr",
	"/bin",
	"/sbin",
	"/lib",
	"/lib64",
	"/boot",
	"/root",
	"/var/lib",
	"/run"
];

/** Refused with everything under them. */
const SYSTEM_TREES = ["/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/boot", "/root"];

/** The service's own directories (lib/launch/config.ts), absolute: no mount may be, lie in or hold one. */
export interface ServiceDirectories {
	/** `DATA_DIR`: the embedded database among others */
	dataDir: string;
	/** `AGENT_WORK_DIR`: the node agent's task directories and its stable id */
	agentWorkDir: string;
}

const OWN_DIRECTORY_NAMES: Record<keyof ServiceDirectories, string> = {
	dataDir: "the service's data directory",
	agentWorkDir: "the node agent's work directory"
};

/** `dir` normalised, without a trailing slash (from `/`: the working directory never counts). */
function normal(dir: string): string {
	return path.posix.resolve("/", dir);
}

/** Whether `dir` is `root` or lies under it (both normal). */
function within(dir: string, root: string): boolean {
	return dir === root || dir.startsWith(root === "/" ? "/" : `${root}/`);
}

/**
 * Why the absolute path `dir`, taken as written, may not be mounted, e.g. "is a system
 * directory" or "contains the service's data directory /srv/scale/data"; null when it may.
 */
export function confinementProblem(dir: string, own: ServiceDirectories): string | null {
	const at = normal(dir);
	if (SYSTEM_DIRECTORIES.includes(at)) return "is a system directory";
	const tree = SYSTEM_TREES.find(root => within(at, root));
	if (tree) return `is inside the system directory ${tree}`;
	for (const key of Object.keys(OWN_DIRECTORY_NAMES) as (keyof ServiceDirectories)[]) {
		const ownDir = normal(own[key]);
		const name = OWN_DIRECTORY_NAMES[key];
		if (at === ownDir) return `is ${name}`;
		if (within(at, ownDir)) return `is inside ${name} ${ownDir}`;
		if (within(ownDir, at)) return `contains ${name} ${ownDir}`;
	}
	return null;
}

/**
 * `dir` with its symbolic links resolved as far as it exists: a directory not made yet under a
 * link to /etc is still under /etc.
 */
async function resolved(dir: string): Promise<string> {
	const missing: string[] = [];
	for (let at = normal(dir); ; at = path.posix.dirname(at)) {
		try {
			return path.posix.join(await fs.realpath(at), ...missing);
		} catch {
			if (at === "/") return normal(dir);
			missing.unshift(path.posix.basename(at));
		}
	}
}

/**
 * Why the absolute path `dir` may not be mounted (confinementProblem), as written and with
 * symbolic links resolved, in both it and the service's directories; e.g. `"/data/etc" leads to
 * /etc, which is a system directory`. Null when it may.
 */
export async function mountProblem(dir: string, own: ServiceDirectories): Promise<string | null> {
	const real = await resolved(dir);
	const realOwn: ServiceDirectories = {
		dataDir: await resolved(own.dataDir),
		agentWorkDir: await resolved(own.agentWorkDir)
	};
	const given = normal(dir);
	for (const at of new Set([given, real])) {
		for (const ownAt of [own, realOwn]) {
			const problem = confinementProblem(at, ownAt);
			if (!problem) continue;
			return at === given
				? `"${dir}" ${problem}`
				: `"${dir}" leads to ${real}, which ${problem}`;
		}
	}
	return null;
}
