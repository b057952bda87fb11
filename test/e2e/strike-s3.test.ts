import fs from "fs";
import os from "os";
import path from "path";
import { startE2e, until, type E2e } from "../helpers/e2e";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startMoto, type Moto } from "../helpers/moto";
import { headObject, putObject, s3Client } from "../../lib/storage/s3";
import { SqsQueue } from "../../lib/storage/sqs";
import { runSqsMonitor, type SqsMonitorLink } from "../../lib/ingest/sqs-monitor";
import type { S3Place } from "../../lib/documents/s3-broker";

/**
 * A strike on an S3 bucket (configuration 2.0, monitor `s3`), end to end against moto's S3 and
 * SQS: objects put with the AWS SDK, their object-created notifications sent to the queue by the
 * test (moto's server does not send a bucket's notifications itself), read by the strike's
 * monitor on the agent, each object ingested once.
 */

const SERVICES = [
	"api",
	"workspaces",
	"job-types",
	"queue",
	"jobs",
	"job-executions",
	"sources",
	"ingest",
	"nodes",
	"scheduler",
	"node-agent"
];

let tdb: TestDatabase;
let moto: Moto;
let e2e: E2e;
let root: string;
let landing: S3Place;
let archive: S3Place;
let queue: SqsQueue;
let strikeId: number;
const SECRET = "strike-secret-not-answered";

/** An S3 event notification as AWS sends it (event version 2.1 unless told). */
function notification(key: string, size: number, etag: string, extra: Record<string, any> = {}) {
	return JSON.stringify({
		Records: [
			{
				eventVersion: "2.1",
				eventSource: "aws:s3",
				awsRegion: "us-east-1",
				eventTime: "2026-11-28T01:02:03.000Z",
				eventName: "ObjectCreated:Put",
				s3: {
					s3SchemaVersion: "1.0",
					bucket: { name: "landing", arn: "arn:aws:s3:::landing" },
					object: {
						key: encodeURIComponent(key).replace(/%2F/g, "/").replace(/%20/g, "+"),
						size,
						eTag: etag,
						sequencer: "0055AED6DCD90281E5"
					}
				},
				...extra
			}
		]
	});
}

/** Puts an object and sends its notification; answers its ETag. */
async function arrive(key: string, body: string, extra: Record<string, any> = {}) {
	await putObject(landing, key, body);
	const head = await headObject(landing, key);
	await queue.send(notification(key, Buffer.byteLength(body), head!.etag!, extra));
	return head!.etag!;
}

async function ingestsOf(fileName: string): Promise<any[]> {
	return (await e2e.ok("GET", `/ingests/?file_name=${encodeURIComponent(fileName)}&order=id`))
		.results;
}

/** Waits until the queue holds no message, visible or in a monitor's hands. */
async function drained(): Promise<void> {
	const { GetQueueAttributesCommand, SQSClient } = await import("@aws-sdk/client-sqs");
	const client = new SQSClient({ endpoint: moto.endpoint, region: "us-east-1" });
	const url = await queue.queueUrl();
	await until(
		"the queue to be drained",
		async () =>
			(
				await client.send(
					new GetQueueAttributesCommand({
						QueueUrl: url,
						AttributeNames: [
							"ApproximateNumberOfMessages",
							"ApproximateNumberOfMessagesNotVisible"
						]
					})
				)
			).Attributes,
		a =>
			a?.ApproximateNumberOfMessages === "0" &&
			a?.ApproximateNumberOfMessagesNotVisible === "0",
		30000
	);
	client.destroy();
}

function s3Workspace(name: string) {
	return {
		name,
		json_config: {
			broker: {
				type: "s3",
				bucket_name: name,
				credentials: { access_key_id: "AKIDTEST", secret_access_key: "ws-secret" },
				endpoint_url: moto.endpoint
			}
		}
	};
}

beforeAll(async () => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "strike-s3-"));
	[tdb, moto] = await Promise.all([createTestDatabase(), startMoto()]);
	for (const [k, v] of Object.entries(moto.env)) process.env[k] = v;
	landing = { bucket: "landing", endpoint: moto.endpoint };
	archive = { bucket: "archive", endpoint: moto.endpoint };
	const { CreateBucketCommand } = await import("@aws-sdk/client-s3");
	for (const place of [landing, archive])
		await s3Client(place).send(new CreateBucketCommand({ Bucket: place.bucket }));
	const { CreateQueueCommand, SQSClient } = await import("@aws-sdk/client-sqs");
	const sqs = new SQSClient({ endpoint: moto.endpoint, region: "us-east-1" });
	await sqs.send(new CreateQueueCommand({ QueueName: "landing-events" }));
	sqs.destroy();
	queue = new SqsQueue({ queueName: "landing-events", endpoint: moto.endpoint });
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "strike-s3");
	await e2e.ok("POST", "/workspaces/", s3Workspace("landing"), 201);
	await e2e.ok("POST", "/workspaces/", s3Workspace("archive"), 201);
}, 60000);

afterAll(async () => {
	queue?.destroy();
	await e2e?.stop();
	await moto?.stop();
	await tdb?.drop();
	for (const k of Object.keys(moto?.env ?? {})) delete process.env[k];
	fs.rmSync(root, { recursive: true, force: true });
});

describe("a strike on an S3 bucket", () => {
	it("refuses a 2.0 configuration naming a workspace that is not an s3 one, or a dir-watcher on an s3 workspace", async () => {
		const noWorkspace = await e2e.call("POST", "/strikes/validation/", {
			name: "x",
			configuration: {
				version: "2.0",
				workspace: "nowhere",
				monitor: { type: "s3", sqs_name: "q" },
				files_to_ingest: [{ filename_regex: ".*" }]
			}
		});
		expect(noWorkspace.status).toBe(400);
		expect(noWorkspace.body.detail).toMatch(
			/^configuration\.workspace: "nowhere" is not the name of a workspace/
		);
		const dirWatcher = await e2e.call("POST", "/strikes/validation/", {
			name: "x",
			configuration: {
				version: "2.0",
				workspace: "landing",
				monitor: { type: "dir-watcher", transfer_suffix: "_tmp" },
				files_to_ingest: [{ filename_regex: ".*" }]
			}
		});
		expect(dirWatcher.status).toBe(400);
		expect(dirWatcher.body.detail).toMatch(
			/^configuration\.workspace: the workspace "landing" is not a host workspace/
		);
	});

	it("starts a monitor that reads the queue; its secret is never answered", async () => {
		const created = await e2e.ok(
			"POST",
			"/strikes/",
			{
				name: "landing",
				configuration: {
					version: "2.0",
					workspace: "landing",
					monitor: {
						type: "s3",
						sqs_name: "landing-events",
						credentials: { access_key_id: "AKIDSQS", secret_access_key: SECRET },
						region_name: "us-east-1",
						endpoint_url: moto.endpoint
					},
					files_to_ingest: [
						{ filename_regex: ".*\\.txt$", data_types: ["text"] },
						{
							filename_regex: ".*\\.bin$",
							new_workspace: "archive",
							new_file_path: "bins"
						}
					]
				}
			},
			201
		);
		strikeId = created.id;
		const details = await e2e.ok("GET", `/strikes/${strikeId}/`);
		expect(details.configuration.monitor.credentials).toEqual({
			access_key_id: "AKIDSQS",
			secret_access_key: "********"
		});
		// an edit that gives back what it read keeps the secret
		await e2e.ok("PATCH", `/strikes/${strikeId}/`, { configuration: details.configuration });
		const [stored] = (
			await tdb.db.query(
				"SELECT configuration->'monitor'->'credentials'->>'secret_access_key' AS s FROM strike WHERE id = $1",
				{ bind: [strikeId] }
			)
		)[0] as { s: string }[];
		expect(stored.s).toBe(SECRET);
		await until(
			"the strike's job to run",
			() => e2e.ok("GET", `/jobs/${created.job.id}/`),
			job => job.status === "RUNNING"
		);
	});

	it("ingests an object where it is, once, however often its notification comes", async () => {
		const etag = await arrive("in/2026/a report.txt", "hello");
		const [ingest] = await until(
			"a report.txt to be INGESTED",
			() => ingestsOf("a report.txt"),
			list => list.length > 0 && list[0].status === "INGESTED"
		);
		const source = await e2e.ok("GET", `/sources/${ingest.source_file.id}/`);
		expect(source).toMatchObject({
			file_name: "a report.txt",
			file_size: 5,
			workspace: { name: "landing" },
			data_type: ["text"]
		});
		// the same notification again, as SQS may deliver it, and once more as a redelivery of a
		// message whose monitor died before deleting it
		await queue.send(notification("in/2026/a report.txt", 5, etag));
		await queue.send(notification("in/2026/a report.txt", 5, etag));
		await drained();
		expect(await ingestsOf("a report.txt")).toHaveLength(1);
	});

	it("reads a notification of an event version it does not know by its fields, and moves the object per its rule", async () => {
		await arrive("drop/b.bin", "0123456789", {
			eventVersion: "2.9",
			glacierEventData: { restoreEventData: {} },
			somethingNew: { nested: true }
		});
		const [ingest] = await until(
			"b.bin to be INGESTED",
			() => ingestsOf("b.bin"),
			list => list.length > 0 && list[0].status === "INGESTED"
		);
		const source = await e2e.ok("GET", `/sources/${ingest.source_file.id}/`);
		expect(source).toMatchObject({ workspace: { name: "archive" }, file_size: 10 });
		expect((await headObject(archive, "bins/b.bin"))?.size).toBe(10);
		expect(await headObject(landing, "drop/b.bin")).toBeNull();
	});

	it("ingests a different file under a reused name, and marks the same content a DUPLICATE", async () => {
		await arrive("other/a report.txt", "hello, longer");
		await arrive("again/a report.txt", "hello");
		await drained();
		const list = await ingestsOf("a report.txt");
		expect(list.map(i => i.status).sort()).toEqual(["DUPLICATE", "INGESTED", "INGESTED"]);
		const sources = await e2e.ok("GET", "/sources/?file_name=a%20report.txt");
		expect(sources.results.map((s: any) => s.file_size).sort()).toEqual([13, 5]);
		// the second file's ingest names the first, which its name is shared with
		const first = list.find(i => i.source_file?.file_size === 5);
		const second = list.find(i => i.source_file?.file_size === 13);
		const details = await e2e.ok("GET", `/ingests/${second.id}/`);
		expect(details.shares_name_with).toMatchObject({
			id: first.source_file.id,
			file_name: "a report.txt",
			file_size: 5
		});
		expect((await e2e.ok("GET", `/ingests/${first.id}/`)).shares_name_with).toBeNull();
		// the strike's secret is masked there too
		expect(details.strike.configuration.monitor.credentials.secret_access_key).toBe("********");
		expect(JSON.stringify(details)).not.toContain(SECRET);
	});

	it("records an object once when the monitor's call is made twice (a redelivered message)", async () => {
		const [strikeJob] = (await e2e.ok("GET", "/jobs/?job_type_name=scale-strike")).results;
		const exe = (await e2e.ok("GET", `/job-executions/?job_id=${strikeJob.id}`)).results[0];
		await putObject(landing, "c.txt", "cee");
		const head = await headObject(landing, "c.txt");
		const objects = [{ bucket: "landing", key: "c.txt", size: 3, etag: head!.etag }];
		const call = { strikeId, jobExeId: exe.id, objects };
		const first = await e2e.broker.call("ingest.s3Objects", call);
		const second = await e2e.broker.call("ingest.s3Objects", call);
		expect(first).toEqual({ recorded: 1, events: 1 });
		expect(second).toEqual({ recorded: 0, events: 0 });
		expect(await ingestsOf("c.txt")).toHaveLength(1);
	});

	it("makes no second ingest of a message redelivered after its agent died, and deletes it only once recorded", async () => {
		const { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } =
			await import("@aws-sdk/client-sqs");
		const sqs = new SQSClient({ endpoint: moto.endpoint, region: "us-east-1" });
		// a message received and not deleted comes back after 2 s
		const { QueueUrl } = await sqs.send(
			new CreateQueueCommand({
				QueueName: "redelivered",
				Attributes: { VisibilityTimeout: "2" }
			})
		);
		const place = { queueName: "redelivered", endpoint: moto.endpoint, region: "us-east-1" };
		const redelivered = new SqsQueue(place);
		const inQueue = async () => {
			const a = (
				await sqs.send(
					new GetQueueAttributesCommand({
						QueueUrl,
						AttributeNames: [
							"ApproximateNumberOfMessages",
							"ApproximateNumberOfMessagesNotVisible"
						]
					})
				)
			).Attributes!;
			return (
				Number(a.ApproximateNumberOfMessages) +
				Number(a.ApproximateNumberOfMessagesNotVisible)
			);
		};
		const [strikeJob] = (await e2e.ok("GET", "/jobs/?job_type_name=scale-strike")).results;
		const exe = (await e2e.ok("GET", `/job-executions/?job_id=${strikeJob.id}`)).results[0];
		const task = { strikeId, jobExeId: exe.id };
		/**
		 * A monitor of this agent's, as the strike's runs, that dies at its first call to the
		 * control plane: before the call reaches it, or after it answered and before the monitor
		 * deleted the message (a kill -9 between the two).
		 */
		const dyingMonitor = async (dies: "before recording" | "after recording") => {
			const death = new AbortController();
			const answers: unknown[] = [];
			const link: SqsMonitorLink = {
				call: async (action, params) => {
					if (dies === "after recording")
						answers.push(await e2e.broker.call(action, params));
					death.abort();
					throw new Error(`the agent died ${dies}`);
				},
				info: () => undefined,
				warn: () => undefined
			};
			expect(await runSqsMonitor(task, place, link, death.signal, 100)).toBe(0);
			return answers;
		};
		/** The monitor restarted (or another agent's): runs until the queue is empty. */
		const restartedMonitor = async () => {
			const stop = new AbortController();
			const answers: unknown[] = [];
			const link: SqsMonitorLink = {
				call: async (action, params) => {
					const answer = await e2e.broker.call(action, params);
					answers.push(answer);
					return answer as any;
				},
				info: () => undefined,
				warn: () => undefined
			};
			const running = runSqsMonitor(task, place, link, stop.signal, 100);
			await until("the redelivered message to be deleted", inQueue, n => n === 0, 30000);
			stop.abort();
			expect(await running).toBe(0);
			return answers;
		};
		const arriveIn = async (key: string, body: string) => {
			await putObject(landing, key, body);
			const head = await headObject(landing, key);
			await redelivered.send(notification(key, Buffer.byteLength(body), head!.etag!));
		};

		// died after the ingest was recorded: the message stays, comes back, and is then deleted
		// with nothing recorded again
		await arriveIn("d.txt", "dee");
		expect(await dyingMonitor("after recording")).toEqual([{ recorded: 1, events: 1 }]);
		expect((await ingestsOf("d.txt")).map(i => i.status)).toEqual(["INGESTED"]);
		expect(await inQueue()).toBe(1);
		expect(await restartedMonitor()).toEqual([{ recorded: 0, events: 0 }]);
		expect((await ingestsOf("d.txt")).map(i => i.status)).toEqual(["INGESTED"]);

		// died before it was recorded: the message stays, comes back, and is ingested once
		await arriveIn("e.txt", "eee");
		expect(await dyingMonitor("before recording")).toEqual([]);
		expect(await ingestsOf("e.txt")).toEqual([]);
		expect(await inQueue()).toBe(1);
		expect(await restartedMonitor()).toEqual([{ recorded: 1, events: 1 }]);
		expect((await ingestsOf("e.txt")).map(i => i.status)).toEqual(["INGESTED"]);
		redelivered.destroy();
		sqs.destroy();
	}, 90000);
});
