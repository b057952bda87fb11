import fs from "fs";
import { PassThrough } from "stream";
import type Docker from "dockerode";
import { Dockerode } from "./dockerode";
import { ExecutionFailure } from "./execution-failure";
import { openAgentFile } from "./files";
import type { ExitStatus, Launched, TaskIdentity } from "./launcher";
import { NODE_DOCKER_LIMITS, type NodeDocker } from "../documents/agent-protocol";

/**
 * The node agent's Docker engine, spoken to over its Engine API (dockerode, on the engine's
 * socket) rather than through a `docker` CLI process per container: the CLI costs a process
 * start of its own for each container (measured in docs/decisions.md, "Containers").
 *
 * A container of an execution is created with labels naming the node (`scale.node`, the agent's
 * slave id, stable across restarts) and the execution (`scale.job_exe_id`), so that an agent that
 * starts again finds and removes the containers its previous run left (`removeLeftovers`).
 */

/** The agent's settings for containers (AGENT_DOCKER_* in lib/launch/config.ts). */
export interface ContainerSettings {
	/** the engine's address, `unix:///path` or `tcp://host:port`; null: DOCKER_HOST, else the default socket */
	host: string | null;
	/** pull an image the engine lacks (else the execution fails and the scheduler avoids the node) */
	pull: boolean;
	/** run `docker_privileged` job types privileged (else they fail here) */
	privileged: boolean;
	/** the containers' network (`none`, a network's name); null: the engine's default */
	network: string | null;
	/** run containers as the image's user instead of the execution's own uid */
	imageUser: boolean;
}

export const DEFAULT_CONTAINER_SETTINGS: ContainerSettings = {
	host: null,
	pull: false,
	privileged: false,
	network: null,
	imageUser: false
};

export interface ContainerRun {
	jobExeId: number;
	image: string;
	privileged: boolean;
	/** mounted at the same path inside the container, and its working directory */
	taskDir: string;
	/** files bound read-only at the same path (inputs read in an s3 bucket's mount) */
	readOnly?: string[];
	cpus: number;
	/** MiB */
	memMiB: number;
	env: Record<string, string>;
	command: string;
	args: string[];
	/** the execution's own user and group (absent: the agent runs unconfined) */
	identity?: TaskIdentity;
	stdoutPath: string;
	stderrPath: string;
	/** the log files exist and are empty (a recycled task directory) */
	outputFilesEmpty: boolean;
}

export interface ContainerExit extends ExitStatus {
	/** the engine killed a process of the container at its memory limit */
	oomKilled: boolean;
}

export interface LaunchedContainer extends Launched {
	exited: Promise<ContainerExit>;
}

/** How an Engine API address is given to dockerode. */
function engineOptions(host: string | null): Docker.DockerOptions {
	const address = host ?? process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock";
	if (address.startsWith("unix://")) return { socketPath: address.slice("unix://".length) };
	const url = new URL(address.replace(/^tcp:/, "http:"));
	return { host: url.hostname, port: Number(url.port) || 2375, protocol: "http" };
}

/** The message of an Engine API error, without dockerode's prefix. */
function said(error: any): string {
	const json = error?.json?.message;
	if (typeof json === "string") return json;
	return String(error?.message ?? error).replace(/^\(HTTP code \d+\)\s*/, "");
}

function isNoSuchImage(error: any): boolean {
	return error?.statusCode === 404 && /image/i.test(said(error));
}

export class Containers {
	readonly docker: Docker;
	private okUntil = 0;

	constructor(
		readonly settings: ContainerSettings,
		/** the node's stable id (the agent's slave id): the `scale.node` label */
		private readonly node: string,
		private readonly cacheMs = 30_000
	) {
		this.docker = new Dockerode(engineOptions(settings.host));
	}

	/** The container name of an execution on this node. */
	nameOf(jobExeId: number): string {
		return `scale-${this.node.slice(0, 8)}-${jobExeId}`;
	}

	/**
	 * Null when the engine answers; else a sentence for the execution's error detail. A good
	 * answer is remembered for cacheMs, so a burst of container jobs does not ask each time.
	 */
	async problem(): Promise<string | null> {
		if (Date.now() < this.okUntil) return null;
		try {
			await this.docker.ping();
			this.okUntil = Date.now() + this.cacheMs;
			return null;
		} catch (error) {
			return `no Docker engine answers on this node (${this.settings.host ?? process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock"}: ${said(error)})`;
		}
	}

	/** The engine's images and what this agent allows, for its registration and heartbeats. */
	async inventory(): Promise<NodeDocker> {
		const base = { pull: this.settings.pull, privileged: this.settings.privileged };
		try {
			const listed = await this.docker.listImages();
			const images = new Set<string>();
			for (const image of listed) {
				for (const tag of image.RepoTags ?? [])
					if (tag !== "<none>:<none>") images.add(tag);
				for (const digest of image.RepoDigests ?? [])
					if (!digest.startsWith("<none>")) images.add(digest);
			}
			// within what the control plane takes: a reference past the bound names no job's image
			const kept = [...images]
				.filter(ref => ref.length <= NODE_DOCKER_LIMITS.length)
				.slice(0, NODE_DOCKER_LIMITS.images);
			this.okUntil = Date.now() + this.cacheMs;
			return { engine: true, images: kept, ...base };
		} catch {
			this.okUntil = 0;
			return { engine: false, images: [], ...base };
		}
	}

	/**
	 * Removes every container of this node (by its label): at the agent's start it holds no
	 * execution, so any such container is one its previous run left. Answers how many went.
	 */
	async removeLeftovers(): Promise<number> {
		const found = await this.docker.listContainers({
			all: true,
			filters: { label: [`scale.node=${this.node}`] }
		});
		await Promise.all(
			found.map(c =>
				this.docker
					.getContainer(c.Id)
					.remove({ force: true })
					.catch(error => {
						if (error?.statusCode !== 404) throw error;
					})
			)
		);
		return found.length;
	}

	/** The container's creation request. */
	private createOptions(run: ContainerRun): Docker.ContainerCreateOptions {
		const memory = run.memMiB > 0 ? Math.ceil(run.memMiB) * 1024 * 1024 : 0;
		const host: Docker.HostConfig = {
			Binds: [`${run.taskDir}:${run.taskDir}`],
			// Mounts, not Binds: a key may hold the ":" that separates a bind's parts
			Mounts: (run.readOnly ?? []).map(file => ({
				Type: "bind" as const,
				Source: file,
				Target: file,
				ReadOnly: true
			})),
			// the engine keeps no copy of the output: the agent writes it to the task's files
			LogConfig: { Type: "none", Config: {} },
			Privileged: run.privileged
		};
		if (run.cpus > 0) host.NanoCpus = Math.round(run.cpus * 1e9);
		// swap counts within the limit: a container does not run on past it from swap
		if (memory > 0) Object.assign(host, { Memory: memory, MemorySwap: memory });
		if (this.settings.network) host.NetworkMode = this.settings.network;
		if (!run.privileged) host.SecurityOpt = ["no-new-privileges"];
		const options: Docker.ContainerCreateOptions = {
			name: this.nameOf(run.jobExeId),
			Image: run.image,
			Cmd: [run.command, ...run.args],
			Env: Object.entries(run.env).map(([key, value]) => `${key}=${value}`),
			WorkingDir: run.taskDir,
			Labels: { "scale.node": this.node, "scale.job_exe_id": String(run.jobExeId) },
			AttachStdout: true,
			AttachStderr: true,
			Tty: false,
			OpenStdin: false,
			HostConfig: host
		};
		if (run.identity && !run.privileged && !this.settings.imageUser)
			options.User = `${run.identity.uid}:${run.identity.gid}`;
		return options;
	}

	/** Creates the container, pulling its image first when the engine lacks it and pulls are on. */
	private async create(run: ContainerRun): Promise<Docker.Container> {
		const options = this.createOptions(run);
		try {
			return await this.docker.createContainer(options);
		} catch (error: any) {
			if (error?.statusCode === 409) {
				// a container of this execution left by an earlier attempt of its run
				await this.docker
					.getContainer(this.nameOf(run.jobExeId))
					.remove({ force: true })
					.catch(() => undefined);
				return await this.docker.createContainer(options);
			}
			if (!isNoSuchImage(error)) throw error;
			if (!this.settings.pull)
				throw new ExecutionFailure(
					"docker-task-launch",
					`the image ${run.image} is not on this node, and this agent does not pull images (AGENT_DOCKER_PULL)`
				);
		}
		await this.pull(run.image);
		return this.docker.createContainer(options);
	}

	private async pull(image: string): Promise<void> {
		try {
			const stream = await this.docker.pull(image);
			await new Promise<void>((resolve, reject) =>
				this.docker.modem.followProgress(stream, error =>
					error ? reject(error) : resolve()
				)
			);
		} catch (error) {
			throw new ExecutionFailure(
				"docker-task-launch",
				`the image ${image} could not be pulled: ${said(error)}`
			);
		}
	}

	/**
	 * Runs an execution's container: created, its output attached to the task's log files before
	 * it starts (nothing is missed), started; `exited` settles once it has ended, its output is
	 * written and it is removed. `kill` signals the container (the engine removes nothing until
	 * the agent does). Throws ExecutionFailure when it cannot be started.
	 */
	async launch(run: ContainerRun): Promise<LaunchedContainer> {
		if (run.privileged && !this.settings.privileged)
			throw new ExecutionFailure(
				"docker-task-launch",
				`the job type runs privileged containers, which this agent does not allow (AGENT_DOCKER_PRIVILEGED)`
			);
		let container: Docker.Container;
		try {
			container = await this.create(run);
		} catch (error) {
			if (error instanceof ExecutionFailure) throw error;
			throw new ExecutionFailure(
				"docker-task-launch",
				`the container could not be created: ${said(error)}`
			);
		}
		const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT;
		const open = (file: string) =>
			fs.createWriteStream("", {
				fd: openAgentFile(
					file,
					flags | (run.outputFilesEmpty ? fs.constants.O_APPEND : fs.constants.O_TRUNC)
				)!
			});
		let stdout: fs.WriteStream | undefined;
		let stderr: fs.WriteStream | undefined;
		try {
			stdout = open(run.stdoutPath);
			stderr = open(run.stderrPath);
			const attached = (await container.attach({
				stream: true,
				stdout: true,
				stderr: true
			})) as NodeJS.ReadableStream;
			const outputDone = this.demux(attached, stdout, stderr);
			await container.start();
			const exited = this.finish(container, outputDone);
			return {
				pid: 0,
				exited,
				kill: signal => {
					container.kill({ signal }).catch(() => undefined);
				}
			};
		} catch (error) {
			stdout?.destroy();
			stderr?.destroy();
			await container.remove({ force: true }).catch(() => undefined);
			throw new ExecutionFailure(
				"docker-task-launch",
				`the container could not be started: ${said(error)}`
			);
		}
	}

	/** Splits the attached stream into the two files; settles once both are written and closed. */
	private demux(
		attached: NodeJS.ReadableStream,
		stdout: fs.WriteStream,
		stderr: fs.WriteStream
	): Promise<void> {
		const out = new PassThrough();
		const err = new PassThrough();
		out.pipe(stdout);
		err.pipe(stderr);
		this.docker.modem.demuxStream(attached, out, err);
		const closed = (stream: fs.WriteStream) =>
			new Promise<void>(resolve => {
				stream.once("close", () => resolve());
				stream.once("error", () => resolve());
			});
		attached.once("end", () => {
			out.end();
			err.end();
		});
		attached.once("error", () => {
			out.end();
			err.end();
		});
		return Promise.all([closed(stdout), closed(stderr)]).then(() => undefined);
	}

	/** Waits for the container's end and its output, reads how it ended, and removes it. */
	private async finish(
		container: Docker.Container,
		outputDone: Promise<void>
	): Promise<ContainerExit> {
		try {
			const waited = (await container.wait()) as { StatusCode: number };
			await outputDone;
			const state = (await container.inspect()).State;
			return {
				code: waited.StatusCode,
				signal: null,
				groupKilled: true,
				oomKilled: state?.OOMKilled === true
			};
		} catch (error) {
			return {
				code: null,
				signal: null,
				groupKilled: true,
				oomKilled: false,
				lost: `the Docker engine did not say how the container ended: ${said(error)}`
			};
		} finally {
			await container.remove({ force: true }).catch(() => undefined);
		}
	}
}
