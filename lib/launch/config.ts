import path from "path";
import type { ContainerSettings } from "../agent/containers";
import type { LauncherChoice } from "../agent/launcher";
import { DEFAULT_TASK_UIDS } from "../agent/task-identities";
import { parseTransporter, TransporterError, type NatsConfig } from "../transport/nats";
import { NATS_ROLES, type NatsRole } from "../transport/subjects";

/** Every service name a process may run; `SERVICES` picks from these. */
export const ALL_SERVICES = [
	"api",
	"errors",
	"workspaces",
	"status",
	"job-types",
	"job-type-reports",
	"recipe-types",
	"recipes",
	"configuration",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"products",
	"ingest",
	"scans",
	"triggers",
	"files",
	"nodes",
	"scheduler",
	"node-agent",
	"metrics"
] as const;

export interface Config {
	databaseUrl: string | null;
	transporter: NatsConfig | null;
	services: string[];
	nodeId: string | null;
	/** what this node is to the cluster's others (NATS_ROLE; by default, by its services) */
	natsRole: NatsRole | null;
	host: string;
	port: number;
	dataDir: string;
	logLevel: string;
	apiTokens: string[];
	allowAnonymous: boolean;
	/** the URL clients reach the API at (scheme, host, port, path prefix), for the links it writes */
	publicUrl: string | null;
	/** whether X-Forwarded-Proto, X-Forwarded-Host and Host may name that URL (without publicUrl) */
	trustProxy: boolean;
	embeddedPgPort: number;
	/** where Prometheus scrapes this process's metrics; null: no metrics */
	metricsPort: number | null;
	/** the address the metrics port binds to */
	metricsHost: string;
	/** the scheduler in a thread of its own beside the other services (lib/launch/scheduler-thread.ts) */
	schedulerThread: boolean;
	/** where every node mounts NFS exports (strikes' mounts, nfs workspaces); null: nowhere */
	nfsMountRoot: string | null;
	agent: AgentConfig;
}

/** The node agent's own settings (it has no database: these come from its environment). */
export interface AgentConfig {
	/** where task directories and the agent's stable slave id live */
	workDir: string;
	/** caps on what the agent offers; null = what the machine has */
	cpus: number | null;
	memMiB: number | null;
	diskMiB: number | null;
	/** launcher processes that spawn tasks off the agent's event loop */
	launchers: number;
	/** native launchers (compiled from native/launcher.c) or Node ones; "auto": native if it can */
	launcher: LauncherChoice;
	/**
	 * BENCH_SLOW_LAUNCH_MS, for benches only: each launch takes at least this long, one at a
	 * time (a slow-spawning machine, lib/agent/launcher.ts PacedLauncher); 0: not slowed
	 */
	slowLaunchMs?: number;
	/** one user every task runs as; null: each execution a uid of its own (when root) */
	taskUser: string | null;
	/** the uids executions get */
	taskUids: { first: number; count: number };
	/** the Docker engine and what containers may do */
	docker: ContainerSettings;
	/**
	 * AGENT_DRAIN_S: on SIGTERM (or a user's drain), how long running executions get to end
	 * before they are stopped as `node-shutdown`; 0 stops them at once
	 */
	drainS: number;
}

/** AGENT_DRAIN_S's default: inside systemd's 90 s stop timeout with the kill grace and reports. */
export const DEFAULT_DRAIN_S = 60;

export class ConfigError extends Error {}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace"];

function isLoopback(host: string): boolean {
	return host === "localhost" || host === "::1" || /^127\./.test(host);
}

const LAUNCHER_CHOICES: LauncherChoice[] = ["auto", "native", "node"];

function parseLauncherChoice(raw: string | undefined): LauncherChoice {
	if (raw === undefined || raw === "") return "auto";
	if (!LAUNCHER_CHOICES.includes(raw as LauncherChoice))
		throw new ConfigError(
			`AGENT_LAUNCHER must be one of ${LAUNCHER_CHOICES.join(", ")}, got "${raw}"`
		);
	return raw as LauncherChoice;
}

/** Seconds from 0 to a day. */
function parseSeconds(name: string, raw: string | undefined, fallback: number): number {
	if (raw === undefined || raw.trim() === "") return fallback;
	const value = Number(raw);
	if (!Number.isFinite(value) || value < 0 || value > 86400)
		throw new ConfigError(`${name} must be a number of seconds from 0 to 86400, got "${raw}"`);
	return value;
}

function parseCap(name: string, raw: string | undefined, integer = false): number | null {
	if (raw === undefined || raw === "") return null;
	const value = Number(raw);
	if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value)))
		throw new ConfigError(
			`${name} must be a positive ${integer ? "integer" : "number"}, got "${raw}"`
		);
	return value;
}

function parsePort(name: string, raw: string | undefined, fallback: number): number {
	if (raw === undefined || raw === "") return fallback;
	const port = Number(raw);
	if (!Number.isInteger(port) || port < 0 || port > 65535)
		throw new ConfigError(`${name} must be a port number from 0 to 65535, got "${raw}"`);
	return port;
}

function parseSwitch(name: string, raw: string | undefined, fallback: boolean): boolean {
	if (raw === undefined || raw === "") return fallback;
	if (/^(1|true|yes|on)$/i.test(raw)) return true;
	if (/^(0|false|no|off)$/i.test(raw)) return false;
	throw new ConfigError(`${name} must be true or false (1/0, yes/no, on/off), got "${raw}"`);
}

/** A range of uids "first-last", within what a uid can be and above the system's accounts. */
function parseUidRange(raw: string | undefined): { first: number; count: number } | null {
	if (raw === undefined || raw === "") return null;
	const match = /^(\d+)-(\d+)$/.exec(raw);
	const first = Number(match?.[1]);
	const last = Number(match?.[2]);
	if (!match || first < 1000 || last < first || last > 2 ** 31 - 2)
		throw new ConfigError(
			`AGENT_TASK_UIDS must be a range "first-last" of uids from 1000 to ${2 ** 31 - 2}, got "${raw}"`
		);
	return { first, count: last - first + 1 };
}

function parseContainerUser(raw: string | undefined): boolean {
	if (raw === undefined || raw === "" || raw === "task") return false;
	if (raw === "image") return true;
	throw new ConfigError(`AGENT_DOCKER_USER must be "task" or "image", got "${raw}"`);
}

/** An absolute directory, normalised; null when unset. */
function parseAbsolutePath(name: string, raw: string | undefined): string | null {
	if (raw === undefined || raw === "") return null;
	if (!path.posix.isAbsolute(raw))
		throw new ConfigError(`${name} must be an absolute path, got "${raw}"`);
	return path.posix.normalize(raw).replace(/(.)\/$/, "$1");
}

/**
 * The API's public URL: http or https, with a host, without credentials, query or fragment,
 * normalised (default port dropped, no trailing slash); null when unset.
 */
function parsePublicUrl(raw: string | undefined): string | null {
	if (raw === undefined || raw === "") return null;
	const url = URL.canParse(raw) ? new URL(raw) : null;
	if (
		!url ||
		!["http:", "https:"].includes(url.protocol) ||
		!url.hostname ||
		url.username ||
		url.password ||
		url.search ||
		url.hash
	)
		throw new ConfigError(
			`PUBLIC_URL must be an http or https URL such as https://scale.example.com, without credentials, query or fragment, got "${raw}"`
		);
	return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

function parseNatsRole(raw: string | undefined): NatsRole | null {
	if (!raw) return null;
	if (!(NATS_ROLES as readonly string[]).includes(raw))
		throw new ConfigError(`NATS_ROLE must be one of ${NATS_ROLES.join(", ")}, got "${raw}"`);
	return raw as NatsRole;
}

/** What this node is to the others on NATS: NATS_ROLE, or an agent when it runs node-agent alone. */
export function natsRoleOf(config: Config): NatsRole {
	if (config.natsRole) return config.natsRole;
	return config.services.every(s => s === "node-agent") ? "agent" : "control";
}

/** Reads the configuration from the environment; throws ConfigError naming the variable at fault. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
	const services = (env.SERVICES || "")
		.split(",")
		.map(s => s.trim())
		.filter(Boolean);
	for (const s of services) {
		if (s !== "all" && !(ALL_SERVICES as readonly string[]).includes(s))
			throw new ConfigError(
				`SERVICES names an unknown service "${s}" (known: ${ALL_SERVICES.join(", ")})`
			);
	}
	const logLevel = (env.LOG_LEVEL || "info").toLowerCase();
	if (!LOG_LEVELS.includes(logLevel))
		throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}`);
	let transporter: NatsConfig | null;
	try {
		transporter = parseTransporter(env);
	} catch (err) {
		if (err instanceof TransporterError) throw new ConfigError(err.message);
		throw err;
	}

	const config: Config = {
		databaseUrl: env.DATABASE_URL || null,
		transporter,
		services: services.length === 0 || services.includes("all") ? [...ALL_SERVICES] : services,
		nodeId: env.NODE_ID || null,
		natsRole: parseNatsRole(env.NATS_ROLE),
		host: env.HOST || "127.0.0.1",
		port: parsePort("PORT", env.PORT, 8000),
		dataDir: path.resolve(env.DATA_DIR || "./data"),
		logLevel,
		apiTokens: (env.API_TOKENS || "")
			.split(",")
			.map(t => t.trim())
			.filter(Boolean),
		allowAnonymous: /^(1|true|yes)$/i.test(env.ALLOW_ANONYMOUS || ""),
		publicUrl: parsePublicUrl(env.PUBLIC_URL),
		trustProxy: parseSwitch("TRUST_PROXY", env.TRUST_PROXY, false),
		embeddedPgPort: parsePort("EMBEDDED_PG_PORT", env.EMBEDDED_PG_PORT, 54329),
		metricsPort: env.METRICS_PORT ? parsePort("METRICS_PORT", env.METRICS_PORT, 0) : null,
		// Moleculer's metrics tell request rates, errors and node names to whoever asks: loopback
		// unless an operator opens them to a scraper elsewhere.
		metricsHost: env.METRICS_HOST || "127.0.0.1",
		schedulerThread: parseSwitch("SCHEDULER_THREAD", env.SCHEDULER_THREAD, false),
		nfsMountRoot: parseAbsolutePath("NFS_MOUNT_ROOT", env.NFS_MOUNT_ROOT),
		agent: {
			workDir: path.resolve(
				env.AGENT_WORK_DIR || path.join(env.DATA_DIR || "./data", "agent")
			),
			cpus: parseCap("AGENT_CPUS", env.AGENT_CPUS),
			memMiB: parseCap("AGENT_MEM_MIB", env.AGENT_MEM_MIB),
			diskMiB: parseCap("AGENT_DISK_MIB", env.AGENT_DISK_MIB),
			launchers: parseCap("AGENT_LAUNCHERS", env.AGENT_LAUNCHERS, true) ?? 2,
			launcher: parseLauncherChoice(env.AGENT_LAUNCHER),
			slowLaunchMs: parseCap("BENCH_SLOW_LAUNCH_MS", env.BENCH_SLOW_LAUNCH_MS) ?? 0,
			taskUser: env.AGENT_TASK_USER || null,
			taskUids: parseUidRange(env.AGENT_TASK_UIDS) ?? DEFAULT_TASK_UIDS,
			docker: {
				host: env.AGENT_DOCKER_HOST || null,
				pull: parseSwitch("AGENT_DOCKER_PULL", env.AGENT_DOCKER_PULL, false),
				privileged: parseSwitch(
					"AGENT_DOCKER_PRIVILEGED",
					env.AGENT_DOCKER_PRIVILEGED,
					false
				),
				network: env.AGENT_DOCKER_NETWORK || null,
				imageUser: parseContainerUser(env.AGENT_DOCKER_USER)
			},
			drainS: parseSeconds("AGENT_DRAIN_S", env.AGENT_DRAIN_S, DEFAULT_DRAIN_S)
		}
	};
	if (config.natsRole === "agent" && config.services.some(s => s !== "node-agent"))
		throw new ConfigError(
			`NATS_ROLE=agent: an agent's NATS identity offers node-agent only, but SERVICES names ${config.services.filter(s => s !== "node-agent").join(", ")}`
		);
	if (
		config.services.includes("api") &&
		!isLoopback(config.host) &&
		config.apiTokens.length === 0 &&
		!config.allowAnonymous
	)
		throw new ConfigError(
			`HOST=${config.host} exposes the API beyond this machine without API_TOKENS; set API_TOKENS, or ALLOW_ANONYMOUS=true to accept anonymous requests`
		);
	return config;
}

/** The services that never touch the database: the gateway and the node agent. */
const NO_DB_SERVICES: readonly string[] = ["api", "node-agent"];

/** Which services touch the database; a process running none of them needs no DATABASE_URL. */
export const DB_SERVICES: readonly string[] = ALL_SERVICES.filter(s => !NO_DB_SERVICES.includes(s));

export function needsDatabase(config: Config): boolean {
	return config.services.some(s => DB_SERVICES.includes(s));
}
