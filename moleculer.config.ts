import os from "os";
import type { BrokerOptions } from "moleculer";
import type { Config } from "./lib/config";
import { AjvValidator } from "./middlewares/ajv-validator";

/** Broker options from the configuration: transporter, pino logger, ajv validator. */
export function brokerOptions(config: Config, databaseUrl: string | null): BrokerOptions {
	return {
		namespace: "scale",
		nodeID: config.nodeId || `${os.hostname()}-${process.pid}`,
		metadata: { databaseUrl },
		transporter: config.transporter
			? { type: "NATS", options: { servers: [config.transporter] } }
			: undefined,
		logger: {
			type: "Pino",
			options: {
				level: config.logLevel,
				pino: {
					// Credentials in URLs or headers never reach the log.
					options: {
						redact: [
							"databaseUrl",
							"req.headers.authorization",
							"headers.authorization"
						]
					}
				}
			}
		},
		logLevel: config.logLevel as any,
		validator: new AjvValidator(),
		errorHandler: undefined,
		requestTimeout: 30 * 1000,
		retryPolicy: { enabled: false },
		// Heartbeats decide when a remote node (and its services) is gone.
		heartbeatInterval: 5,
		heartbeatTimeout: 15,
		// bin/start stops the broker and then PostgreSQL on a signal, in that order.
		skipProcessEventRegistration: true,
		tracking: { enabled: true, shutdownTimeout: 10 * 1000 }
	};
}
