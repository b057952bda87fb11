import os from "os";
import { Utils, type BrokerOptions, type ServiceBroker } from "moleculer";
import type { Config } from "./lib/config";
import { AjvValidator } from "./middlewares/ajv-validator";
import { DatabaseMiddleware } from "./lib/db/broker-database";
import { natsClientOptions } from "./lib/transport/nats";

/**
 * `$node.options` (any peer may call it) answers the broker's options without the transporter's
 * credentials: a peer holding one NATS user's password learns nothing of another's.
 */
const nodeOptionsWithoutSecrets = () => ({
	// a new object per broker: Moleculer adds its own $node schema to this one's mixins
	actions: {
		options: {
			handler(this: { broker: ServiceBroker }) {
				const options = Utils.safetyObject(this.broker.options, this.broker.options as any);
				const transport = options.transporter?.options;
				if (transport)
					for (const key of ["user", "pass", "token", "tls"]) delete transport[key];
				return options;
			}
		}
	}
});

/**
 * Broker options from the configuration: transporter, pino logger, ajv validator. The database
 * URL goes to the services through DatabaseMiddleware, never into metadata (sent to every peer).
 */
export function brokerOptions(config: Config, databaseUrl: string | null): BrokerOptions {
	return {
		namespace: "scale",
		nodeID: config.nodeId || `${os.hostname()}-${process.pid}`,
		middlewares: [DatabaseMiddleware(databaseUrl)],
		transporter: config.transporter
			? { type: "NATS", options: natsClientOptions(config.transporter) }
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
		internalServices: { $node: nodeOptionsWithoutSecrets() } as any,
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
