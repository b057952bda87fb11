import os from "os";
import type { BrokerOptions, ServiceBroker } from "moleculer";
import { natsRoleOf, type Config } from "./config";
import { AjvValidator } from "../../middlewares/ajv-validator";
import { CallerCheckMiddleware } from "../agent/callers";
import { DatabaseMiddleware } from "../db/broker-database";
import { PrometheusReporter } from "../observability/prometheus";
import { natsClientOptions } from "../transport/nats";
import { BoundNatsTransporter } from "../transport/bound-nats";
import { RequestDeadlineMiddleware } from "../transport/request-deadline";
import type { NatsRole } from "../transport/subjects";

/**
 * `$node.options` (any peer may call it) answers the broker's plain settings only. Moleculer's
 * own answer serialises the options' objects in depth: the validator reaches the broker and
 * every service, with the database URL of the scheduler's lock and the NATS password.
 */
function publicOptions(options: BrokerOptions): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	for (const [key, value] of Object.entries(options))
		if (value === null || ["string", "number", "boolean"].includes(typeof value))
			out[key] = value;
	if (options.transporter instanceof BoundNatsTransporter)
		out.transporter = { type: "NATS", servers: options.transporter.opts.servers };
	return out;
}

const nodeOptionsWithoutSecrets = () => ({
	// a new object per broker: Moleculer adds its own $node schema to this one's mixins
	actions: {
		options: {
			handler(this: { broker: ServiceBroker }) {
				return publicOptions(this.broker.options);
			}
		}
	}
});

/**
 * Broker options from the configuration: transporter, pino logger, ajv validator. The database
 * URL goes to the services through DatabaseMiddleware, never into metadata (sent to every peer).
 */
export function brokerOptions(
	config: Config,
	databaseUrl: string | null,
	role: NatsRole = natsRoleOf(config)
): BrokerOptions {
	return {
		namespace: "scale",
		nodeID: config.nodeId || `${os.hostname()}-${process.pid}`,
		// the first is the innermost: CallerCheck right around the handlers, RequestDeadline around
		// the transit's request itself
		middlewares: [
			CallerCheckMiddleware(),
			RequestDeadlineMiddleware(),
			DatabaseMiddleware(databaseUrl)
		],
		transporter: config.transporter
			? new BoundNatsTransporter(natsClientOptions(config.transporter), role)
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
		// Moleculer's metrics, written by the book (lib/observability/prometheus.ts), with the service's own gauges
		// (mixins/prometheus-gauges.mixin.ts, the scheduler's passes), when METRICS_PORT is set;
		// on METRICS_HOST, loopback by default, not the API's HOST
		metrics:
			config.metricsPort === null
				? { enabled: false }
				: {
						enabled: true,
						// an instance is taken as it is (Moleculer's resolve); its typings name options only
						reporter: [
							new PrometheusReporter({
								host: config.metricsHost,
								port: config.metricsPort
							}) as any
						]
					},
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
