import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startE2e, until, type E2e, JOB_SERVICES } from "../helpers/e2e";

/**
 * Following a running execution's logs (`GET /job-executions/{id}/logs/?follow=true`): bytes
 * arrive while the job runs, the stream ends with the execution, and any number of followers
 * of one execution cost one stream from its agent.
 */

const SERVICES = JOB_SERVICES;

let tdb: TestDatabase;
let e2e: E2e;
let root: string;
let flags: string;
let jobTypeId: number;

beforeAll(async () => {
	tdb = await createTestDatabase();
	root = fs.mkdtempSync(path.join(os.tmpdir(), "live-logs-"));
	flags = path.join(root, "flags");
	fs.mkdirSync(flags, { mode: 0o777 });
	fs.chmodSync(flags, 0o777);
	fs.chmodSync(root, 0o755);
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "logs");
	// prints a line, waits for its flag file, prints another (and one to stderr), ends
	const body = await e2e.ok(
		"POST",
		"/job-types/",
		{
			name: "waits-for-flag",
			version: "1",
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				command: "/bin/sh",
				command_arguments: `-c "echo first; while [ ! -e ${flags}/\${flag} ]; do sleep 0.05; done; echo second; echo oops >&2"`,
				input_data: [{ name: "flag", type: "property" }]
			}
		},
		201
	);
	jobTypeId = body.id;
}, 30000);

afterAll(async () => {
	await e2e?.stop();
	await tdb?.drop();
	if (root) fs.rmSync(root, { recursive: true, force: true });
});

/** Queues a job waiting for `flag`; answers its job and execution ids once it runs. */
async function runningJob(flag: string): Promise<{ jobId: number; exeId: number }> {
	const job = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{
			job_type_id: jobTypeId,
			job_data: { input_data: [{ name: "flag", value: flag }], output_data: [] }
		},
		201
	);
	const running = await until(
		`job ${job.id} RUNNING`,
		async () => await e2e.ok("GET", `/jobs/${job.id}/`),
		j => j.status === "RUNNING"
	);
	return { jobId: job.id, exeId: running.job_exes[0].id };
}

/** Reads a streamed body until `until` holds of what came so far. */
async function readUntil(
	reader: ReadableStreamDefaultReader<Uint8Array>,
	sofar: { text: string },
	done: (text: string) => boolean
): Promise<boolean> {
	const decoder = new TextDecoder();
	while (!done(sofar.text)) {
		const { value, done: ended } = await reader.read();
		if (ended) return false;
		sofar.text += decoder.decode(value, { stream: true });
	}
	return true;
}

it("streams the output as written, while the job runs, and ends with the execution", async () => {
	const { jobId, exeId } = await runningJob("a");
	const res = await fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true`);
	expect(res.status).toBe(200);
	expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
	const reader = res.body!.getReader();
	const got = { text: "" };
	expect(await readUntil(reader, got, t => t.includes("first\n"))).toBe(true);
	// the first line came while the job still runs (it waits for the flag)
	expect((await e2e.ok("GET", `/jobs/${jobId}/`)).status).toBe("RUNNING");
	expect(got.text).not.toContain("second");
	fs.writeFileSync(path.join(flags, "a"), "");
	// read to the end: the stream ends by itself once the execution ends
	expect(await readUntil(reader, got, () => false)).toBe(false);
	expect(got.text).toBe("first\nsecond\noops\n");
	const ended = await until(
		`job ${jobId} COMPLETED`,
		async () => (await e2e.ok("GET", `/jobs/${jobId}/`)).status,
		s => s === "COMPLETED"
	);
	expect(ended).toBe("COMPLETED");
	// after the end: the stored logs, at once, as text
	const after = await fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true&stream=stdout`);
	expect(await after.text()).toBe("first\nsecond\n");
});

it("gives many followers of one execution one stream from its agent, each everything in order", async () => {
	const { exeId } = await runningJob("b");
	const followers = await Promise.all(
		Array.from({ length: 5 }, () =>
			fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true&stream=stdout`)
		)
	);
	const readers = followers.map(f => ({ reader: f.body!.getReader(), got: { text: "" } }));
	for (const r of readers)
		expect(await readUntil(r.reader, r.got, t => t.includes("first\n"))).toBe(true);
	const service = e2e.broker.getLocalService("job-executions") as any;
	expect(service.followers.streams).toBe(1);
	const agent = e2e.broker.getLocalService("node-agent") as any;
	expect(agent.agent.tails.size).toBe(1);
	expect(agent.agent.tails.get(exeId).followerCount).toBe(1);
	fs.writeFileSync(path.join(flags, "b"), "");
	for (const r of readers) {
		expect(await readUntil(r.reader, r.got, () => false)).toBe(false);
		expect(r.got.text).toBe("first\nsecond\n");
	}
	expect(service.followers.streams).toBe(0);
});

it("answers the last lines with tail", async () => {
	const { exeId } = await runningJob("c");
	// RUNNING is recorded before the process starts: "first" must be written before the follow
	await until(
		"first written",
		async () => (await fetch(`${e2e.api}/job-executions/${exeId}/logs/?stream=stdout`)).text(),
		t => t === "first\n"
	);
	const res = await fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true&tail=0`);
	const reader = res.body!.getReader();
	fs.writeFileSync(path.join(flags, "c"), "");
	const got = { text: "" };
	await readUntil(reader, got, () => false);
	expect(got.text).toBe("second\noops\n");
	const text = await (
		await fetch(`${e2e.api}/job-executions/${exeId}/logs/?tail=1&stream=stdout`)
	).text();
	expect(text).toBe("second\n");
});

describe("an execution followed before it runs", () => {
	const pause = (paused: boolean) => e2e.ok("PATCH", "/scheduler/", { is_paused: paused });
	const queueJob = async (flag: string) => {
		const job = await e2e.ok(
			"POST",
			"/queue/new-job/",
			{
				job_type_id: jobTypeId,
				job_data: { input_data: [{ name: "flag", value: flag }], output_data: [] }
			},
			201
		);
		return { jobId: job.id as number, exeId: job.job_exes[0].id as number };
	};
	afterEach(() => pause(false));

	it("waits while it is QUEUED, streams once it runs, and ends with it", async () => {
		await pause(true);
		const { jobId, exeId } = await queueJob("d");
		const res = await fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true`);
		expect(res.status).toBe(200);
		const reader = res.body!.getReader();
		const service = e2e.broker.getLocalService("job-executions") as any;
		// waiting: no agent stream yet, one read of the execution per poll for all its followers
		expect(service.followers.followed).toBe(1);
		expect(service.followers.streams).toBe(0);
		expect(service.waits.waiting).toBe(1);
		expect((await e2e.ok("GET", `/jobs/${jobId}/`)).status).toBe("QUEUED");
		await pause(false);
		const got = { text: "" };
		expect(await readUntil(reader, got, t => t.includes("first\n"))).toBe(true);
		expect(service.waits.waiting).toBe(0);
		fs.writeFileSync(path.join(flags, "d"), "");
		expect(await readUntil(reader, got, () => false)).toBe(false);
		expect(got.text).toBe("first\nsecond\noops\n");
		expect(service.followers.followed).toBe(0);
	});

	it("ends, empty, when it is canceled before it ran", async () => {
		await pause(true);
		const { jobId, exeId } = await queueJob("e");
		const res = await fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true`);
		const reader = res.body!.getReader();
		await e2e.ok("PATCH", `/jobs/${jobId}/`, { status: "CANCELED" });
		const got = { text: "" };
		expect(await readUntil(reader, got, () => false)).toBe(false);
		expect(got.text).toBe("");
		const service = e2e.broker.getLocalService("job-executions") as any;
		expect([service.followers.followed, service.waits.waiting]).toEqual([0, 0]);
	});

	it("stops waiting when its last follower leaves", async () => {
		await pause(true);
		const { jobId, exeId } = await queueJob("f");
		const followers = await Promise.all(
			[1, 2].map(() => fetch(`${e2e.api}/job-executions/${exeId}/logs/?follow=true`))
		);
		const service = e2e.broker.getLocalService("job-executions") as any;
		expect([service.followers.followed, service.waits.waiting]).toEqual([1, 1]);
		await followers[0].body!.cancel();
		await until(
			"the first follower gone",
			async () => service.followers.followed,
			n => n === 1
		);
		await followers[1].body!.cancel();
		await until(
			"no follower left",
			async () => [service.followers.followed, service.waits.waiting],
			v => v[0] === 0 && v[1] === 0
		);
		await e2e.ok("PATCH", `/jobs/${jobId}/`, { status: "CANCELED" });
	});
});
