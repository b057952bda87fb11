/**
 * The NATS subjects of this cluster's Moleculer packets: `<prefix>.<TYPE>.<role>.<sender>` for a
 * broadcast, `<prefix>.<TYPE>.<role>.<sender>.<target>` for a packet to one node. Moleculer's own
 * subjects (`<prefix>.<TYPE>[.<target>]`) say nothing of who sent a packet; here the sender and
 * its role are tokens of the subject, which nats-server's permissions let each identity publish
 * under its own name and role only (lib/cluster/nats-identities.ts), and a receiver drops a
 * packet whose `sender` field is not its subject's (lib/transport/bound-nats.ts).
 */

/** `MOL-<namespace>`: the namespace of brokerOptions (lib/launch/broker-options.ts). */
export const MOLECULER_PREFIX = "MOL-scale";

/**
 * What a node is to the others: a control plane (its services are the cluster's), an agent (it
 * offers `node-agent` only) or the operator (the REPL: it calls, it offers nothing).
 */
export type NatsRole = "control" | "agent" | "operator";

export const NATS_ROLES: readonly NatsRole[] = ["control", "agent", "operator"];

/** The packet types Moleculer broadcasts (no target). */
export const BROADCAST_TYPES = ["DISCOVER", "INFO", "HEARTBEAT", "DISCONNECT", "PING"] as const;

/** Node IDs become subject tokens: no dots, wildcards or spaces. */
export function checkNodeId(nodeId: string): string {
	if (!/^[A-Za-z0-9_-]+$/.test(nodeId))
		throw new Error(
			`node ID "${nodeId}" cannot name NATS subjects: letters, digits, "-" and "_" only`
		);
	return nodeId;
}

/** The subject of a packet of `type` from `sender` (in `role`), to `target` or to every node. */
export function packetSubject(
	type: string,
	role: NatsRole,
	sender: string,
	target?: string | null,
	prefix = MOLECULER_PREFIX
): string {
	return `${prefix}.${type}.${role}.${sender}${target ? `.${target}` : ""}`;
}

/**
 * The roles whose packets a node of `role` hears. An agent hears the control planes and the
 * operator only: it answers them and calls them, and nobody else (an agent's INFO, HEARTBEAT or
 * DISCOVER is nothing to another agent). In a cluster of n agents this spares nats-server n
 * deliveries of each agent's heartbeat and every agent a parse of them, and an agent that starts
 * is not sent the INFO of every other one.
 */
export function heardRoles(role: NatsRole): readonly NatsRole[] {
	return role === "agent" ? ["control", "operator"] : NATS_ROLES;
}

/**
 * What node `self`, of `role`, subscribes to for packets of `type`: those sent to it
 * (`targeted`), or the broadcast ones, from the roles it hears. An agent also hears the INFO
 * broadcast under its own node ID, the one packet of its own ID it has use for: another process
 * that joins with that ID announces itself with it (lib/transport/bound-nats.ts).
 */
export function subscriptionSubjects(
	type: string,
	role: NatsRole,
	self: string,
	targeted: boolean,
	prefix = MOLECULER_PREFIX
): string[] {
	const target = targeted ? `.${self}` : "";
	if (role !== "agent") return [`${prefix}.${type}.*.*${target}`];
	const subjects = heardRoles(role).map(from => `${prefix}.${type}.${from}.*${target}`);
	if (!targeted && (type === "INFO" || type === "*"))
		subjects.push(`${prefix}.INFO.agent.${self}`);
	return subjects;
}

/** Who published on `subject` (a packetSubject), or null for a subject of another shape. */
export function subjectSender(
	subject: string,
	prefix = MOLECULER_PREFIX
): { role: NatsRole; sender: string } | null {
	if (!subject.startsWith(`${prefix}.`)) return null;
	const tokens = subject.slice(prefix.length + 1).split(".");
	if (tokens.length !== 3 && tokens.length !== 4) return null;
	const role = tokens[1] as NatsRole;
	if (!NATS_ROLES.includes(role)) return null;
	return { role, sender: tokens[2] };
}
