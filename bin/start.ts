import { needsDatabase } from "../lib/launch/config";
import { replSocketPath, serveReplSocket } from "../lib/launch/repl-socket";
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
	const broker = await startServices(config, running);
	// a process of its own (no cluster): `npm run repl` attaches to it on this machine
	if (!config.transporter) {
		await serveReplSocket(broker, config.dataDir);
		say(`REPL: \`npm run repl\` attaches (${replSocketPath(config.dataDir)}, this user only)`);
	}
	say("stop with Ctrl-C (SIGINT) or SIGTERM");
}

main().catch(err => failStart(running, err));
