import fs from "fs";
import path from "path";
import { ALL_SERVICES } from "../launch/config";
import { EmbeddedPostgres } from "../db/embedded";
import { createSequelize } from "../db/connection";
import { migrate } from "../db/migrate";
import { startNatsServer, type RunningNatsServer } from "./nats-server";
import { ensureClusterTls, type ClusterTls } from "./tls";
import {
	identitiesDir,
	identity,
	loadIdentities,
	natsUsers,
	OPERATOR_NODE_ID,
	type Identity,
	type NatsRole
} from "./nats-identities";
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
	/**
	 * TLS between nats-server and every process (default): a CA and a server certificate made at
	 * the first start in `<dataDir>/nats/tls`, plaintext connections refused; false: plain NATS
	 */
	tls?: boolean;
	logLevel: string;
	write: (line: string) => void;
	onUnexpectedExit?: (name: string, code: number | null, signal: string | null) => void;
}

/**
 * A whole cluster on one machine: a nats-server that requires TLS (unless `tls: false`) and has
 * a user per process, each tied to its node ID's subjects (nats-identities.ts), an embedded
 * PostgreSQL, control-plane processes (replicas: one scheduler leads) and node agents, each its
 * own OS process with its own node identity and NATS credentials (and the CA's certificate)
 * and, for agents, work directory and no database URL.
 */
export class LocalCluster {
	nats: RunningNatsServer | null = null;
	pg: EmbeddedPostgres | null = null;
	databaseUrl = "";
	/** the CA and nats-server's certificate, when TLS is on */
	tls: ClusterTls | null = null;
	/** one NATS identity per process, and the operator's (the REPL's) */
	identities: Identity[] = [];
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
		if (o.tls !== false)
			this.tls = await ensureClusterTls(path.join(identitiesDir(o.dataDir), "tls"));
		const transporter = `${this.tls ? "tls" : "nats"}://127.0.0.1:${o.natsPort}`;
		const names: [string, NatsRole][] = [
			...Array.from({ length: o.controlPlanes }, (_, i): [string, NatsRole] => [
				`control-${i + 1}`,
				"control"
			]),
			...(o.extra ?? []).map((e): [string, NatsRole] => [e.name, "control"]),
			...Array.from({ length: o.agents }, (_, i): [string, NatsRole] => [
				`agent-${i + 1}`,
				"agent"
			]),
			[OPERATOR_NODE_ID, "operator"]
		];
		this.identities = names.map(([name, role]) =>
			identity(o.dataDir, name, role, transporter, this.tls?.caFile)
		);
		// and those made for processes run elsewhere (`npm run nats-identity`)
		for (const other of loadIdentities(o.dataDir))
			if (!this.identities.some(i => i.name === other.name)) this.identities.push(other);
		o.write(
			`[cluster] nats-server on 127.0.0.1:${o.natsPort} (${this.tls ? `TLS required, CA ${this.tls.caFile}; ` : "no TLS; "}a user per process, with subject permissions)`
		);
		this.nats = await this.startNatsServer();
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
			TRANSPORTER: transporter,
			...(this.tls ? { NATS_TLS_CA: this.tls.caFile } : {})
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
		const id = this.identity(name);
		return new NodeProcess({
			name,
			// its own NATS identity, no other's
			env: { ...env, NODE_ID: name, NATS_USER: id.name, NATS_PASSWORD: id.password },
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
		this.nats = await this.startNatsServer();
	}

	/** The NATS identity of node `name` (its file: `identity(name).file`). */
	identity(name: string): Identity {
		const found = this.identities.find(i => i.name === name);
		if (!found) throw new Error(`no NATS identity for ${name}`);
		return found;
	}

	/** nats-server's log, where permission violations are written. */
	get natsLogFile(): string {
		return path.join(this.opts.dataDir, "nats-server.log");
	}

	private startNatsServer(): Promise<RunningNatsServer> {
		return startNatsServer({
			dir: this.opts.dataDir,
			port: this.opts.natsPort,
			users: natsUsers(this.identities),
			logFile: this.natsLogFile,
			...(this.tls
				? {
						tls: {
							certFile: this.tls.certFile,
							keyFile: this.tls.keyFile,
							caFile: this.tls.caFile,
							timeout: 5
						}
					}
				: {})
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
