import { spawn, type ChildProcess } from "child_process";
import fs from "fs";
import path from "path";
import { PROJECT_ROOT } from "../../lib/paths";

/** The services a control plane needs to run jobs (cluster tests start it as its own process). */
export const JOBS_CONTROL_PLANE = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"queue",
	"jobs",
	"job-executions",
	"nodes",
	"scheduler"
];

export const START_SCRIPT = path.join(PROJECT_ROOT, "dist", "bin", "start.js");

export interface ServiceProcess {
	proc: ChildProcess;
	output(): string;
	stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs `node dist/bin/start.js` (what `npm start` runs) as its own OS process with `env`. */
export function startProcess(env: Record<string, string>): ServiceProcess {
	if (!fs.existsSync(START_SCRIPT))
		throw new Error(`${START_SCRIPT} is missing: run \`npm run build\` (npm test does it)`);
	let out = "";
	const proc = spawn(process.execPath, [START_SCRIPT], {
		env: { PATH: process.env.PATH || "", LOG_LEVEL: "warn", ...env },
		stdio: ["ignore", "pipe", "pipe"]
	});
	const keep = (b: Buffer) => {
		out = (out + b.toString()).slice(-20000);
	};
	proc.stdout!.on("data", keep);
	proc.stderr!.on("data", keep);
	return {
		proc,
		output: () => out,
		stop: (signal = "SIGTERM") =>
			new Promise(resolve => {
				if (proc.exitCode !== null || proc.signalCode !== null)
					return resolve(proc.exitCode);
				proc.once("exit", code => resolve(code));
				proc.kill(signal);
			})
	};
}

/** Polls `check` until it returns true or `timeoutMs` passes. */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string) {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		if (await check().catch(() => false)) return;
		await new Promise(r => setTimeout(r, 100));
	}
	throw new Error(`timed out waiting for ${what}`);
}
