import { Transporters, type Packet as Packets } from "moleculer";

type Packet = Packets.Packet<any>;
import { watchNatsConnection } from "./connection-watch";
import { NatsCutOffError } from "./request-deadline";
import { packetSubject, subjectSender, subscriptionSubjects, type NatsRole } from "./subjects";

/**
 * The services a node of each role may offer. A control plane offers the cluster's; an agent
 * its `node-agent`; the operator (the REPL) nothing. Anything else a node announces is dropped
 * from its INFO before the registry sees it, so no call is ever routed to it: an agent's
 * identity cannot pose as the scheduler (and swallow reports) or as `nodes` (and name itself
 * the leader).
 */
const OFFERS: Record<NatsRole, ((service: string) => boolean) | null> = {
	control: null,
	agent: service => service === "$node" || service === "node-agent",
	operator: service => service === "$node"
};

/**
 * How long after joining a node yields to another process of its node ID (Moleculer stops the
 * newcomer that learns of an older one); after that it keeps running, ignores the other's INFO
 * and tells it of itself, so that the newcomer is the one that stops.
 */
const JOINING_MS = 5000;

/** How often one refusal of one sender is logged: a flood of forged packets is not a flood of logs. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

interface Sent {
	role: NatsRole;
	sender: string;
}

/**
 * Moleculer's NATS transporter on this cluster's subjects (lib/transport/subjects.ts): every
 * packet is published under its sender's node ID and role, and a packet received is handled only
 * when the `sender` it names is the one of its subject, which nats-server lets an identity
 * publish under its own name only. So `ctx.nodeID`, a heartbeat's or an INFO's node, is who
 * NATS says sent it, not what the packet says of itself; and what a node may offer rests on the
 * role it could publish in.
 */
export class BoundNatsTransporter extends Transporters.NATS {
	private readonly refusals = new Map<string, { at: number; count: number }>();
	private joinedAt: number | null = null;
	/** the nats client has lost its server and is reconnecting (read by request-deadline.ts) */
	cutOff = false;

	constructor(
		opts: Record<string, unknown>,
		private readonly role: NatsRole
	) {
		super(opts);
		// Moleculer balances requests and events itself: no queue-group subjects, which would
		// carry no sender.
		this.hasBuiltInBalancer = false;
	}

	override onConnected(wasReconnect?: boolean): Promise<any> {
		this.joinedAt ??= Date.now();
		return super.onConnected(wasReconnect);
	}

	override connect(): Promise<any> {
		return super.connect().then((result: unknown) => {
			watchNatsConnection(
				this.transit,
				() => this.lost(),
				() => this.back()
			);
			return result;
		});
	}

	/**
	 * The nats client lost its server (it reconnects by itself). Moleculer's NATS transporter
	 * tells the broker nothing; here the broker hears `$transporter.disconnected`, as after a
	 * stop, which also stops its heartbeat timers: a process that hears no one does not give
	 * every other node up for lost (after an outage longer than the heartbeat timeout, each of
	 * a thousand agents would otherwise ask each of the others for its INFO again). The calls
	 * waiting for an answer fail at once (NatsCutOffError): an answer published now reaches no
	 * one, and one on its way was lost with the connection.
	 */
	private lost(): void {
		this.cutOff = true;
		this.logger.warn("NATS connection lost: reconnecting");
		const transit = this.transit as unknown as {
			pendingRequests: Map<
				string,
				{ action?: { name?: string }; nodeID?: string; reject(e: Error): void }
			>;
			removePendingRequest(id: string): void;
		};
		for (const [id, request] of [...transit.pendingRequests]) {
			transit.removePendingRequest(id);
			request.reject(new NatsCutOffError(request.action?.name ?? "", request.nodeID));
		}
		this.broker.broadcastLocal("$transporter.disconnected", { graceFul: false });
	}

	/**
	 * Back on NATS (its subscriptions renewed): the broker hears `$transporter.connected` with
	 * `wasReconnect` (its heartbeat timers start again; the scheduler and the agent act on it),
	 * and the others hear of this node at once rather than at its next heartbeat: a HEARTBEAT
	 * (a node that gave this one up asks for its INFO) and, from a control plane, a DISCOVER
	 * (every node answers with its INFO). Not Moleculer's own reconnect (an INFO to every node
	 * and a DISCOVER from every node), which is quadratic in the nodes.
	 */
	private back(): void {
		this.cutOff = false;
		this.logger.info("NATS connection back");
		const transit = this.transit as unknown as {
			discoverer: { sendHeartbeat(): Promise<unknown>; discoverAllNodes(): Promise<unknown> };
		};
		void transit.discoverer.sendHeartbeat().catch(() => undefined);
		if (this.role === "control")
			void transit.discoverer.discoverAllNodes().catch(() => undefined);
		this.broker.broadcastLocal("$transporter.connected", { wasReconnect: true });
	}

	override publish(packet: Packet): Promise<void> {
		const subject = packetSubject(
			packet.type,
			this.role,
			this.nodeID,
			packet.target,
			this.prefix
		);
		return this.send(subject, this.serialize(packet));
	}

	override subscribe(cmd: string, nodeID?: string): Promise<void> {
		for (const subject of subscriptionSubjects(
			cmd,
			this.role,
			this.nodeID,
			Boolean(nodeID),
			this.prefix
		))
			this.client.subscribe(subject, {
				callback: (err: Error | null, msg: { subject: string; data: Uint8Array }) => {
					if (err) {
						this.logger.error(
							`NATS refused the subscription to ${subject}: ${err.message}`
						);
						return;
					}
					const from = subjectSender(msg.subject, this.prefix);
					if (from) void this.receive(cmd, Buffer.from(msg.data), from as never);
				}
			});
		return Promise.resolve();
	}

	/** `from`: who published the packet, by its subject (passed through transporterReceive). */
	override receive(cmd: string, data: Buffer, from?: unknown): Promise<void> | void {
		return this.verifiedMessage(cmd, data, from as Sent | undefined);
	}

	private verifiedMessage(cmd: string, data: Buffer, from: Sent | undefined): any {
		if (!from) return;
		let packet: Packet;
		try {
			packet = this.deserialize(cmd, data);
		} catch (err) {
			this.logger.warn(`an unreadable ${cmd} packet from ${from.sender} dropped`, err);
			return;
		}
		const payload = packet.payload as { sender?: unknown; services?: unknown };
		if (payload.sender !== from.sender) {
			this.refused(from, `names "${String(payload.sender)}" as its sender`, cmd);
			return;
		}
		if (
			cmd === "INFO" &&
			from.sender === this.nodeID &&
			(payload as { instanceID?: unknown }).instanceID !== this.broker.instanceID &&
			this.joinedAt !== null &&
			Date.now() - this.joinedAt > JOINING_MS
		) {
			this.intruder();
			return;
		}
		const offers = OFFERS[from.role];
		if (offers && Array.isArray(payload.services)) {
			const kept = payload.services.filter((s: { name?: unknown }) =>
				offers(String(s?.name))
			);
			if (kept.length !== payload.services.length) {
				const dropped = payload.services
					.filter((s: { name?: unknown }) => !offers(String(s?.name)))
					.map((s: { name?: unknown }) => String(s?.name));
				this.refused(from, `offers ${dropped.join(", ")}, not its role's`, cmd);
				payload.services = kept;
			}
		}
		return (
			this as unknown as { messageHandler(cmd: string, p: Packet): unknown }
		).messageHandler(cmd, packet);
	}

	/**
	 * Another process joined with this node's ID: it is told of this one by a broadcast INFO
	 * (heard by every node of this ID, agents included: subscriptionSubjects), which makes
	 * Moleculer stop it; the control planes hear this node's own INFO again, unchanged.
	 */
	private intruder(): void {
		this.refused(
			{ role: this.role, sender: this.nodeID },
			"comes from another process with this node's ID",
			"INFO"
		);
		const transit = this.transit as unknown as {
			discoverer: { sendLocalNodeInfo(nodeID?: string): Promise<unknown> };
		};
		void transit.discoverer.sendLocalNodeInfo().catch(() => undefined);
	}

	private refused(from: Sent, what: string, cmd: string): void {
		const now = Date.now();
		const key = `${from.sender} ${cmd} ${what}`;
		const seen = this.refusals.get(key);
		if (seen && now - seen.at < REFUSAL_LOG_INTERVAL_MS) {
			seen.count++;
			return;
		}
		if (this.refusals.size > 1000) this.refusals.clear();
		this.refusals.set(key, { at: now, count: 0 });
		this.logger.warn(
			{ node: from.sender, role: from.role, packet: cmd, earlier: seen?.count ?? 0 },
			`a ${cmd} packet from ${from.role} ${from.sender} ${what}: refused`
		);
	}
}
