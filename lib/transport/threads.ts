import type { MessagePort } from "worker_threads";
import { Serializers, Transporters } from "moleculer";

/** What crosses the port: a Moleculer topic and its packet's payload as JSON. */
interface ThreadMessage {
	topic: string;
	json: string;
}

/**
 * The serializer of brokers joined by a ThreadTransporter: a packet's payload as a JSON string,
 * what a network transporter would carry (both sides see what they would see over NATS), without
 * the UTF-8 buffer around it.
 */
export class JsonTextSerializer extends Serializers.Base {
	serialize(payload: Record<string, any>): Buffer {
		return JSON.stringify(payload) as unknown as Buffer;
	}

	deserialize(json: Buffer): Record<string, any> {
		return JSON.parse(json as unknown as string);
	}
}

/**
 * A transporter between two brokers in threads of one process (`npm start`'s scheduler thread,
 * see lib/launch/scheduler-thread.ts), over the two ends of a MessageChannel: every packet goes to the
 * other broker, which keeps the topics it subscribed to. No server, no socket: the packets are
 * JsonTextSerializer's strings, which the port copies.
 */
export class ThreadTransporter extends Transporters.Base {
	/** subscribed topic → its command */
	private readonly topics = new Map<string, string>();
	private readonly port: MessagePort;

	constructor(opts: { port: MessagePort }) {
		// the port stays out of `opts`, which Moleculer logs and describes to peers
		super({});
		this.port = opts.port;
		// Moleculer balances requests and events itself
		this.hasBuiltInBalancer = false;
	}

	connect(): Promise<any> {
		this.port.on("message", ({ topic, json }: ThreadMessage) => {
			const cmd = this.topics.get(topic);
			if (cmd !== undefined) void this.receive(cmd, json as unknown as Buffer);
		});
		return this.onConnected();
	}

	disconnect(): Promise<any> {
		this.connected = false;
		this.port.close();
		this.topics.clear();
		return Promise.resolve();
	}

	subscribe(cmd: string, nodeID?: string): Promise<void> {
		this.topics.set(this.getTopicName(cmd, nodeID), cmd);
		return Promise.resolve();
	}

	subscribeBalancedRequest(): Promise<void> {
		return Promise.resolve();
	}

	subscribeBalancedEvent(): Promise<void> {
		return Promise.resolve();
	}

	send(topic: string, json: Buffer): Promise<void> {
		this.port.postMessage({ topic, json: json as unknown as string } satisfies ThreadMessage);
		return Promise.resolve();
	}
}
