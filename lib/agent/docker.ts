import { execFile } from "child_process";

/** The container name of an execution (also what `docker rm -f` is given on a kill). */
export function containerName(jobExeId: number): string {
	return `scale_${jobExeId}`;
}

export interface DockerRun {
	jobExeId: number;
	image: string;
	privileged: boolean;
	/** mounted at the same path inside the container, and its working directory */
	taskDir: string;
	cpus: number;
	/** MiB */
	memMiB: number;
	/** variables set inside the container */
	env: Record<string, string>;
	command: string;
	args: string[];
}

/**
 * The argument list of `docker` for one execution:
 * `run --rm --name scale_<exeId> -v <taskdir>:<taskdir> -w <taskdir> -e K=V... --cpus <n>
 * --memory <m>m [--privileged] <image> <command> <args...>`. The task directory is the only
 * mount: inputs were staged into it and outputs are written under it. Limits of 0 are left out.
 */
export function dockerRunArgs(run: DockerRun): string[] {
	const args = ["run", "--rm", "--name", containerName(run.jobExeId)];
	args.push("-v", `${run.taskDir}:${run.taskDir}`, "-w", run.taskDir);
	for (const [key, value] of Object.entries(run.env)) args.push("-e", `${key}=${value}`);
	if (run.cpus > 0) args.push("--cpus", String(run.cpus));
	if (run.memMiB > 0) args.push("--memory", `${Math.ceil(run.memMiB)}m`);
	if (run.privileged) args.push("--privileged");
	args.push(run.image, run.command, ...run.args);
	return args;
}

/** Variables of the agent's environment that tell the docker client where its engine is. */
export const DOCKER_CLIENT_ENV = [
	"DOCKER_HOST",
	"DOCKER_CONFIG",
	"DOCKER_CONTEXT",
	"DOCKER_CERT_PATH",
	"DOCKER_TLS_VERIFY",
	"DOCKER_API_VERSION"
];

export function dockerClientEnv(from: NodeJS.ProcessEnv = process.env): Record<string, string> {
	const env: Record<string, string> = {};
	for (const key of DOCKER_CLIENT_ENV) if (from[key] !== undefined) env[key] = from[key]!;
	return env;
}

/**
 * Checks that a Docker engine answers (`docker info`), answering null when it does, else a
 * sentence for the execution's error detail. A good answer is remembered for `cacheMs`, so a
 * burst of docker jobs does not ask each time; a bad one is never remembered.
 */
export class DockerCheck {
	private okUntil = 0;

	constructor(
		private readonly docker: string,
		private readonly cacheMs = 30_000,
		private readonly timeoutMs = 15_000
	) {}

	async problem(): Promise<string | null> {
		if (Date.now() < this.okUntil) return null;
		const answer = await new Promise<string | null>(resolve => {
			execFile(
				this.docker,
				["info", "--format", "{{.ServerVersion}}"],
				{
					timeout: this.timeoutMs,
					env: { PATH: process.env.PATH ?? "", ...dockerClientEnv() }
				},
				(error: any, stdout, stderr) => {
					if (!error) return resolve(null);
					if (error.code === "ENOENT")
						return resolve(
							`the docker command (${this.docker}) is not installed on this node`
						);
					if (error.killed)
						return resolve(
							`no Docker engine answered on this node within ${this.timeoutMs / 1000} s (docker info)`
						);
					const said = `${stderr || stdout}`
						.split("\n")
						.map(line => line.trim())
						.filter(Boolean)
						.pop();
					resolve(
						`no Docker engine answers on this node (docker info: ${said ?? `exit code ${error.code}`})`
					);
				}
			);
		});
		if (answer === null) this.okUntil = Date.now() + this.cacheMs;
		return answer;
	}

	/** Removes the container of an execution, best effort (after its client was killed). */
	remove(jobExeId: number): void {
		execFile(
			this.docker,
			["rm", "-f", containerName(jobExeId)],
			{
				timeout: this.timeoutMs,
				env: { PATH: process.env.PATH ?? "", ...dockerClientEnv() }
			},
			() => undefined
		);
	}
}
