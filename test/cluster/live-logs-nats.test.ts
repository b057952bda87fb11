import fs from "fs";
import os from "os";
import path from "path";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startServices, type TestApi } from "../helpers/broker";
import { startE2e, until, type E2e } from "../helpers/e2e";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";
import { JOBS_CONTROL_PLANE } from "../helpers/process";

/**
 * Followed logs across NATS, the agent in a broker of its own: when the control plane's last
 * follower of an execution leaves, the agent is told and stops streaming and tailing it (a
 * Moleculer stream's receiver cannot stop its sender); the execution runs on.
 */

const USER = "logs";
const PASSWORD = "logs-secret";

let tdb: TestDatabase;
let server: RunningNatsServer;
let control: E2e;
let agentSvc: TestApi;
let root: string;
let flags: string;

beforeAll(async () => {
	ensureNatsServer();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "live-logs-nats-"));
	flags = path.join(root, "flags");
	fs.mkdirSync(flags, { mode: 0o777 });
	fs.chmodSync(flags, 0o777);
	fs.chmodSync(root, 0o755);
	const port = await freePort();
	server = await startNatsServer({ dir: root, port, user: USER, password: PASSWORD });
	const nats = {
		TRANSPORTER: `nats://127.0.0.1:${port}`,
		NATS_USER: USER,
		NATS_PASSWORD: PASSWORD
	};
	tdb = await createTestDatabase();
	control = await startE2e(
		tdb.url,
		JOBS_CONTROL_PLANE,
		path.join(root, "unused"),
		"control",
		nats
	);
	agentSvc = await startServices("", ["node-agent"], {
		...nats,
		AGENT_WORK_DIR: path.join(root, "agent"),
		AGENT_CPUS: "2",
		AGENT_MEM_MIB: "2048",
		AGENT_DISK_MIB: "1024"
	});
	await until(
		"the agent registered",
		async () => (await control.ok("GET", "/nodes/")).count,
		n => n === 1,
		30000
	);
}, 60000);

afterAll(async () => {
	await agentSvc?.stop();
	await control?.stop();
	await server?.stop();
	await tdb?.drop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

it("tells the agent to stop streaming once the last follower leaves", async () => {
	const type = await control.ok(
		"POST",
		"/job-types/",
		{
			name: "waits",
			version: "1",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				command: "/bin/sh",
				command_arguments: `-c "echo first; while [ ! -e ${flags}/go ]; do sleep 0.05; done; echo second"`
			}
		},
		201
	);
	const job = await control.ok(
		"POST",
		"/queue/new-job/",
		{ job_type_id: type.id, job_data: { input_data: [], output_data: [] } },
		201
	);
	const exeId = job.job_exes[0].id;
	const url = `${control.api}/job-executions/${exeId}/logs/?follow=true`;
	const agent = (agentSvc.broker.getLocalService("node-agent") as any).agent;
	const service = control.broker.getLocalService("job-executions") as any;
	const firstLine = async () => {
		const res = await fetch(url);
		const reader = res.body!.getReader();
		let text = "";
		while (!text.includes("first\n")) {
			const { value, done } = await reader.read();
			if (done) break;
			text += Buffer.from(value).toString();
		}
		return { reader, text };
	};

	const followers = await Promise.all([firstLine(), firstLine()]);
	for (const f of followers) expect(f.text).toBe("first\n");
	expect([service.followers.streams, agent.logStreams, agent.tails.size]).toEqual([1, 1, 1]);
	await followers[0].reader.cancel();
	await until(
		"one follower left",
		async () => service.followers.streams,
		n => n === 1
	);
	expect(agent.logStreams).toBe(1);
	await followers[1].reader.cancel();
	await until(
		"the agent's stream and tail of it gone",
		async () => [service.followers.streams, agent.logStreams, agent.tails.size],
		v => v.every(n => n === 0)
	);
	expect((await control.ok("GET", `/jobs/${job.id}/`)).status).toBe("RUNNING");

	// followed again: a new stream, to the end
	const again = await firstLine();
	expect(agent.logStreams).toBe(1);
	fs.writeFileSync(path.join(flags, "go"), "");
	let text = again.text;
	for (;;) {
		const { value, done } = await again.reader.read();
		if (done) break;
		text += Buffer.from(value).toString();
	}
	expect(text).toBe("first\nsecond\n");
	await until(
		"the ended execution's stream gone",
		async () => [agent.logStreams, agent.tails.size],
		v => v.every(n => n === 0)
	);
}, 60000);
