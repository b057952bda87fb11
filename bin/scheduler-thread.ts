import { ServiceBroker } from "moleculer";
import { parentPort, workerData } from "worker_threads";
import { brokerOptions } from "../moleculer.config";
import type { SchedulerThreadData } from "../lib/launch/scheduler-thread";
import { loadServiceSchemas } from "../lib/launch/services";
import { JsonTextSerializer, ThreadTransporter } from "../lib/transport/threads";

/** The scheduler thread of `npm start` (lib/launch/scheduler-thread.ts): a broker running the scheduler. */
async function main() {
	const { nodeID, port, databaseUrl, config } = workerData as SchedulerThreadData;
	const broker = new ServiceBroker({
		...brokerOptions(config, databaseUrl),
		nodeID,
		transporter: new ThreadTransporter({ port }),
		serializer: new JsonTextSerializer()
	});
	for (const schema of loadServiceSchemas(config)) broker.createService(schema);
	try {
		await broker.start();
	} catch (error) {
		await broker.stop().catch(() => undefined);
		parentPort!.postMessage({
			started: false,
			error: (error as Error)?.stack ?? String(error)
		});
		return;
	}
	parentPort!.on("message", message => {
		if (message !== "stop") return;
		void broker.stop().finally(() => process.exit(0));
	});
	parentPort!.postMessage({ started: true });
}

void main();
