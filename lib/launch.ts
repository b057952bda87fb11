import { ServiceBroker, type BrokerOptions } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { ConfigError, loadConfig, needsDatabase, type Config } from "./config";
import type { EmbeddedPostgres } from "./db/embedded";
import { loadServiceSchemas } from "./services";
import { checkTransporter, describeTransporter, TransporterError } from "./transport/nats";

/** What a process started (as far as start-up got), for a signal to stop in order. */
export interface Running {
	broker: ServiceBroker | null;
	pg: EmbeddedPostgres | null;
}

export function say(msg: string) {
	process.stdout.write(`${msg}\n`);
}

/** The configuration, or the process ends (exit 2) with the variable at fault named. */
export async function configOrExit(): Promise<Config> {
	let config: Config;
	try {
		config = loadConfig();
	} catch (err) {
		if (err instanceof ConfigError) {
			process.stderr.write(`configuration error: ${err.message}\n`);
			process.exit(2);
		}
		throw err;
	}
	if (config.transporter) {
		try {
			await checkTransporter(config.transporter);
		} catch (err) {
			if (!(err instanceof TransporterError)) throw err;
			process.stderr.write(`transporter error: ${err.message}\n`);
			process.exit(2);
		}
	}
	return config;
}

/** Starts the configured services (their database first), saying where they answer. */
export async function startServices(
	config: Config,
	running: Running,
	extra: Partial<BrokerOptions> = {}
): Promise<ServiceBroker> {
	// Loaded only where a service needs the database: an agent-only process never loads
	// Sequelize, pg, umzug or the migrations (bench:agents, P7: its idle RSS).
	const url = needsDatabase(config)
		? await (require("./db/prepare") as typeof import("./db/prepare")).prepareDatabase(
				config,
				say,
				(pg: EmbeddedPostgres) => (running.pg = pg)
			)
		: null;
	const broker = new ServiceBroker({ ...brokerOptions(config, url), ...extra });
	running.broker = broker;
	for (const schema of loadServiceSchemas(config)) broker.createService(schema);
	await broker.start();

	say(`services: ${config.services.join(", ")} on node ${broker.nodeID}`);
	if (config.transporter) say(`cluster: ${describeTransporter(config.transporter)}`);
	if (config.services.includes("api")) {
		const host = config.host.includes(":") ? `[${config.host}]` : config.host;
		say(`REST API: http://${host}:${config.port}/api/ (also /api/v3/)`);
	}
	if (running.pg)
		say(
			`data: ${running.pg.dataDir} (embedded PostgreSQL on 127.0.0.1:${config.embeddedPgPort})`
		);
	else if (url) say("data: the PostgreSQL named by DATABASE_URL");
	return broker;
}

/** Stops the broker, then PostgreSQL, on SIGINT or SIGTERM, and exits. */
export function stopOnSignals(running: Running) {
	let stopping = false;
	const stop = async (signal: string) => {
		if (stopping) return;
		stopping = true;
		say(`${signal} received: stopping services${running.pg ? " and PostgreSQL" : ""}`);
		try {
			if (running.broker) await running.broker.stop();
		} finally {
			if (running.pg) await running.pg.stop();
		}
		process.exit(0);
	};
	process.on("SIGINT", () => void stop("SIGINT"));
	process.on("SIGTERM", () => void stop("SIGTERM"));
}

/** Ends the process after a failed start, stopping what had started. */
export async function failStart(running: Running, err: unknown): Promise<never> {
	process.stderr.write(`start failed: ${(err as Error)?.stack ?? err}\n`);
	await running.broker?.stop().catch(() => undefined);
	await running.pg?.stop().catch(() => undefined);
	process.exit(1);
}
