import { randomBytes } from "crypto";
import fs from "fs";
import path from "path";
import { ALL_SERVICES } from "../config";
import { EmbeddedPostgres } from "../db/embedded";
import { createSequelize } from "../db/connection";
import { migrate } from "../db/migrate";
import { startNatsServer, type RunningNatsServer } from "./nats-server";
import { AGENT_NODE_OPTIONS, CONTROL_ENV, CONTROL_NODE_OPTIONS, NodeProcess } from "./node-process";

export interface LocalClusterOptions {
	/** where PostgreSQL, the agents' work directories and the credentials live */
	dataDir: string;
	/** the first control plane's REST port; the others follow */
	apiPort: number;
	natsPort: number;
	pgPort: number;
	controlPlanes: number;
	agents: number;
	/** services of each control plane (default: all but node-agent) */
	controlServices?: string[];
	/** more processes, each with its own services (say, ingest and triggers apart) */
	extra?: { name: string; services: string[] }[];
	/** where every machine mounts NFS exports (NFS_MOUNT_ROOT of the control planes) */
	nfsMountRoot?: string;
	logLevel: string;
	write: (line: string) => void;
	onUnexpectedExit?: (name: string, code: number | null, signal: string | null) => void;
}

export interface ClusterCredentials {
	user: string;
	password: string;
}

const CREDENTIALS_FILE = "cluster.env";

/**
 * The NATS user and password of the cluster in `dataDir`: made once, at random, and kept in
 * `cluster.env` (mode 0600), which also says how to join (`source` it, then `npm run agent` or
 * `npm run repl`). NATS_USER and NATS_PASSWORD in the environment win.
 */
export function clusterCredentials(
	dataDir: string,
	natsPort: number,
	env: NodeJS.ProcessEnv = process.env
): ClusterCredentials & { file: string } {
	const file = path.join(dataDir, CREDENTIALS_FILE);
	let user = env.NATS_USER || "";
	let password = env.NATS_PASSWORD || "";
	if ((!user || !password) && fs.existsSync(file)) {
		const text = fs.readFileSync(file, "utf8");
		user ||= /^export NATS_USER=(\S+)$/m.exec(text)?.[1] ?? "";
		password ||= /^export NATS_PASSWORD=(\S+)$/m.exec(text)?.[1] ?? "";
	}
	user ||= "scale";
	password ||= randomBytes(18).toString("base64url");
	fs.mkdirSync(dataDir, { recursive: true });
	fs.writeFileSync(
		file,
		[
			"# NATS credentials of the cluster `npm run cluster` runs here: source this file, then",
			"# `npm run agent` (another agent) or `npm run repl` joins it.",
			`export TRANSPORTER=nats://127.0.0.1:${natsPort}`,
			`export NATS_USER=${user}`,
			`export NATS_PASSWORD=${password}`,
			""
		].join("\n"),
		{ mode: 0o600 }
	);
	fs.chmodSync(file, 0o600);
	return { user, password, file };
}

/**
 * A whole cluster on one machine: a nats-server that requires a password, an embedded
 * PostgreSQL, control-plane processes (replicas: one scheduler leads) and node agents, each its
 * own OS process with its own node identity and, for agents, work directory and no database URL.
 */
export class LocalCluster {
	nats: RunningNatsServer | null = null;
	pg: EmbeddedPostgres | null = null;
	databaseUrl = "";
	credentials: (ClusterCredentials & { file: string }) | null = null;
	readonly controls: NodeProcess[] = [];
	readonly agents: NodeProcess[] = [];
	readonly extras: NodeProcess[] = [];

	constructor(readonly opts: LocalClusterOptions) {}

	get processes(): NodeProcess[] {
		return [...this.controls, ...this.extras, ...this.agents];
	}

	byName(name: string): NodeProcess | undefined {
		return this.processes.find(p => p.name === name);
	}

	apiUrl(i: number): string {
		return `http://127.0.0.1:${this.opts.apiPort + i}/api`;
	}

	async start(): Promise<void> {
		const o = this.opts;
		fs.mkdirSync(o.dataDir, { recursive: true, mode: 0o755 });
		this.credentials = clusterCredentials(o.dataDir, o.natsPort);
		o.write(`[cluster] nats-server on 127.0.0.1:${o.natsPort} (user ${this.credentials.user})`);
		this.nats = await startNatsServer({
			dir: o.dataDir,
			port: o.natsPort,
			user: this.credentials.user,
			password: this.credentials.password
		});
		this.pg = new EmbeddedPostgres({
			dataDir: path.join(o.dataDir, "postgres"),
			port: o.pgPort,
			database: "scale",
			log: msg => o.write(`[postgres] ${msg}`)
		});
		await this.pg.start();
		this.databaseUrl = this.pg.url;
		const sequelize = createSequelize(this.databaseUrl, { poolMax: 2 });
		try {
			await migrate(sequelize, msg => o.write(`[migrate] ${msg}`));
		} finally {
			await sequelize.close();
		}

		const common: Record<string, string> = {
			PATH: process.env.PATH ?? "",
			LOG_LEVEL: o.logLevel,
			TRANSPORTER: this.nats.address,
			NATS_USER: this.credentials.user,
			NATS_PASSWORD: this.credentials.password
		};
		const control = o.controlServices ?? ALL_SERVICES.filter(s => s !== "node-agent");
		const controlEnv: Record<string, string> = {
			...CONTROL_ENV,
			...(o.nfsMountRoot ? { NFS_MOUNT_ROOT: o.nfsMountRoot } : {})
		};
		for (let i = 0; i < o.controlPlanes; i++)
			this.controls.push(
				this.node(
					`control-${i + 1}`,
					{
						...common,
						...controlEnv,
						SERVICES: control.join(","),
						DATABASE_URL: this.databaseUrl,
						PORT: String(o.apiPort + i),
						DATA_DIR: o.dataDir
					},
					CONTROL_NODE_OPTIONS
				)
			);
		for (const extra of o.extra ?? [])
			this.extras.push(
				this.node(
					extra.name,
					{
						...common,
						...controlEnv,
						SERVICES: extra.services.join(","),
						DATABASE_URL: this.databaseUrl,
						DATA_DIR: o.dataDir
					},
					CONTROL_NODE_OPTIONS
				)
			);
		for (let i = 0; i < o.agents; i++) {
			const workDir = path.join(o.dataDir, `agent-${i + 1}`);
			fs.mkdirSync(workDir, { recursive: true, mode: 0o755 });
			// no DATABASE_URL: an agent reaches the control plane only through NATS
			this.agents.push(
				this.node(
					`agent-${i + 1}`,
					{ ...common, SERVICES: "node-agent", AGENT_WORK_DIR: workDir },
					AGENT_NODE_OPTIONS
				)
			);
		}
		for (const p of this.processes) p.start();
	}

	private node(
		name: string,
		env: Record<string, string>,
		nodeOptions: string[] = []
	): NodeProcess {
		return new NodeProcess({
			name,
			env: { ...env, NODE_ID: name },
			nodeOptions,
			write: this.opts.write,
			onUnexpectedExit: this.opts.onUnexpectedExit
		});
	}

	/** Stops nats-server (every process loses its connection); `startNats` brings it back. */
	async stopNats(): Promise<void> {
		await this.nats?.stop();
	}

	/** nats-server again, on the same port with the same credentials. */
	async startNats(): Promise<void> {
		this.nats = await startNatsServer({
			dir: this.opts.dataDir,
			port: this.opts.natsPort,
			user: this.credentials!.user,
			password: this.credentials!.password
		});
	}

	/** Agents first (their work is reported), then the control planes, PostgreSQL, NATS. */
	async stop(): Promise<void> {
		await Promise.all(this.agents.map(p => p.stop()));
		await Promise.all([...this.extras, ...this.controls].map(p => p.stop()));
		if (this.pg) await this.pg.stop();
		if (this.nats) await this.nats.stop();
	}
}
