import os from "os";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { COMMANDS } from "../lib/repl/commands";
import {
	configOrExit,
	failStart,
	say,
	startServices,
	stopOnSignals,
	type Running
} from "../lib/launch/launch";

/**
 * `npm run repl`: the operators' REPL (moleculer-repl with our commands). With TRANSPORTER it
 * joins the cluster as a node of its own that runs no service and calls the others' actions;
 * without, it runs the whole service in this process, as `npm start` does, and works on that.
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
	await broker.repl();
}

main().catch(err => failStart(running, err));
