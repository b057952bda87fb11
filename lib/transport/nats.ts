import fs from "fs";

/**
 * How this process reaches NATS. Credentials come from the `TRANSPORTER` URL
 * (`nats://user:password@host:4222`, `nats://token@host:4222`) or their own variables
 * (NATS_USER, NATS_PASSWORD, NATS_TOKEN), TLS from NATS_TLS_CA, NATS_TLS_CERT, NATS_TLS_KEY
 * (files) or NATS_TLS=true (the system's CAs); a `tls://` URL asks for TLS too.
 */
export interface NatsConfig {
	/** host:port of each server, without credentials (safe to print) */
	servers: string[];
	user?: string;
	pass?: string;
	token?: string;
	tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

export class TransporterError extends Error {}

const SCHEMES = ["nats:", "tls:"];

function decoded(part: string): string {
	try {
		return decodeURIComponent(part);
	} catch {
		return part;
	}
}

function readableFile(name: string, file: string | undefined): string | undefined {
	if (!file) return undefined;
	try {
		fs.accessSync(file, fs.constants.R_OK);
	} catch {
		throw new TransporterError(`${name} names a file that cannot be read: ${file}`);
	}
	return file;
}

/** Parses TRANSPORTER and the NATS_* variables; null when TRANSPORTER is unset. */
export function parseTransporter(env: NodeJS.ProcessEnv): NatsConfig | null {
	const raw = env.TRANSPORTER;
	if (!raw) return null;
	const config: NatsConfig = { servers: [] };
	let wantsTls = /^(1|true|yes)$/i.test(env.NATS_TLS || "");
	for (const part of raw.split(",").map(p => p.trim())) {
		let url: URL;
		try {
			url = new URL(part);
		} catch {
			throw new TransporterError(
				`TRANSPORTER must be nats:// (or tls://) URLs separated by commas, got "${part}"`
			);
		}
		if (!SCHEMES.includes(url.protocol) || !url.hostname)
			throw new TransporterError(
				`TRANSPORTER must be nats:// (or tls://) URLs separated by commas, got "${url.protocol}//${url.host}"`
			);
		if (url.protocol === "tls:") wantsTls = true;
		if (url.username && url.password) {
			config.user ??= decoded(url.username);
			config.pass ??= decoded(url.password);
		} else if (url.username) config.token ??= decoded(url.username);
		config.servers.push(
			`${url.hostname.includes(":") ? `[${url.hostname}]` : url.hostname}:${url.port || "4222"}`
		);
	}
	if (env.NATS_USER) config.user = env.NATS_USER;
	if (env.NATS_PASSWORD) config.pass = env.NATS_PASSWORD;
	if (env.NATS_TOKEN) config.token = env.NATS_TOKEN;
	if (config.user && !config.pass)
		throw new TransporterError("NATS_USER is set without NATS_PASSWORD");
	if (config.token && config.user)
		throw new TransporterError("give NATS a user and password or a token, not both");
	const tls = {
		caFile: readableFile("NATS_TLS_CA", env.NATS_TLS_CA),
		certFile: readableFile("NATS_TLS_CERT", env.NATS_TLS_CERT),
		keyFile: readableFile("NATS_TLS_KEY", env.NATS_TLS_KEY)
	};
	if (Boolean(tls.certFile) !== Boolean(tls.keyFile))
		throw new TransporterError("NATS_TLS_CERT and NATS_TLS_KEY go together");
	if (wantsTls || tls.caFile || tls.certFile)
		config.tls = Object.fromEntries(
			Object.entries(tls).filter(([, v]) => v)
		) as NatsConfig["tls"];
	return config;
}

/**
 * How the nats client reconnects after losing its server: for ever (as Moleculer's transporter
 * asks; nats.js alone gives up after 10 attempts, and `checkTransporter` does not reconnect),
 * every 250 ms plus up to 250 ms, where nats.js waits 2 s plus up to 0.1 s (1 s over TLS).
 * Every process is then back within half a second of nats-server, and the sooner the scheduler
 * and an agent are both back the sooner work is placed on it again (a scheduler back first
 * places nothing there until it answers a ping: lib/scheduling/reachability.ts). An attempt on
 * a server that is down is a refused TCP connect.
 */
export const NATS_RECONNECT = {
	reconnect: true,
	maxReconnectAttempts: -1,
	reconnectTimeWait: 250,
	reconnectJitter: 250,
	reconnectJitterTLS: 250
} as const;

/** Options for the `nats` client (and Moleculer's NATS transporter, which passes them on). */
export function natsClientOptions(config: NatsConfig): Record<string, unknown> {
	const options: Record<string, unknown> = { servers: config.servers, ...NATS_RECONNECT };
	if (config.user) options.user = config.user;
	if (config.pass) options.pass = config.pass;
	if (config.token) options.token = config.token;
	if (config.tls) options.tls = config.tls;
	return options;
}

/** What may be printed about the transporter: its servers and how it authenticates, no secret. */
export function describeTransporter(config: NatsConfig): string {
	const auth = config.user ? `user ${config.user}` : config.token ? "a token" : "no credentials";
	return `NATS ${config.servers.join(",")} (${auth}${config.tls ? ", TLS" : ""})`;
}

/**
 * One connection attempt before the broker starts, so that a wrong password or an unreachable
 * server ends the process with a clear message (Moleculer would retry in silence for ever). With
 * `nodeId`, also one subscription to that node's requests (`subject`): a server that ties each
 * user to its node's subjects (lib/cluster/nats-identities.ts) refuses it when NODE_ID is not
 * the identity's own, and the process would run deaf (Moleculer's NATS transporter ignores a
 * refused subscription).
 */
export async function checkTransporter(
	config: NatsConfig,
	timeoutMs = 5000,
	nodeId?: { id: string; subject: string }
): Promise<void> {
	const { connect } = await import("nats");
	let nc;
	try {
		nc = await connect({
			...natsClientOptions(config),
			timeout: timeoutMs,
			reconnect: false,
			name: "scale-preflight"
		});
	} catch (err) {
		const e = err as { code?: string; message?: string };
		const what = describeTransporter(config);
		if (/AUTHORIZATION|AUTHENTICATION|Authorization|auth/i.test(`${e.code} ${e.message}`))
			throw new TransporterError(`${what} refused these credentials: ${e.message ?? e.code}`);
		throw new TransporterError(`${what} is unreachable: ${e.message ?? e.code}`);
	}
	try {
		if (nodeId) {
			let refused: string | null = null;
			const sub = nc.subscribe(nodeId.subject, {
				callback: err => {
					if (err) refused = err.message;
				}
			});
			await nc.flush();
			await new Promise(resolve => setImmediate(resolve));
			if (refused)
				throw new TransporterError(
					`${describeTransporter(config)} refused node ID ${nodeId.id} its subjects (${refused}): NODE_ID must be this NATS identity's own`
				);
			sub.unsubscribe();
		}
	} finally {
		await nc.close().catch(() => undefined);
	}
}
