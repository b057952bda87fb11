import { spawnSync } from "child_process";

function promtoolPath(): string | null {
	const found = spawnSync("sh", ["-c", "command -v promtool"], { encoding: "utf8" });
	return found.status === 0 ? found.stdout.trim() : null;
}

/**
 * `promtool` comes with Debian's `prometheus` package. As root (as CI runs) it is installed here;
 * otherwise the run stops with the one command that installs it.
 */
export function ensurePromtool(): string {
	let bin = promtoolPath();
	if (bin) return bin;
	if (process.getuid && process.getuid() !== 0)
		throw new Error(
			"promtool is missing: run `sudo apt-get install -y --no-install-recommends prometheus`, then the tests again"
		);
	const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
	const args = ["install", "-y", "-q", "--no-install-recommends", "prometheus"];
	let install = spawnSync("apt-get", args, { env, encoding: "utf8" });
	if (install.status !== 0) {
		// A fresh machine has no package lists yet.
		spawnSync("apt-get", ["update", "-q"], { env, stdio: "ignore" });
		install = spawnSync("apt-get", args, { env, encoding: "utf8" });
	}
	bin = promtoolPath();
	if (!bin) throw new Error(`installing prometheus (promtool) failed: ${install.stderr}`);
	return bin;
}

/** `promtool check metrics` on an exposition: its exit status and what it said. */
export function checkMetrics(text: string): { status: number | null; output: string } {
	const run = spawnSync(ensurePromtool(), ["check", "metrics"], {
		input: text,
		encoding: "utf8"
	});
	return { status: run.status, output: `${run.stdout}${run.stderr}` };
}
