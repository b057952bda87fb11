import type { ServiceBroker } from "moleculer";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";

/** The nodes resource over real HTTP and PostgreSQL, with agents registering through the protocol. */

const ISO_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const NODE_FIELDS = [
	"agent_id",
	"archived",
	"created",
	"drain_by",
	"draining_since",
	"hostname",
	"id",
	"is_active",
	"is_draining",
	"is_paused",
	"is_paused_errors",
	"last_heartbeat",
	"last_modified",
	"last_offer",
	"pause_reason",
	"port",
	"slave_id"
];

let tdb: TestDatabase;
let app: TestApi;
let api: string;
let broker: ServiceBroker;
let changes: unknown[] = [];
let seq = 0;

async function q<T = Record<string, any>>(sql: string, bind: unknown[] = []): Promise<T[]> {
	try {
		const [rows] = await tdb.db.query(sql, { bind });
		return rows as T[];
	} catch (error: any) {
		throw new Error(`${error.message}: ${sql}`);
	}
}

/** Registers a node whose agent is this broker (so it is connected). */
async function register(
	resources = { cpus: 4, mem: 8192, disk: 100000 },
	agentId = broker.nodeID
): Promise<{ id: number; slaveId: string }> {
	const slaveId = `slave-${++seq}`;
	const { nodeId } = await broker.call<{ nodeId: number }, any>("nodes.register", {
		agentId,
		slaveId,
		hostname: `node${seq}.example.com`,
		port: 5051,
		resources
	});
	return { id: nodeId, slaveId };
}

async function runningExe(nodeId: number, opts: { status?: string; error?: string } = {}) {
	const [type] = await q<{ id: number }>(
		`INSERT INTO job_type (name, version, interface, title) VALUES ($1, '1.0', '{}', 'A Type')
		 RETURNING id`,
		[`nt-${++seq}`]
	);
	const [rev] = await q<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, '{}') RETURNING id`,
		[type.id]
	);
	const [event] = await q<{ id: number }>(
		`INSERT INTO trigger_event (type) VALUES ('USER') RETURNING id`
	);
	const status = opts.status ?? "RUNNING";
	const [job] = await q<{ id: number }>(
		`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
			timeout, max_tries, data)
		 VALUES ($1, $2, $3, $4, 10, 1, 60, 3, '{}') RETURNING id`,
		[type.id, rev.id, event.id, status]
	);
	const [exe] = await q<{ id: number }>(
		`INSERT INTO job_exe (job_id, job_type_id, status, timeout, node_id, agent_id,
			cpus_scheduled, mem_scheduled, disk_in_scheduled, disk_out_scheduled,
			disk_total_scheduled, started, command_arguments, error_id, ended)
		 VALUES ($1, $6, $2::text, 60, $3, $4, 1.5, 512, 10, 20, 30, now(), 'a b',
			(SELECT id FROM error WHERE name = $5), CASE WHEN $2::text = 'RUNNING' THEN NULL ELSE now() END)
		 RETURNING id`,
		[job.id, status, nodeId, broker.nodeID, opts.error ?? null, type.id]
	);
	return { jobId: job.id, exeId: exe.id, typeId: type.id };
}

function expectPlain(reply: { status: number; headers: Headers; text: string }, status: number) {
	expect(reply.status).toBe(status);
	expect(reply.headers.get("content-type")).toMatch(/^text\/plain/);
}

beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "nodes"]);
	api = app.api;
	broker = app.broker;
	broker.createService({
		name: "node-agent",
		actions: { run: () => ({ accepted: true }), cancel: () => ({ found: false }) }
	});
	broker.createService({
		name: "listener",
		events: {
			"nodes.changed"(ctx: any) {
				changes.push(ctx.params);
			}
		}
	});
	await broker.waitForServices(["node-agent", "listener"]);
});

afterAll(async () => {
	await app?.stop();
	await tdb?.drop();
});

beforeEach(() => {
	changes = [];
});

describe("agents register and send heartbeats", () => {
	it("creates a node on registration and updates it when the agent registers again", async () => {
		const { id, slaveId } = await register({ cpus: 2, mem: 1000, disk: 5000 });
		const [row] = await q(`SELECT * FROM node WHERE id = $1`, [id]);
		expect(row).toMatchObject({
			slave_id: slaveId,
			agent_id: broker.nodeID,
			port: 5051,
			cpus_total: 2,
			mem_total: 1000,
			disk_total: 5000,
			is_active: true,
			is_paused: false
		});
		expect(row.last_heartbeat).toBeInstanceOf(Date);
		expect(row.last_offer).toBeInstanceOf(Date);
		const again = await broker.call<{ nodeId: number }, any>("nodes.register", {
			agentId: "another-agent",
			slaveId,
			hostname: "renamed.example.com",
			port: 0,
			resources: { cpus: 8, mem: 2000, disk: 6000 }
		});
		expect(again).toEqual({ nodeId: id });
		const [updated] = await q(`SELECT * FROM node WHERE id = $1`, [id]);
		expect(updated).toMatchObject({
			hostname: "renamed.example.com",
			agent_id: "another-agent",
			cpus_total: 8,
			port: 0
		});
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toContainEqual({ nodeIds: [id] });
	});

	it("renews the lease on a heartbeat and tells the scheduler only about changes", async () => {
		const { id, slaveId } = await register({ cpus: 2, mem: 1000, disk: 5000 });
		await q(`UPDATE node SET last_heartbeat = now() - interval '5 seconds' WHERE id = $1`, [
			id
		]);
		changes = [];
		const beat = (resources: object) =>
			broker.call("nodes.heartbeat", {
				agentId: broker.nodeID,
				slaveId,
				resources,
				running: []
			});
		expect(await beat({ cpus: 2, mem: 1000, disk: 5000 })).toEqual({
			ok: true,
			nodeId: id,
			cancel: []
		});
		const [row] = await q(
			`SELECT last_heartbeat > now() - interval '1 second' AS fresh FROM node WHERE id = $1`,
			[id]
		);
		expect(row.fresh).toBe(true);
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([]);
		await beat({ cpus: 3, mem: 1000, disk: 5000 });
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
		expect((await q(`SELECT cpus_total FROM node WHERE id = $1`, [id]))[0].cpus_total).toBe(3);
		// Out of its lease, a heartbeat brings the node back: the scheduler hears of it.
		changes = [];
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [id]);
		await beat({ cpus: 3, mem: 1000, disk: 5000 });
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
	});

	it("stores the Docker engine an agent reports, its images normalised, written when they change", async () => {
		const slaveId = `slave-${++seq}`;
		const docker = {
			engine: true,
			pull: false,
			privileged: true,
			images: ["busybox:latest", "<none>:<none>", "registry:5000/x/y:1.2", "x/y@sha256:abc"]
		};
		const { nodeId: id } = await broker.call<{ nodeId: number }, any>("nodes.register", {
			agentId: broker.nodeID,
			slaveId,
			hostname: `node${seq}.example.com`,
			port: 5051,
			resources: { cpus: 2, mem: 1000, disk: 5000 },
			docker
		});
		const stored = async () =>
			(
				await q(
					`SELECT docker_engine, docker_pull, docker_privileged, docker_images,
						docker_images_hash, last_modified FROM node WHERE id = $1`,
					[id]
				)
			)[0];
		const first = await stored();
		expect(first).toMatchObject({
			docker_engine: true,
			docker_pull: false,
			docker_privileged: true,
			docker_images: [
				"docker.io/library/busybox:latest",
				"docker.io/x/y@sha256:abc",
				"registry:5000/x/y:1.2"
			]
		});
		expect(first.docker_images_hash).not.toBe("");
		changes = [];
		const beat = (d?: object) =>
			broker.call("nodes.heartbeat", {
				agentId: broker.nodeID,
				slaveId,
				resources: { cpus: 2, mem: 1000, disk: 5000 },
				running: [],
				...(d ? { docker: d } : {})
			});
		// the same images, listed in another order and form: nothing changed
		await beat({ ...docker, images: [...docker.images].reverse().concat("busybox") });
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([]);
		const same = await stored();
		expect(same.docker_images_hash).toBe(first.docker_images_hash);
		expect(same.last_modified).toEqual(first.last_modified);
		// a new image: stored, and the scheduler hears of it
		await beat({ ...docker, images: [...docker.images, "scale-x:1"] });
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
		const more = await stored();
		expect(more.docker_images).toContain("docker.io/library/scale-x:1");
		expect(more.docker_images_hash).not.toBe(first.docker_images_hash);
		// pulling switched on: a change too
		changes = [];
		await beat({ ...docker, pull: true, images: [...docker.images, "scale-x:1"] });
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
		expect((await stored()).docker_pull).toBe(true);
		// an agent that says nothing of Docker has no engine
		changes = [];
		await beat();
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
		expect(await stored()).toMatchObject({
			docker_engine: false,
			docker_pull: false,
			docker_privileged: false,
			docker_images: [],
			docker_images_hash: ""
		});
		// the REST record shows none of it (Scale 3.0's shape)
		const reply = await request("GET", `${api}/nodes/${id}/`);
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body).filter(k => k.startsWith("docker"))).toEqual([]);
	});

	it("refuses a Docker report out of shape or too large", async () => {
		const { slaveId } = await register();
		const beat = (docker: unknown) =>
			broker.call("nodes.heartbeat", {
				agentId: broker.nodeID,
				slaveId,
				resources: { cpus: 1, mem: 1, disk: 1 },
				running: [],
				docker
			});
		const ok = { engine: true, pull: false, privileged: false, images: ["busybox"] };
		await expect(beat(ok)).resolves.toMatchObject({ ok: true });
		for (const bad of [
			{ ...ok, engine: "yes" },
			{ engine: true, pull: false, images: [] },
			{ ...ok, images: "busybox" },
			{ ...ok, images: [""] },
			{ ...ok, images: ["x".repeat(501)] },
			{ ...ok, images: Array.from({ length: 10001 }, (_, i) => `img-${i}`) }
		])
			await expect(beat(bad)).rejects.toMatchObject({ type: "VALIDATION_ERROR" });
		await expect(
			broker.call("nodes.register", {
				agentId: broker.nodeID,
				slaveId,
				hostname: "h",
				resources: { cpus: 1, mem: 1, disk: 1 },
				docker: { ...ok, images: [42] }
			})
		).rejects.toMatchObject({ type: "VALIDATION_ERROR" });
	});

	it("answers the executions the agent holds but must not run, for it to cancel them", async () => {
		const { id, slaveId } = await register();
		const running = await runningExe(id);
		const canceled = await runningExe(id, { status: "CANCELED" });
		const completed = await runningExe(id, { status: "COMPLETED" });
		const failed = await runningExe(id, { status: "FAILED", error: "node-lost" });
		const elsewhere = await runningExe(id);
		await q(`UPDATE job_exe SET agent_id = 'another-agent' WHERE id = $1`, [elsewhere.exeId]);
		const unknown = 987654;
		const answer = await broker.call<any, any>("nodes.heartbeat", {
			agentId: broker.nodeID,
			slaveId,
			resources: { cpus: 4, mem: 8192, disk: 100000 },
			running: [unknown, failed.exeId, running.exeId, canceled.exeId, completed.exeId].concat(
				elsewhere.exeId,
				canceled.exeId
			)
		});
		expect(answer).toEqual({
			ok: true,
			nodeId: id,
			cancel: [canceled.exeId, completed.exeId, failed.exeId, elsewhere.exeId, unknown]
		});
		// nothing is changed: they ended already, or are another agent's
		const rows = await q(`SELECT id, status FROM job_exe WHERE id = ANY($1) ORDER BY id`, [
			[running.exeId, canceled.exeId, completed.exeId, failed.exeId, elsewhere.exeId]
		]);
		expect(rows.map(r => r.status)).toEqual([
			"RUNNING",
			"CANCELED",
			"COMPLETED",
			"FAILED",
			"RUNNING"
		]);
	});

	it("answers NOT_FOUND to a heartbeat of an unknown node, so the agent registers", async () => {
		await expect(
			broker.call("nodes.heartbeat", {
				agentId: broker.nodeID,
				slaveId: "never-registered",
				resources: { cpus: 1, mem: 1, disk: 1 },
				running: []
			})
		).rejects.toMatchObject({ type: "NOT_FOUND", code: 404 });
	});

	it("refuses a registration without the required fields", async () => {
		await expect(
			broker.call("nodes.register", { agentId: "a", slaveId: "b", hostname: "h" })
		).rejects.toMatchObject({ type: "VALIDATION_ERROR" });
	});

	it("forgets the agent of a node when it says goodbye, not when it is only unheard", async () => {
		const { id } = await register(undefined, "leaving-agent");
		changes = [];
		// a heartbeat timeout: it may be restarting, its lease decides (the scheduler)
		broker.broadcastLocal("$node.disconnected", {
			node: { id: "leaving-agent" },
			unexpected: true
		});
		await new Promise(r => setTimeout(r, 300));
		expect((await q(`SELECT agent_id FROM node WHERE id = $1`, [id]))[0].agent_id).toBe(
			"leaving-agent"
		);
		expect(changes).toEqual([]);
		broker.broadcastLocal("$node.disconnected", {
			node: { id: "leaving-agent" },
			unexpected: false
		});
		for (let i = 0; i < 100; i++) {
			const [row] = await q(`SELECT agent_id FROM node WHERE id = $1`, [id]);
			if (row.agent_id === null) break;
			await new Promise(r => setTimeout(r, 20));
		}
		expect((await q(`SELECT agent_id FROM node WHERE id = $1`, [id]))[0].agent_id).toBeNull();
		expect(changes).toContainEqual({ nodeIds: [id] });
	});
});

describe("GET /nodes/", () => {
	it("lists the active nodes in the envelope, with Scale's fields", async () => {
		const { id } = await register();
		const reply = await request("GET", `${api}/nodes/?page_size=1000`);
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body).sort()).toEqual(["count", "next", "previous", "results"]);
		const node = reply.body.results.find((n: any) => n.id === id);
		expect(Object.keys(node).sort()).toEqual(NODE_FIELDS);
		expect(node).toMatchObject({
			port: 5051,
			is_paused: false,
			is_paused_errors: false,
			is_active: true,
			archived: null,
			pause_reason: null
		});
		expect(node.created).toMatch(ISO_MS_Z);
		expect(node.last_offer).toMatch(ISO_MS_Z);
		expect(reply.body.count).toBe(reply.body.results.length);
	});

	it("hides inactive nodes unless include_inactive is true", async () => {
		const { id } = await register();
		let reply = await request("PATCH", `${api}/nodes/${id}/`, { is_active: false });
		expect(reply.status).toBe(201);
		expect(reply.body.archived).toMatch(ISO_MS_Z);
		const ids = async (query: string) =>
			(await request("GET", `${api}/nodes/?page_size=1000${query}`)).body.results.map(
				(n: any) => n.id
			);
		expect(await ids("")).not.toContain(id);
		expect(await ids("&include_inactive=false")).not.toContain(id);
		expect(await ids("&include_inactive=true")).toContain(id);
		expect(await ids("&include_inactive=1")).toContain(id);
		reply = await request("GET", `${api}/nodes/?include_inactive=maybe`);
		expect(reply.status).toBe(400);
		expect(reply.body.detail).toMatch(/^include_inactive:/);
		reply = await request("PATCH", `${api}/nodes/${id}/`, { is_active: true });
		expect(reply.body).toMatchObject({ is_active: true, archived: null });
		expect(await ids("")).toContain(id);
	});

	it("orders by a requested field and pages", async () => {
		await register();
		await register();
		const reply = await request("GET", `${api}/nodes/?order=-hostname&page_size=2`);
		expect(reply.status).toBe(200);
		const names = reply.body.results.map((n: any) => n.hostname);
		expect(names).toEqual([...names].sort().reverse());
		expect(reply.body.next).toMatch(/page=2/);
		const bad = await request("GET", `${api}/nodes/?order=nope`);
		expect(bad.status).toBe(400);
	});
});

describe("GET /nodes/{id}/", () => {
	it("answers details with resources, running executions and disconnected false", async () => {
		const { id } = await register({ cpus: 4, mem: 8192, disk: 100000 });
		const { exeId, jobId, typeId } = await runningExe(id);
		const reply = await request("GET", `${api}/nodes/${id}/`);
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body).sort()).toEqual(
			[...NODE_FIELDS, "disconnected", "job_exes_running", "resources", "state"].sort()
		);
		expect(reply.body.disconnected).toBe(false);
		expect(reply.body.resources).toEqual({
			total: { cpus: 4, mem: 8192, disk: 100000 },
			scheduled: { cpus: 1.5, mem: 512, disk: 30 },
			used: { cpus: 0, mem: 0, disk: 0 }
		});
		expect(reply.body.job_exes_running).toHaveLength(1);
		const exe = reply.body.job_exes_running[0];
		expect(exe).toMatchObject({
			id: exeId,
			status: "RUNNING",
			command_arguments: "a b",
			timeout: 60,
			node: { id },
			error: null,
			cpus_scheduled: 1.5,
			mem_scheduled: 512,
			disk_in_scheduled: 10,
			disk_out_scheduled: 20,
			disk_total_scheduled: 30,
			job: {
				id: jobId,
				status: "RUNNING",
				priority: 10,
				num_exes: 1,
				error: null,
				job_type: { id: typeId, version: "1.0", title: "A Type" }
			}
		});
		expect(exe.started).toMatch(ISO_MS_Z);
	});

	it("rounds its scheduled resources to one decimal, as Scale 3.0 did", async () => {
		const { id } = await register({ cpus: 4, mem: 8192, disk: 100000 });
		const first = await runningExe(id);
		const second = await runningExe(id);
		await q(`UPDATE job_exe SET cpus_scheduled = 0.1, mem_scheduled = 0.1 WHERE id = $1`, [
			first.exeId
		]);
		await q(`UPDATE job_exe SET cpus_scheduled = 0.2, mem_scheduled = 0.2 WHERE id = $1`, [
			second.exeId
		]);
		const reply = await request("GET", `${api}/nodes/${id}/`);
		// summed as floats these are 0.30000000000000004
		expect(reply.body.resources.scheduled).toEqual({ cpus: 0.3, mem: 0.3, disk: 60 });
	});

	it("says disconnected when the agent is not in the cluster or out of its lease", async () => {
		const gone = await register(undefined, "agent-not-here");
		let reply = await request("GET", `${api}/nodes/${gone.id}/`);
		expect(reply.body.disconnected).toBe(true);
		expect(reply.body.resources.scheduled).toEqual({ cpus: 0, mem: 0, disk: 0 });
		const stale = await register();
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [
			stale.id
		]);
		reply = await request("GET", `${api}/nodes/${stale.id}/`);
		expect(reply.body.disconnected).toBe(true);
	});

	it("answers 404 in text/plain for an unknown node", async () => {
		for (const [method, body] of [
			["GET", undefined],
			["PATCH", { is_paused: true }],
			["PUT", { hostname: "h", port: 1, is_paused: false, is_active: true }]
		] as const) {
			const reply = await request(method, `${api}/nodes/999999/`, body);
			expectPlain(reply, 404);
			expect(reply.text).toMatch(/999999/);
		}
	});
});

describe("PUT /nodes/{id}/", () => {
	it("replaces the node and answers 201 with Location and the node", async () => {
		const { id, slaveId } = await register();
		const url = `${api}/nodes/${id}/`;
		const reply = await request("PUT", url, {
			hostname: "replaced.example.com",
			port: 6000,
			is_paused: true,
			is_active: true,
			pause_reason: "disk swap"
		});
		expect(reply.status).toBe(201);
		expect(reply.headers.get("location")).toBe(url);
		expect(Object.keys(reply.body).sort()).toEqual(NODE_FIELDS);
		expect(reply.body).toMatchObject({
			id,
			slave_id: slaveId,
			hostname: "replaced.example.com",
			port: 6000,
			is_paused: true,
			pause_reason: "disk swap",
			is_paused_errors: false
		});
	});

	it("lists missing and unexpected fields in a text/plain 400", async () => {
		const { id } = await register();
		let reply = await request("PUT", `${api}/nodes/${id}/`, { hostname: "h", is_paused: true });
		expectPlain(reply, 400);
		expect(reply.text).toBe("Missing required fields: port, is_active");
		reply = await request("PUT", `${api}/nodes/${id}/`, {
			hostname: "h",
			port: 1,
			is_paused: true,
			is_active: true,
			color: "red",
			size: 3
		});
		expectPlain(reply, 400);
		expect(reply.text).toBe("Unexpected fields: color, size");
		reply = await request("PUT", `${api}/nodes/${id}/`, {
			hostname: "h",
			port: "80",
			is_paused: true,
			is_active: true
		});
		expectPlain(reply, 400);
		expect(reply.text).toMatch(/^port:/);
		const [row] = await q(`SELECT hostname FROM node WHERE id = $1`, [id]);
		expect(row.hostname).not.toBe("h");
	});
});

describe("PATCH /nodes/{id}/", () => {
	it("pauses with a reason, and un-pausing clears the reason and is_paused_errors", async () => {
		const { id } = await register();
		await q(
			`UPDATE node SET is_paused = true, is_paused_errors = true, pause_reason = 'errors'
			 WHERE id = $1`,
			[id]
		);
		const url = `${api}/v3/nodes/${id}/`;
		let reply = await request("PATCH", url, { is_paused: false });
		expect(reply.status).toBe(201);
		expect(reply.headers.get("location")).toBe(url);
		expect(reply.body).toMatchObject({
			is_paused: false,
			is_paused_errors: false,
			pause_reason: null
		});
		reply = await request("PATCH", url, { is_paused: true, pause_reason: "upgrade" });
		expect(reply.body).toMatchObject({ is_paused: true, pause_reason: "upgrade" });
		reply = await request("PATCH", url, { hostname: "other.example.com" });
		expect(reply.body).toMatchObject({
			hostname: "other.example.com",
			is_paused: true,
			pause_reason: "upgrade"
		});
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toContainEqual({ nodeIds: [id] });
	});

	it("refuses no fields and unexpected fields in a text/plain 400", async () => {
		const { id } = await register();
		let reply = await request("PATCH", `${api}/nodes/${id}/`, {});
		expectPlain(reply, 400);
		expect(reply.text).toBe("No fields specified for update.");
		reply = await request("PATCH", `${api}/nodes/${id}/`, { is_paused: true, slave_id: "x" });
		expectPlain(reply, 400);
		expect(reply.text).toBe("Unexpected fields: slave_id");
		reply = await request("PATCH", `${api}/nodes/${id}/`, { is_paused: "yes" });
		expectPlain(reply, 400);
		expect(reply.text).toMatch(/^is_paused:/);
		const [row] = await q(`SELECT is_paused FROM node WHERE id = $1`, [id]);
		expect(row.is_paused).toBe(false);
	});
});

describe("draining", () => {
	const beat = (slaveId: string, draining?: boolean) =>
		broker.call<any, any>("nodes.heartbeat", {
			agentId: broker.nodeID,
			slaveId,
			resources: { cpus: 4, mem: 8192, disk: 100000 },
			running: [],
			...(draining === undefined ? {} : { draining })
		});
	const again = (slaveId: string, draining?: boolean) =>
		broker.call<any, any>("nodes.register", {
			agentId: broker.nodeID,
			slaveId,
			hostname: "again.example.com",
			resources: { cpus: 4, mem: 8192, disk: 100000 },
			...(draining === undefined ? {} : { draining })
		});
	const drainOf = async (id: number) =>
		(await q(`SELECT draining_since, drain_by FROM node WHERE id = $1`, [id]))[0];

	it("drains a node by PATCH is_draining, shows it everywhere and tells its agent, until false", async () => {
		const { id, slaveId } = await register();
		const url = `${api}/nodes/${id}/`;
		let reply = await request("PATCH", url, { is_draining: true });
		expect(reply.status).toBe(201);
		expect(reply.body).toMatchObject({ is_draining: true, drain_by: "user" });
		expect(reply.body.draining_since).toMatch(ISO_MS_Z);
		const since = reply.body.draining_since;
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toContainEqual({ nodeIds: [id] });
		// again: the drain keeps its start
		reply = await request("PATCH", url, { is_draining: true });
		expect(reply.body.draining_since).toBe(since);

		expect((await request("GET", url)).body).toMatchObject({
			is_draining: true,
			draining_since: since,
			drain_by: "user"
		});
		const listed = (await request("GET", `${api}/nodes/?page_size=1000`)).body.results;
		expect(listed.find((n: any) => n.id === id)).toMatchObject({ is_draining: true });
		const status = (await request("GET", `${api}/nodes/status/?page_size=1000`)).body.results;
		expect(status.find((r: any) => r.node.id === id).node).toMatchObject({
			is_draining: true,
			drain_by: "user"
		});
		expect(await beat(slaveId)).toEqual({ ok: true, nodeId: id, cancel: [], drain: true });
		// a user's drain outlasts the agent's restart
		expect(await again(slaveId)).toEqual({ nodeId: id, drain: true });

		reply = await request("PATCH", url, { is_draining: false });
		expect(reply.body).toMatchObject({
			is_draining: false,
			draining_since: null,
			drain_by: null
		});
		expect(await beat(slaveId)).toEqual({ ok: true, nodeId: id, cancel: [] });
		const after = (await request("GET", `${api}/nodes/status/?page_size=1000`)).body.results;
		expect(after.find((r: any) => r.node.id === id).node.is_draining).toBe(false);
	});

	it("refuses an is_draining that is not a boolean with a 400 naming it", async () => {
		const { id } = await register();
		for (const bad of ["yes", 1, null]) {
			const reply = await request("PATCH", `${api}/nodes/${id}/`, { is_draining: bad });
			expectPlain(reply, 400);
			expect(reply.text).toBe("is_draining: must be true or false");
		}
		expect(await drainOf(id)).toEqual({ draining_since: null, drain_by: null });
	});

	it("drains the node of an agent shutting down, until its next registration", async () => {
		const { id, slaveId } = await register();
		changes = [];
		expect(await broker.call("nodes.drain", { agentId: broker.nodeID, slaveId })).toEqual({
			ok: true,
			nodeId: id
		});
		await new Promise(r => setTimeout(r, 20));
		expect(changes).toEqual([{ nodeIds: [id] }]);
		const drained = await drainOf(id);
		expect(drained.drain_by).toBe("agent");
		expect(drained.draining_since).toBeInstanceOf(Date);
		expect(await beat(slaveId, true)).toMatchObject({ drain: true });
		expect(await drainOf(id)).toEqual(drained);
		// registering again while it drains keeps the drain; the next process's registration ends it
		expect(await again(slaveId, true)).toEqual({ nodeId: id, drain: true });
		expect(await again(slaveId)).toEqual({ nodeId: id });
		expect(await drainOf(id)).toEqual({ draining_since: null, drain_by: null });
		// a heartbeat that says it drains drains the node too (a drain call that was lost)
		expect(await beat(slaveId, true)).toMatchObject({ drain: true });
		expect((await drainOf(id)).drain_by).toBe("agent");
		// a user who drains the node too makes the drain theirs
		await request("PATCH", `${api}/nodes/${id}/`, { is_draining: true });
		expect(await again(slaveId)).toEqual({ nodeId: id, drain: true });
		expect((await drainOf(id)).drain_by).toBe("user");
	});

	it("answers NOT_FOUND to a drain of a node not registered", async () => {
		await expect(
			broker.call("nodes.drain", { agentId: broker.nodeID, slaveId: "never-registered" })
		).rejects.toMatchObject({ type: "NOT_FOUND" });
	});
});

describe("GET /nodes/status/", () => {
	it("answers each active node with online state, execution counts and running executions", async () => {
		const { id } = await register();
		const inactive = await register();
		await q(`UPDATE node SET is_active = false WHERE id = $1`, [inactive.id]);
		const offline = await register(undefined, "nobody");
		const running = await runningExe(id);
		await runningExe(id, { status: "COMPLETED" });
		await runningExe(id, { status: "COMPLETED" });
		await runningExe(id, { status: "FAILED", error: "filesystem-io" });
		const reply = await request("GET", `${api}/nodes/status/?page_size=1000`);
		expect(reply.status).toBe(200);
		expect(Object.keys(reply.body).sort()).toEqual(["count", "next", "previous", "results"]);
		const ids = reply.body.results.map((r: any) => r.node.id);
		expect(ids).toContain(id);
		expect(ids).toContain(offline.id);
		expect(ids).not.toContain(inactive.id);
		const entry = reply.body.results.find((r: any) => r.node.id === id);
		expect(Object.keys(entry).sort()).toEqual([
			"is_online",
			"job_exe_counts",
			"job_exes_running",
			"node",
			"resources",
			"state"
		]);
		expect(entry.is_online).toBe(true);
		expect(entry.state).toBe("online");
		expect(Object.keys(entry.resources).sort()).toEqual(["free", "offered"]);
		expect(Object.keys(entry.node).sort()).toEqual(NODE_FIELDS);
		const counts = entry.job_exe_counts.map((c: any) => [c.status, c.count, c.category]);
		expect(counts).toEqual([
			["COMPLETED", 2, null],
			["FAILED", 1, "SYSTEM"],
			["RUNNING", 1, null]
		]);
		for (const c of entry.job_exe_counts) expect(c.most_recent).toMatch(ISO_MS_Z);
		expect(entry.job_exes_running.map((e: any) => e.id)).toEqual([running.exeId]);
		expect(reply.body.results.find((r: any) => r.node.id === offline.id).is_online).toBe(false);

		// A range that ends before the executions counts none of them.
		const old = await request(
			"GET",
			`${api}/nodes/status/?started=2000-01-01T00:00:00Z&ended=2000-01-02T00:00:00Z&page_size=1000`
		);
		expect(old.body.results.find((r: any) => r.node.id === id).job_exe_counts).toEqual([]);
	});

	it("shows at once a change to a running execution, its job (changed with it) or its job type", async () => {
		const { id } = await register();
		const { exeId, jobId, typeId } = await runningExe(id);
		const shown = async () => {
			const reply = await request("GET", `${api}/nodes/status/?page_size=1000`);
			const entry = reply.body.results.find((r: any) => r.node.id === id);
			return entry.job_exes_running.find((e: any) => e.id === exeId);
		};
		const details = async () =>
			(await request("GET", `${api}/nodes/${id}/`)).body.job_exes_running[0];
		expect(await shown()).toMatchObject({ timeout: 60, job: { priority: 10 } });
		expect(await details()).toMatchObject({ id: exeId, timeout: 60 });

		await q(`UPDATE job_exe SET timeout = 90 WHERE id = $1`, [exeId]);
		expect((await shown()).timeout).toBe(90);
		expect((await details()).timeout).toBe(90);
		// While an execution runs, the service changes its job only together with it, in one
		// transaction (node-status.ts, RUNNING_EXE_RECORD): the record follows the execution's row.
		await q(
			`WITH j AS (UPDATE job SET priority = 3 WHERE id = $1)
			 UPDATE job_exe SET last_modified = now() WHERE id = $2`,
			[jobId, exeId]
		);
		expect((await shown()).job.priority).toBe(3);
		expect((await details()).job.priority).toBe(3);
		await q(`UPDATE job_type SET title = 'Renamed' WHERE id = $1`, [typeId]);
		expect((await shown()).job.job_type.title).toBe("Renamed");
		expect((await details()).job.job_type.title).toBe("Renamed");

		await q(`UPDATE job_exe SET status = 'COMPLETED', ended = now() WHERE id = $1`, [exeId]);
		expect(await shown()).toBeUndefined();
		expect((await request("GET", `${api}/nodes/${id}/`)).body.job_exes_running).toEqual([]);
	});

	it("answers the same page again as it was while nothing it shows changes, and never after", async () => {
		const { id } = await register();
		await runningExe(id);
		const url = `${api}/nodes/status/?page_size=1000`;
		const entry = async () => {
			const reply = await request("GET", url);
			return {
				text: reply.text,
				entry: reply.body.results.find((r: any) => r.node.id === id)
			};
		};
		const first = await entry();
		expect((await entry()).text).toBe(first.text);

		// a node's shown column
		await q(`UPDATE node SET hostname = 'renamed.example.com' WHERE id = $1`, [id]);
		expect((await entry()).entry.node.hostname).toBe("renamed.example.com");
		// its pause
		await q(`UPDATE node SET is_paused = true, pause_reason = 'maintenance' WHERE id = $1`, [
			id
		]);
		expect((await entry()).entry.node).toMatchObject({
			is_paused: true,
			pause_reason: "maintenance"
		});
		// its counts: an execution ended in the range
		await runningExe(id, { status: "COMPLETED" });
		const counted = (await entry()).entry;
		expect(counted.job_exe_counts.map((c: any) => [c.status, c.count])).toEqual([
			["COMPLETED", 1],
			["RUNNING", 1]
		]);
		// a new running execution
		const { exeId } = await runningExe(id);
		expect((await entry()).entry.job_exes_running.map((e: any) => e.id)).toContain(exeId);
		// online no more once its lease has run out (nothing in the database changed but time)
		await q(`UPDATE node SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [id]);
		const stale = await entry();
		expect(stale.entry.is_online).toBe(false);
		expect((await entry()).text).toBe(stale.text);
	});

	it("answers broker callers the envelope as an object", async () => {
		const { id } = await register();
		const { exeId } = await runningExe(id);
		const body: any = await broker.call("nodes.status", { page_size: 1000 });
		const entry = body.results.find((r: any) => r.node.id === id);
		expect(entry.job_exes_running.map((e: any) => e.id)).toEqual([exeId]);
	});

	it("pages its entries", async () => {
		await register();
		await register();
		const reply = await request("GET", `${api}/nodes/status/?page_size=1`);
		expect(reply.body.results).toHaveLength(1);
		expect(reply.body.count).toBeGreaterThan(1);
		expect(reply.body.next).toMatch(/page=2/);
		const past = await request("GET", `${api}/nodes/status/?page_size=1&page=1000`);
		expect(past.body.results).toEqual([]);
		expect(past.body.count).toBe(reply.body.count);
	});
});
