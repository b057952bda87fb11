import os from "os";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { COMMANDS } from "../lib/repl/commands";
import { clusterValues, completer } from "../lib/repl/complete";
import {
	configOrExit,
	failStart,
	say,
	startServices,
	stopOnSignals,
	type Running
} from "../lib/launch/launch";
import { ReplSocketClient, replSocketPath } from "../lib/launch/repl-socket";
import { describeTransporter } from "../lib/transport/nats";

/**
 * `npm run repl`: the operators' REPL (moleculer-repl with our commands). With TRANSPORTER it
 * joins the cluster as a node of its own that runs no service and calls the others' actions.
 * Without, it attaches to the `npm start` running on this machine with the same data folder
 * (its REPL socket, which only the user running it may open), or, when none runs, runs the whole
 * service in this process, as `npm start` does, and works on that.
 */
const running: Running = { broker: null, pg: null };

async function main() {
	// the REPL's screen is for the operator: services' logs only when something is wrong
	process.env.LOG_LEVEL ||= "warn";
	const config = await configOrExit();
	const replOptions = { customCommands: COMMANDS, delimiter: "scale $" };
	let broker: ServiceBroker;
	if (config.transporter) {
		broker = new ServiceBroker({
			...brokerOptions(config, null, config.natsRole ?? "operator"),
			nodeID: config.nodeId || `repl-${os.hostname()}-${process.pid}`,
			replOptions
		});
		running.broker = broker;
		stopOnSignals(running);
		await broker.start();
		say(`joined the cluster as ${broker.nodeID}; "help" lists the commands, "quit" leaves`);
	} else {
		const socket = replSocketPath(config.dataDir);
		let client: ReplSocketClient | null;
		try {
			client = await ReplSocketClient.connect(socket);
		} catch (err: any) {
			process.stderr.write(
				`refused: the service's REPL socket ${socket} is not open to this user (${err?.code ?? err}); only the user that runs the service may attach\n`
			);
			process.exit(1);
		}
		if (client) {
			broker = new ServiceBroker({
				namespace: "scale",
				nodeID: `repl-${os.hostname()}-${process.pid}`,
				logger: false,
				middlewares: [client.middleware()],
				replOptions
			});
			running.broker = broker;
			stopOnSignals(running);
			await broker.start();
			say(
				`attached to the service running on this machine (${socket}); "help" lists the commands, "quit" leaves`
			);
		} else {
			stopOnSignals(running);
			broker = await startServices(config, running, {
				replOptions,
				// `quit` stops the broker: the embedded PostgreSQL goes with it
				stopped: async () => {
					await running.pg?.stop();
				}
			});
			say('every service runs in this process; "help" lists the commands, "quit" stops them');
		}
	}
	// moleculer-repl's `info` prints the broker's options and the transporter's settings: both
	// without credentials. Once connected, the NATS client reconnects with its own copy of them,
	// and Moleculer reads the transporter's settings no more.
	if (config.transporter) {
		(broker.options as Record<string, unknown>).transporter = describeTransporter(
			config.transporter
		);
		const tx = (broker as unknown as { transit?: { tx?: { opts?: Record<string, unknown> } } })
			.transit?.tx;
		if (tx?.opts)
			tx.opts = {
				servers: tx.opts.servers,
				user: tx.opts.user,
				...(tx.opts.tls ? { tls: "(TLS, the cluster's CA)" } : {})
			};
	}
	const server = (await broker.repl()) as unknown as ReplCompleting | undefined;
	if (server) completeOurs(server, broker);
}

/** Node's REPL keeps its completer in the callback form. */
interface ReplCompleting {
	completer(line: string, done: (err: unknown, result?: [string[], string]) => void): void;
}

/** Our commands' options and values are completed here; the rest by moleculer-repl. */
function completeOurs(server: ReplCompleting, broker: ServiceBroker) {
	const theirs = server.completer.bind(server);
	const ours = completer(COMMANDS, clusterValues(broker));
	server.completer = (line, done) =>
		void ours(line).then(
			result => (result ? done(null, result) : theirs(line, done)),
			err => done(err)
		);
}

main().catch(err => failStart(running, err));
