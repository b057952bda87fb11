import { ServiceBroker, type BrokerOptions } from "moleculer";
import { MessageChannel } from "worker_threads";
import { brokerOptions } from "./broker-options";
import { ConfigError, loadConfig, natsRoleOf, needsDatabase, type Config } from "./config";
import type { EmbeddedPostgres } from "../db/embedded";
import {
	splitForSchedulerThread,
	startSchedulerThread,
	wantsSchedulerThread,
	type SchedulerThread
} from "./scheduler-thread";
import { loadServiceSchemas } from "./services";
import { checkTransporter, describeTransporter, TransporterError } from "../transport/nats";
import { subscriptionSubjects } from "../transport/subjects";
import { JsonTextSerializer, ThreadTransporter } from "../transport/threads";

/** What a process started (as far as start-up got), for a signal to stop in order. */
export interface Running {
	broker: ServiceBroker | null;
	pg: EmbeddedPostgres | null;
	/** `npm start`'s scheduler thread, where it has one */
	schedulerThread?: SchedulerThread | null;
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
			await checkTransporter(
				config.transporter,
				5000,
				config.nodeId
					? {
							id: config.nodeId,
							subject: subscriptionSubjects(
								"REQ",
								natsRoleOf(config),
								config.nodeId,
								true
							)[0]
						}
					: undefined
			);
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
		? await (
				require("./prepare-database") as typeof import("./prepare-database")
			).prepareDatabase(config, say, (pg: EmbeddedPostgres) => (running.pg = pg))
		: null;
	const threaded = url !== null && wantsSchedulerThread(config);
	const { main, thread } = threaded
		? splitForSchedulerThread(config)
		: { main: config, thread: null };
	const options = brokerOptions(main, url);
	// the main thread's broker on port1, the scheduler thread's on port2
	const channel = threaded ? new MessageChannel() : null;
	const broker = new ServiceBroker({
		...options,
		...(channel
			? {
					transporter: new ThreadTransporter({ port: channel.port1 }),
					serializer: new JsonTextSerializer()
				}
			: {}),
		...extra
	});
	running.broker = broker;
	for (const schema of loadServiceSchemas(main)) broker.createService(schema);
	const threadNode = `${options.nodeID}-scheduler`;
	await Promise.all([
		broker.start(),
		thread &&
			startSchedulerThread(
				{ nodeID: threadNode, port: channel!.port2, databaseUrl: url!, config: thread },
				reason => {
					void failStart(running, new Error(reason), "stopping");
				}
			).then(started => (running.schedulerThread = started))
	]);

	say(`services: ${main.services.join(", ")} on node ${broker.nodeID}`);
	if (thread) say(`scheduler: in a thread of its own, node ${threadNode}`);
	if (config.transporter) say(`cluster: ${describeTransporter(config.transporter)}`);
	if (config.services.includes("api")) {
		const host = config.host.includes(":") ? `[${config.host}]` : config.host;
		say(`REST API: http://${host}:${config.port}/api/ (also /api/v3/)`);
	}
	if (config.metricsPort !== null) {
		const host = config.metricsHost.includes(":")
			? `[${config.metricsHost}]`
			: config.metricsHost;
		say(`metrics: http://${host}:${config.metricsPort}/metrics (Prometheus)`);
	}
	if (running.pg)
		say(
			`data: ${running.pg.dataDir} (embedded PostgreSQL on 127.0.0.1:${config.embeddedPgPort}, its password in ${running.pg.passwordFile})`
		);
	else if (url) say("data: the PostgreSQL named by DATABASE_URL");
	return broker;
}

/**
 * A local service with work to finish before the broker stops (the node agent's drain):
 * `drainBeforeStop` resolves once it is done, `hurryDrain` cuts it short.
 */
interface Drainer {
	name: string;
	drainBeforeStop(why: string): Promise<void>;
	hurryDrain(why: string): void;
}

function drainersOf(broker: ServiceBroker | null): Drainer[] {
	const services = (broker?.services ?? []) as unknown as Partial<Drainer>[];
	return services.filter(
		(s): s is Drainer =>
			typeof s.drainBeforeStop === "function" && typeof s.hurryDrain === "function"
	);
}

/**
 * On the first SIGINT or SIGTERM: the services that drain do (the node agent lets its running
 * executions end, up to AGENT_DRAIN_S), then the broker stops, then PostgreSQL, and the process
 * exits 0. A second signal during the drain cuts it short (what still runs is killed at once);
 * the drain runs before `broker.stop()`, so Moleculer's own shutdownTimeout does not bound it.
 */
export function stopOnSignals(running: Running) {
	let phase: "running" | "draining" | "stopping" = "running";
	let drainers: Drainer[] = [];
	const stop = async (signal: string) => {
		if (phase === "stopping") return;
		if (phase === "draining") {
			say(`${signal} received again: stopping at once`);
			for (const d of drainers) d.hurryDrain(`the agent received ${signal} again`);
			return;
		}
		phase = "draining";
		drainers = drainersOf(running.broker);
		try {
			if (drainers.length > 0) {
				say(
					`${signal} received: draining (${drainers.map(d => d.name).join(", ")}); ${signal} again stops at once`
				);
				await Promise.all(
					drainers.map(d =>
						d
							.drainBeforeStop(`the agent received ${signal}`)
							.catch(err =>
								process.stderr.write(
									`${d.name}: the drain failed: ${(err as Error)?.stack ?? err}\n`
								)
							)
					)
				);
			}
		} finally {
			phase = "stopping";
		}
		say(`${signal} received: stopping services${running.pg ? " and PostgreSQL" : ""}`);
		try {
			// the agent's last reports go to the scheduler, which stops after it
			if (running.broker) await running.broker.stop();
			if (running.schedulerThread) await running.schedulerThread.stop();
		} finally {
			if (running.pg) await running.pg.stop();
		}
		process.exit(0);
	};
	process.on("SIGINT", () => void stop("SIGINT"));
	process.on("SIGTERM", () => void stop("SIGTERM"));
}

/** Ends the process after a failed start (or a part of it failed), stopping what had started. */
export async function failStart(
	running: Running,
	err: unknown,
	what = "start failed"
): Promise<never> {
	process.stderr.write(`${what}: ${(err as Error)?.stack ?? err}\n`);
	await running.broker?.stop().catch(() => undefined);
	await running.schedulerThread?.stop().catch(() => undefined);
	await running.pg?.stop().catch(() => undefined);
	process.exit(1);
}
