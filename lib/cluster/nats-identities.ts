import { randomBytes } from "crypto";
import fs from "fs";
import path from "path";

import {
	BROADCAST_TYPES,
	checkNodeId,
	MOLECULER_PREFIX,
	subscriptionSubjects,
	type NatsRole
} from "../transport/subjects";

export { checkNodeId, MOLECULER_PREFIX, type NatsRole };

/**
 * One NATS identity per process of a cluster, and what each may publish and subscribe to.
 *
 * The cluster's packets go on subjects that name their sender and its role
 * (lib/transport/subjects.ts): `<prefix>.<TYPE>.<role>.<sender>` broadcast,
 * `<prefix>.<TYPE>.<role>.<sender>.<target>` to one node. A user's permissions tie it to its node
 * ID and role:
 *
 * - it publishes only under its own role and node ID, so a packet's subject says who sent it
 *   (the receiving transporter refuses a packet whose `sender` field says otherwise);
 * - it subscribes only to the broadcast subjects and to those whose target is its node ID:
 *   another node's requests, responses and events are not delivered to it, and a process with
 *   another node's NODE_ID but its own credentials is refused that node's subjects;
 * - an agent publishes the broadcast subjects, and its other packets to the control planes and
 *   the operator only: not a request, response, event or discovery to another agent. It
 *   subscribes to the control planes' and the operator's packets only (heardRoles): it never
 *   hears of another agent, so it has nothing to ask one;
 * - a control plane, and the operator (the REPL), publish any packet to any node.
 */

/** What nats-server is told of one user. */
export interface NatsUser {
	user: string;
	password: string;
	permissions?: NatsPermissions;
}

export interface NatsPermissions {
	publish: { allow: string[] };
	subscribe: { allow: string[] };
}

/** The node ID the operator's identity (the REPL) joins with. */
export const OPERATOR_NODE_ID = "operator";

/**
 * The permissions of the user of node `nodeId` in role `role`; `trusted`: the node IDs of the
 * control planes and the operator, the only targets an agent may publish to.
 */
export function natsPermissions(
	role: NatsRole,
	nodeId: string,
	trusted: string[],
	prefix = MOLECULER_PREFIX
): NatsPermissions {
	checkNodeId(nodeId);
	const subscribe = [
		...BROADCAST_TYPES.flatMap(t => subscriptionSubjects(t, role, nodeId, false, prefix)),
		...subscriptionSubjects("*", role, nodeId, true, prefix)
	];
	const own = `${prefix}.*.${role}.${nodeId}`;
	if (role !== "agent")
		return { publish: { allow: [own, `${own}.*`] }, subscribe: { allow: subscribe } };
	const targets = trusted.filter(id => id !== nodeId).map(checkNodeId);
	return {
		publish: {
			allow: [
				...BROADCAST_TYPES.map(type => `${prefix}.${type}.agent.${nodeId}`),
				...targets.map(id => `${own}.${id}`)
			]
		},
		subscribe: { allow: subscribe }
	};
}

export interface Identity {
	/** its node ID, also its NATS user */
	name: string;
	role: NatsRole;
	password: string;
	/** its file of TRANSPORTER, NATS_USER, NATS_PASSWORD, NODE_ID, NATS_TLS_CA (mode 0600) */
	file: string;
}

/** The directory of a cluster's identity files. */
export function identitiesDir(dataDir: string): string {
	return path.join(dataDir, "nats");
}

/** `s` as one word of a POSIX shell (the files are sourced). */
function shellWord(s: string): string {
	return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

function readPassword(file: string): string | null {
	if (!fs.existsSync(file)) return null;
	return /^export NATS_PASSWORD=(\S+)$/m.exec(fs.readFileSync(file, "utf8"))?.[1] ?? null;
}

/**
 * The identity of node `name` in `dataDir`: its password made once, at random, and kept with
 * its user and node ID in `<dataDir>/nats/<name>.env` (mode 0600), which is all the process is
 * given (sourced, it joins as that node: `npm run agent`, `npm run repl`). `caFile`: where the
 * process finds the CA certificate that signed nats-server's (NATS_TLS_CA), when it uses TLS.
 */
export function identity(
	dataDir: string,
	name: string,
	role: NatsRole,
	transporter: string,
	caFile?: string
): Identity {
	checkNodeId(name);
	const dir = identitiesDir(dataDir);
	fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
	fs.chmodSync(dir, 0o700);
	const file = path.join(dir, `${name}.env`);
	const password = readPassword(file) ?? randomBytes(18).toString("base64url");
	fs.writeFileSync(
		file,
		[
			`# NATS identity of ${name} (${role}): source this file, then ${
				role === "operator"
					? "`npm run repl`"
					: role === "agent"
						? "`npm run agent`"
						: "`npm start`"
			}`,
			`export TRANSPORTER=${transporter}`,
			`export NATS_USER=${name}`,
			`export NATS_PASSWORD=${password}`,
			`export NODE_ID=${name}`,
			`export NATS_ROLE=${role}`,
			...(caFile ? [`export NATS_TLS_CA=${shellWord(caFile)}`] : []),
			""
		].join("\n"),
		{ mode: 0o600 }
	);
	fs.chmodSync(file, 0o600);
	return { name, role, password, file };
}

/** nats-server's users for `identities`: each with its password and permissions. */
export function natsUsers(identities: Identity[], prefix = MOLECULER_PREFIX): NatsUser[] {
	const trusted = identities.filter(i => i.role !== "agent").map(i => i.name);
	return identities.map(i => ({
		user: i.name,
		password: i.password,
		permissions: natsPermissions(i.role, i.name, trusted, prefix)
	}));
}

/** The identities kept in `dataDir` (made by `npm run cluster` or `npm run nats-identity`). */
export function loadIdentities(dataDir: string): Identity[] {
	const dir = identitiesDir(dataDir);
	if (!fs.existsSync(dir)) return [];
	const found: Identity[] = [];
	for (const entry of fs.readdirSync(dir).sort()) {
		if (!entry.endsWith(".env")) continue;
		const file = path.join(dir, entry);
		const text = fs.readFileSync(file, "utf8");
		const head = /^# NATS identity of (\S+) \((control|agent|operator)\)/m.exec(text);
		const password = readPassword(file);
		if (!head || !password || `${head[1]}.env` !== entry) continue;
		found.push({ name: head[1], role: head[2] as NatsRole, password, file });
	}
	return found;
}

/** nats-server's `authorization` block for `identities` (for a nats-server of one's own). */
export function authorizationBlock(identities: Identity[], prefix = MOLECULER_PREFIX): string {
	return [
		"authorization {",
		"  users: [",
		...natsUsers(identities, prefix).map(u => `    ${JSON.stringify(u)}`),
		"  ]",
		"}"
	].join("\n");
}
