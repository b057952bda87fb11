import path from "path";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { ConfigError, loadConfig, needsDatabase, type Config } from "../lib/config";
import { EmbeddedPostgres } from "../lib/db/embedded";
import { createSequelize } from "../lib/db/connection";
import { migrate } from "../lib/db/migrate";
import { loadServiceSchemas } from "../lib/services";
import { checkTransporter, describeTransporter, TransporterError } from "../lib/transport/nats";

function say(msg: string) {
	process.stdout.write(`${msg}\n`);
}

/** What a signal must stop, as far as start-up has got. */
const running: { broker: ServiceBroker | null; pg: EmbeddedPostgres | null } = {
	broker: null,
	pg: null
};

async function prepareDatabase(config: Config): Promise<string | null> {
	if (!needsDatabase(config)) return null;
	let url = config.databaseUrl;
	if (!url) {
		const pg = new EmbeddedPostgres({
			dataDir: path.join(config.dataDir, "postgres"),
			port: config.embeddedPgPort,
			database: "scale",
			log: say
		});
		running.pg = pg;
		await pg.start();
		url = pg.url;
	}
	// Two connections: one holds the migration lock while the other migrates.
	const sequelize = createSequelize(url, { poolMax: 2 });
	try {
		await migrate(sequelize, say);
	} finally {
		await sequelize.close();
	}
	return url;
}

function handleSignals() {
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

async function main() {
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
	if (!needsDatabase(config) && !config.transporter) {
		process.stderr.write(
			`configuration error: SERVICES=${config.services.join(",")} runs no service with a database; such a process (a node agent, say) reaches the control plane through NATS: set TRANSPORTER, e.g. TRANSPORTER=nats://127.0.0.1:4222\n`
		);
		process.exit(2);
	}
	handleSignals();
	if (config.transporter) {
		try {
			await checkTransporter(config.transporter);
		} catch (err) {
			if (!(err instanceof TransporterError)) throw err;
			process.stderr.write(`transporter error: ${err.message}\n`);
			process.exit(2);
		}
	}

	const url = await prepareDatabase(config);
	const broker = new ServiceBroker(brokerOptions(config, url));
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
	say("stop with Ctrl-C (SIGINT) or SIGTERM");
}

main().catch(async err => {
	process.stderr.write(`start failed: ${err && err.stack ? err.stack : err}\n`);
	await running.broker?.stop().catch(() => undefined);
	await running.pg?.stop().catch(() => undefined);
	process.exit(1);
});
