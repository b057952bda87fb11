import fs from "fs";
import os from "os";
import path from "path";
import { execFileSync, spawnSync } from "child_process";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import { START_SCRIPT, startProcess, waitUntil, type ServiceProcess } from "../helpers/process";

/**
 * NATS security against real nats-servers, beside the password of the trust test: a server that
 * requires a token, and one that requires TLS (a certificate of a CA made here with openssl) and
 * a password. An agent-only process joins each with what `TRANSPORTER` and the NATS_* variables
 * give it, a peer given the same sees it in the cluster; given a wrong token, or TLS without the
 * CA that signed the server's certificate, it ends at once with exit 2, saying why, and prints
 * no secret.
 */

const TOKEN = "tok-9f2c!secret";

let root: string;

beforeAll(() => {
	ensureNatsServer();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "nats-auth-"));
});

afterAll(() => {
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

/** An agent-only process over NATS with `env`; resolves once it is up, else rejects with its output. */
async function agentUp(name: string, env: Record<string, string>): Promise<ServiceProcess> {
	const workDir = path.join(root, name);
	fs.mkdirSync(workDir, { recursive: true });
	const agent = startProcess({
		SERVICES: "node-agent",
		NODE_ID: name,
		AGENT_WORK_DIR: workDir,
		...env
	});
	const deadline = Date.now() + 30000;
	while (!agent.output().includes("stop with Ctrl-C")) {
		if (agent.proc.exitCode !== null || Date.now() > deadline) {
			await agent.stop("SIGKILL");
			throw new Error(`${name} did not start:\n${agent.output()}`);
		}
		await new Promise(r => setTimeout(r, 100));
	}
	return agent;
}

/** A bare peer on the cluster (as anything with the credentials could be): does it see `nodeId`? */
async function peerSees(env: Record<string, string>, nodeId: string): Promise<void> {
	const config = loadConfig({ LOG_LEVEL: "fatal", SERVICES: "api", ...env });
	const peer = new ServiceBroker({ ...brokerOptions(config, null), nodeID: `peer-of-${nodeId}` });
	await peer.start();
	try {
		await waitUntil(
			async () => peer.registry.nodes.get(nodeId)?.available === true,
			20000,
			`the peer to see ${nodeId}`
		);
	} finally {
		await peer.stop();
	}
}

/** An agent-only process that must refuse to start: its exit code and output. */
function refusedStart(env: Record<string, string>) {
	const run = spawnSync(process.execPath, [START_SCRIPT], {
		env: {
			PATH: process.env.PATH ?? "",
			SERVICES: "node-agent",
			AGENT_WORK_DIR: path.join(root, "refused"),
			...env
		},
		encoding: "utf8",
		timeout: 20000
	});
	return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("a nats-server that requires a token", () => {
	let nats: RunningNatsServer;

	beforeAll(async () => {
		nats = await startNatsServer({
			dir: path.join(root, "token"),
			port: await freePort(),
			token: TOKEN
		});
	});

	afterAll(async () => {
		await nats?.stop();
	});

	it("is joined with the token in TRANSPORTER's URL, or in NATS_TOKEN", async () => {
		const inUrl = nats.address.replace("nats://", `nats://${encodeURIComponent(TOKEN)}@`);
		const agent = await agentUp("token-agent", { TRANSPORTER: inUrl });
		try {
			expect(agent.output()).toContain("(a token)");
			expect(agent.output()).not.toContain(TOKEN);
			await peerSees({ TRANSPORTER: nats.address, NATS_TOKEN: TOKEN }, "token-agent");
		} finally {
			await agent.stop();
		}
	}, 60000);

	it("refuses a wrong token at once, with exit 2 and without printing it", () => {
		const run = refusedStart({ TRANSPORTER: nats.address, NATS_TOKEN: "not-the-token" });
		expect(run.status).toBe(2);
		expect(run.output).toMatch(/refused these credentials/);
		expect(run.output).not.toContain("not-the-token");
	});

	it("refuses a process that brings no token", () => {
		const run = refusedStart({ TRANSPORTER: nats.address });
		expect(run.status).toBe(2);
		expect(run.output).toMatch(/refused these credentials/);
	});
});

describe("a nats-server that requires TLS and a password", () => {
	let nats: RunningNatsServer;
	let ca: string;
	const USER = "scale";
	const PASSWORD = "pw-tls-51!x";

	beforeAll(async () => {
		// a CA, and the server's certificate for 127.0.0.1 signed by it
		const dir = path.join(root, "tls");
		fs.mkdirSync(dir);
		const f = (name: string) => path.join(dir, name);
		const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
		openssl(
			"req",
			"-x509",
			"-newkey",
			"rsa:2048",
			"-nodes",
			"-days",
			"1",
			"-subj",
			"/CN=scale test CA",
			"-keyout",
			f("ca.key"),
			"-out",
			f("ca.pem")
		);
		openssl(
			"req",
			"-newkey",
			"rsa:2048",
			"-nodes",
			"-subj",
			"/CN=127.0.0.1",
			"-keyout",
			f("server.key"),
			"-out",
			f("server.csr")
		);
		fs.writeFileSync(f("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
		openssl(
			"x509",
			"-req",
			"-in",
			f("server.csr"),
			"-CA",
			f("ca.pem"),
			"-CAkey",
			f("ca.key"),
			"-CAcreateserial",
			"-days",
			"1",
			"-extfile",
			f("san.ext"),
			"-out",
			f("server.pem")
		);
		ca = f("ca.pem");
		nats = await startNatsServer({
			dir,
			port: await freePort(),
			user: USER,
			password: PASSWORD,
			tls: { certFile: f("server.pem"), keyFile: f("server.key") }
		});
	}, 30000);

	afterAll(async () => {
		await nats?.stop();
	});

	it("is joined over TLS with the CA in NATS_TLS_CA", async () => {
		const env = {
			TRANSPORTER: nats.address.replace("nats://", "tls://"),
			NATS_USER: USER,
			NATS_PASSWORD: PASSWORD,
			NATS_TLS_CA: ca
		};
		const agent = await agentUp("tls-agent", env);
		try {
			expect(agent.output()).toContain(`(user ${USER}, TLS)`);
			expect(agent.output()).not.toContain(PASSWORD);
			await peerSees(env, "tls-agent");
		} finally {
			await agent.stop();
		}
	}, 60000);

	it("refuses at once, with exit 2, a server whose certificate it cannot trust", () => {
		// the system's CAs do not know the test CA
		const run = refusedStart({
			TRANSPORTER: nats.address.replace("nats://", "tls://"),
			NATS_USER: USER,
			NATS_PASSWORD: PASSWORD
		});
		expect(run.status).toBe(2);
		expect(run.output).toMatch(/transporter error: NATS 127\.0\.0\.1:\d+ \(user scale, TLS\)/);
		expect(run.output).not.toContain(PASSWORD);
	});

	it("refuses at once, with exit 2, a process that asks for no TLS", () => {
		const run = refusedStart({
			TRANSPORTER: nats.address,
			NATS_USER: USER,
			NATS_PASSWORD: PASSWORD
		});
		expect(run.status).toBe(2);
		expect(run.output).toMatch(/transporter error/);
	});
});
