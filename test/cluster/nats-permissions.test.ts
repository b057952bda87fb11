import fs from "fs";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { connect, type NatsConnection, type Subscription } from "nats";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import {
	authorizationBlock,
	identity,
	loadIdentities,
	natsUsers,
	type Identity
} from "../../lib/cluster/nats-identities";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import { startProcess, waitUntil, type ServiceProcess } from "../helpers/process";

/**
 * The NATS identities `npm run cluster` gives its processes (lib/cluster/nats-identities.ts),
 * against a real nats-server with the configuration it writes. The attacker holds an agent's
 * credentials (agent-1) and uses the raw `nats` client; a user without permissions, which the
 * cluster does not have ("spy"), watches what is delivered.
 */

const P = "MOL-scale";

let root: string;
let nats: RunningNatsServer;
let port: number;
const ids = new Map<string, Identity>();
const open: NatsConnection[] = [];
const processes: ServiceProcess[] = [];

function natsLog(): string {
	return fs.readFileSync(path.join(root, "nats-server.log"), "utf8");
}

/** A raw connection as `name`; its asynchronous errors (permission violations) in `errors`. */
async function as(name: string): Promise<{ nc: NatsConnection; errors: string[] }> {
	const nc = await connect({
		servers: `127.0.0.1:${port}`,
		user: name,
		pass: name === "spy" ? "spy" : ids.get(name)!.password,
		reconnect: false
	});
	open.push(nc);
	const errors: string[] = [];
	void (async () => {
		for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.data));
	})();
	return { nc, errors };
}

/** What `sub` receives, as strings. */
function collect(sub: Subscription): string[] {
	const got: string[] = [];
	void (async () => {
		for await (const m of sub) got.push(`${m.subject} ${m.string()}`);
	})();
	return got;
}

/** Whether a subscription of `nc` to `subject` is refused (the server closes it with an error). */
async function subscriptionRefused(nc: NatsConnection, subject: string): Promise<string | null> {
	let refused: string | null = null;
	const sub = nc.subscribe(subject, {
		callback: err => {
			if (err) refused = err.message;
		}
	});
	await nc.flush();
	await waitUntil(async () => refused !== null, 2000, `the subscription to ${subject}`).catch(
		() => undefined
	);
	if (!refused) sub.unsubscribe();
	return refused;
}

/** A Moleculer request packet (protocol 5, JSON) from `sender` for `action`. */
function requestPacket(sender: string, id: string, action: string): string {
	return JSON.stringify({
		ver: "5",
		sender,
		id,
		action,
		params: {},
		meta: {},
		timeout: 5000,
		level: 1,
		tracing: null,
		parentID: null,
		requestID: id,
		caller: null,
		stream: false
	});
}

/** An agent-only process with `nodeId`, joined with the NATS identity `as`. */
function agentProcess(nodeId: string, asName: string): ServiceProcess {
	const workDir = path.join(root, `work-${nodeId}-${asName}`);
	fs.mkdirSync(workDir, { recursive: true });
	const p = startProcess({
		SERVICES: "node-agent",
		NODE_ID: nodeId,
		AGENT_WORK_DIR: workDir,
		TRANSPORTER: `nats://127.0.0.1:${port}`,
		NATS_USER: asName,
		NATS_PASSWORD: ids.get(asName)!.password
	});
	processes.push(p);
	return p;
}

beforeAll(async () => {
	ensureNatsServer();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "nats-permissions-"));
	port = await freePort();
	for (const [name, role] of [
		["control-1", "control"],
		["agent-1", "agent"],
		["agent-2", "agent"],
		["operator", "operator"]
	] as const)
		ids.set(name, identity(root, name, role, `nats://127.0.0.1:${port}`));
	nats = await startNatsServer({
		dir: root,
		port,
		users: [...natsUsers([...ids.values()]), { user: "spy", password: "spy" }],
		logFile: path.join(root, "nats-server.log")
	});
}, 30000);

afterAll(async () => {
	await Promise.all(processes.map(p => p.stop("SIGKILL")));
	await Promise.all(open.map(nc => nc.close().catch(() => undefined)));
	await nats?.stop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe("NATS identities of a cluster", () => {
	it("keeps each identity in a file of its own, the owner's alone", () => {
		const agent = ids.get("agent-1")!;
		expect(fs.statSync(agent.file).mode & 0o777).toBe(0o600);
		expect(fs.statSync(path.dirname(agent.file)).mode & 0o777).toBe(0o700);
		const text = fs.readFileSync(agent.file, "utf8");
		expect(text).toContain("export NATS_USER=agent-1\n");
		expect(text).toContain("export NODE_ID=agent-1\n");
		expect(text).toContain(`export NATS_PASSWORD=${agent.password}\n`);
		expect(text).not.toContain(ids.get("agent-2")!.password);
		// made once: the same password the next time
		expect(identity(root, "agent-1", "agent", "nats://x:1").password).toBe(agent.password);
	});

	it("finds the identities kept in a data directory, each agent allowed to reach the control planes", () => {
		const dir = path.join(root, "another");
		identity(dir, "control-1", "control", "nats://x:1");
		identity(dir, "agent-7", "agent", "nats://x:1");
		const found = loadIdentities(dir);
		expect(found.map(i => `${i.name} ${i.role}`)).toEqual([
			"agent-7 agent",
			"control-1 control"
		]);
		const block = authorizationBlock(found);
		expect(block).toContain('"MOL-scale.*.control.control-1"');
		expect(block).toContain('"MOL-scale.*.agent.agent-7.control-1"');
		expect(() => identity(dir, "a.b", "agent", "nats://x:1")).toThrow(
			/cannot name NATS subjects/
		);
	});

	it("refuses an agent's request to another agent: the target never runs it", async () => {
		const agent2 = agentProcess("agent-2", "agent-2");
		await waitUntil(async () => agent2.output().includes("stop with Ctrl-C"), 30000, "agent-2");
		const spy = await as("spy");
		const answers = collect(spy.nc.subscribe(`${P}.RES.*.*.control-1`));
		const delivered = collect(spy.nc.subscribe(`${P}.REQ.*.*.agent-2`));
		await spy.nc.flush();

		// the attacker, as agent-1, asks agent-2 to run something, as itself and posing as control-1
		const attacker = await as("agent-1");
		for (const subject of [
			`${P}.REQ.agent.agent-1.agent-2`,
			`${P}.REQ.control.control-1.agent-2`
		]) {
			attacker.nc.publish(subject, requestPacket("control-1", "evil-1", "$node.list"));
			await attacker.nc.flush();
			await waitUntil(
				async () =>
					natsLog().includes(`Publish Violation - User "agent-1", Subject "${subject}"`),
				5000,
				`the attacker's permission violation on ${subject}`
			);
		}
		expect(attacker.errors).toContain("PERMISSIONS_VIOLATION");

		// the same packet from control-1's identity reaches agent-2, which answers it
		const control = await as("control-1");
		control.nc.publish(
			`${P}.REQ.control.control-1.agent-2`,
			requestPacket("control-1", "fair-1", "$node.list")
		);
		await control.nc.flush();
		await waitUntil(
			async () => answers.some(a => a.includes('"fair-1"')),
			10000,
			"agent-2's answer to control-1"
		);
		expect(delivered).toHaveLength(1);
		expect(delivered[0]).toContain('"fair-1"');
		expect(answers.join("\n")).not.toContain("evil-1");
		expect(control.errors).toEqual([]);
		// nor a response, an event or discovery to another agent
		for (const subject of [
			`${P}.RES.agent.agent-1.agent-2`,
			`${P}.EVENT.agent.agent-1.agent-2`,
			`${P}.PING.agent.agent-1.agent-2`,
			`${P}.DISCOVER.agent.agent-1.agent-2`,
			`${P}.INFO.agent.agent-1.agent-2`
		]) {
			attacker.nc.publish(subject, requestPacket("control-1", "evil-2", "$node.list"));
			await attacker.nc.flush();
			await waitUntil(
				async () =>
					natsLog().includes(`Publish Violation - User "agent-1", Subject "${subject}"`),
				5000,
				`the violation for ${subject}`
			);
		}
		// an agent may publish to a control plane
		attacker.nc.publish(
			`${P}.REQ.agent.agent-1.control-1`,
			requestPacket("agent-1", "up-1", "x.y")
		);
		await attacker.nc.flush();
		expect(natsLog()).not.toContain(`Subject "${P}.REQ.agent.agent-1.control-1"`);
		await agent2.stop();
	}, 60000);

	it("lets the operator's node (the REPL) and a control plane call an agent, with Moleculer", async () => {
		const agent2 = agentProcess("agent-2", "agent-2");
		await waitUntil(async () => agent2.output().includes("stop with Ctrl-C"), 30000, "agent-2");
		for (const name of ["operator", "control-1"]) {
			const config = loadConfig({
				LOG_LEVEL: "fatal",
				SERVICES: "api",
				NATS_ROLE: ids.get(name)!.role,
				NODE_ID: name,
				TRANSPORTER: `nats://127.0.0.1:${port}`,
				NATS_USER: name,
				NATS_PASSWORD: ids.get(name)!.password
			});
			const broker = new ServiceBroker(brokerOptions(config, null));
			await broker.start();
			try {
				await waitUntil(
					async () => broker.registry.nodes.get("agent-2")?.available === true,
					20000,
					`${name} to see agent-2`
				);
				const health = await broker.call("$node.health", {}, { nodeID: "agent-2" });
				expect(health).toHaveProperty("cpu");
			} finally {
				await broker.stop();
			}
		}
		expect(natsLog()).not.toMatch(/Violation - User "(operator|control-1|agent-2)"/);
		await agent2.stop();
	}, 60000);

	it("refuses an agent's subscription to everything or to another node's subjects", async () => {
		const attacker = await as("agent-1");
		for (const subject of [
			">",
			`${P}.>`,
			`${P}.REQ.*.*.agent-2`,
			`${P}.*.*.*.agent-2`,
			`${P}.RES.*.*.control-1`,
			`${P}.REQ.>`,
			`${P}.EVENT.control.control-1.control-1`,
			// what other agents send: it hears the control planes and the operator only
			`${P}.REQ.*.*.agent-1`,
			`${P}.REQ.agent.*.agent-1`,
			`${P}.HEARTBEAT.*.*`,
			`${P}.INFO.agent.*`,
			`${P}.INFO.agent.agent-2`
		]) {
			expect(await subscriptionRefused(attacker.nc, subject)).toMatch(
				/Permissions Violation for Subscription/
			);
			expect(natsLog()).toContain(
				`Subscription Violation - User "agent-1", Subject "${subject}"`
			);
		}
		// what the control planes and the operator send it and broadcast, and its own ID's INFO
		for (const subject of [
			`${P}.REQ.control.*.agent-1`,
			`${P}.*.operator.*.agent-1`,
			`${P}.HEARTBEAT.control.*`,
			`${P}.INFO.operator.*`,
			`${P}.INFO.agent.agent-1`
		])
			expect(await subscriptionRefused(attacker.nc, subject)).toBeNull();
	}, 60000);

	it("ends a process started with another node's ID at once, saying why", async () => {
		const impostor = agentProcess("agent-2", "agent-1");
		const code = await new Promise<number | null>(resolve => {
			const timer = setTimeout(() => resolve(-1), 20000);
			impostor.proc.once("exit", c => {
				clearTimeout(timer);
				resolve(c);
			});
		});
		expect(code).toBe(2);
		expect(impostor.output()).toMatch(
			/refused node ID agent-2 its subjects .*NODE_ID must be this NATS identity's own/
		);
		expect(impostor.output()).not.toContain(ids.get("agent-1")!.password);
	}, 30000);

	it("gives an identity none of another node's subjects: nothing takes that node's requests", async () => {
		// what a Moleculer node named agent-2 subscribes to, asked with agent-1's credentials
		const impostor = await as("agent-1");
		for (const type of ["REQ", "RES", "EVENT", "INFO", "DISCOVER", "PING", "PONG"])
			expect(await subscriptionRefused(impostor.nc, `${P}.${type}.*.*.agent-2`)).toMatch(
				/Permissions Violation for Subscription/
			);
		const spy = await as("spy");
		const answers = collect(spy.nc.subscribe(`${P}.RES.*.*.control-1`));
		const sent = collect(spy.nc.subscribe(`${P}.REQ.*.*.agent-2`));
		await spy.nc.flush();
		const control = await as("control-1");
		control.nc.publish(
			`${P}.REQ.control.control-1.agent-2`,
			requestPacket("control-1", "to-2", "$node.list")
		);
		await control.nc.flush();
		await waitUntil(async () => sent.length === 1, 5000, "the request on the wire");
		await new Promise(r => setTimeout(r, 1000));
		// agent-2 is not running, and nothing else took its request
		expect(answers).toEqual([]);
	}, 60000);
});
