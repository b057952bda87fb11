import { needsDatabase } from "../lib/launch/config";
import {
	configOrExit,
	failStart,
	say,
	startServices,
	stopOnSignals,
	type Running
} from "../lib/launch/launch";

/** `npm start`: the configured services (all by default), with their database. */
const running: Running = { broker: null, pg: null };

async function main() {
	const config = await configOrExit();
	if (!needsDatabase(config) && !config.transporter) {
		process.stderr.write(
			`configuration error: SERVICES=${config.services.join(",")} runs no service with a database; such a process (a node agent, say) reaches the control plane through NATS: set TRANSPORTER, e.g. TRANSPORTER=nats://127.0.0.1:4222\n`
		);
		process.exit(2);
	}
	stopOnSignals(running);
	await startServices(config, running);
	say("stop with Ctrl-C (SIGINT) or SIGTERM");
}

main().catch(err => failStart(running, err));
