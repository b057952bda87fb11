/**
 * P5-S3, Strike on S3 and Scan ("[7 of 8]"), on the process layout of `npm start` against a
 * throwaway embedded PostgreSQL and moto's S3 and SQS (a Python server on this machine: its
 * speed bounds what is measured here, AWS's would not):
 *   P5   10,000 small files renamed into a watched directory (a 1.0 strike), as bench:ingest's A:
 *        files/s from the first rename to the last INGESTED, rename → INGESTED p50/p99;
 *   S3   10,000 small objects put into a watched bucket (a 2.0 strike with an s3 monitor), each
 *        put followed by its object-created notification sent to the queue (moto does not send
 *        them itself), 16 at a time: files/s from the first put to the last INGESTED, put (with
 *        its notification) → INGESTED p50/p99 (moto takes ~100 requests/s: its pace bounds this);
 *        then 1,000 more (P5S3_BURST) put first and their notifications sent in a burst: the
 *        ingest rate of the queue → service path, notification sent → INGESTED p50/p99;
 *   Scan 10,000 objects (P5S3_SCAN) already in a bucket: a dry run and an ingest, files/s each.
 *
 *   npm run bench:ingest-s3             P5S3_FILES=2000 npm run bench:ingest-s3
 */
import fs from "fs";
import os from "os";
import path from "path";
import { benchDatabase, percentile, postJson, startService, waitForCount } from "./lib/cluster";
import { startMoto } from "../test/helpers/moto";
import { putObject, s3Client } from "../lib/storage/s3";
import type { S3Place } from "../lib/documents/s3-broker";

const FILES = Number(process.env.P5S3_FILES) || 10_000;
/** moto's SQS slows down as its queue grows (2,285 of 10,000 in 17 minutes): a smaller burst */
const BURST = Number(process.env.P5S3_BURST) || 1000;
const SCANNED = Number(process.env.P5S3_SCAN) || 10_000;
const AT_ONCE = 16;

function summary(latencies: number[]): string {
	const sorted = [...latencies].sort((a, b) => a - b);
	return `p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted.at(-1)} ms`;
}

function notification(bucket: string, key: string, size: number, etag: string): string {
	return JSON.stringify({
		Records: [
			{
				eventVersion: "2.1",
				eventSource: "aws:s3",
				eventTime: new Date().toISOString(),
				eventName: "ObjectCreated:Put",
				s3: { bucket: { name: bucket }, object: { key, size, eTag: etag } }
			}
		]
	});
}

async function main() {
	const root = fs.mkdtempSync(path.join(os.tmpdir(), "scale-bench-s3-"));
	fs.chmodSync(root, 0o755);
	const strikeDir = path.join(root, "incoming");
	const staging = path.join(root, "staging");
	const rawDir = path.join(root, "raw");
	for (const dir of [strikeDir, staging, rawDir]) fs.mkdirSync(dir);
	const moto = await startMoto();
	Object.assign(process.env, moto.env);
	const { url, db, stop } = await benchDatabase();
	const service = await startService(url, moto.env);
	const q = async <T>(sql: string, bind: unknown[] = []) =>
		(await db.query(sql, { bind }))[0] as T[];
	const { CreateBucketCommand } = await import("@aws-sdk/client-s3");
	const sqsSdk = await import("@aws-sdk/client-sqs");
	const sqs = new sqsSdk.SQSClient({ endpoint: moto.endpoint, region: "us-east-1" });
	const place = (bucket: string): S3Place => ({ bucket, endpoint: moto.endpoint });
	try {
		for (const bucket of ["landing", "backlog"])
			await s3Client(place(bucket)).send(new CreateBucketCommand({ Bucket: bucket }));
		const { QueueUrl: queueUrl } = await sqs.send(
			new sqsSdk.CreateQueueCommand({ QueueName: "landing-events" })
		);
		await waitForCount(db, "SELECT count(*) AS n FROM node WHERE is_active", 1, 20000);
		await postJson(`${service.api}/workspaces/`, {
			name: "raw",
			json_config: { broker: { type: "host", host_path: rawDir } }
		});
		for (const bucket of ["landing", "backlog"])
			await postJson(`${service.api}/workspaces/`, {
				name: bucket,
				json_config: {
					broker: { type: "s3", bucket_name: bucket, endpoint_url: moto.endpoint }
				}
			});
		await postJson(`${service.api}/strike/create/`, {
			name: "dir",
			configuration: {
				mount: strikeDir,
				transfer_suffix: "_tmp",
				files_to_ingest: [
					{ filename_regex: ".*", workspace_path: "a", workspace_name: "raw" }
				]
			}
		});
		await postJson(`${service.api}/strikes/`, {
			name: "bucket",
			configuration: {
				version: "2.0",
				workspace: "landing",
				monitor: { type: "s3", sqs_name: "landing-events", endpoint_url: moto.endpoint },
				files_to_ingest: [{ filename_regex: ".*" }]
			}
		});
		const send = async (bucket: string, key: string, body: string) => {
			const etag = await putObject(place(bucket), key, body);
			await sqs.send(
				new sqsSdk.SendMessageCommand({
					QueueUrl: queueUrl,
					MessageBody: notification(bucket, key, Buffer.byteLength(body), etag!)
				})
			);
		};
		/** Puts objects AT_ONCE at a time; answers their ETags by key. */
		const putAll = async (bucket: string, keys: string[]) => {
			const etags = new Map<string, string>();
			let i = 0;
			await Promise.all(
				Array.from({ length: AT_ONCE }, async () => {
					while (i < keys.length) {
						const key = keys[i++];
						etags.set(key, (await putObject(place(bucket), key, `object ${key}\n`))!);
					}
				})
			);
			return etags;
		};
		// both monitors are up once a probe each is ingested
		fs.writeFileSync(path.join(strikeDir, "probe-dir"), "probe\n");
		await send("landing", "probe-s3", "probe\n");
		await waitForCount(
			db,
			"SELECT count(*) AS n FROM ingest WHERE status = 'INGESTED' AND file_name LIKE 'probe-%'",
			2,
			60000
		);
		console.log(`both strikes run their monitors; ${FILES} files per phase`);

		const ended = (prefix: string) =>
			q<{ file_name: string; ended: Date }>(
				`SELECT file_name, ingest_ended AS ended FROM ingest
				 WHERE status = 'INGESTED' AND file_name LIKE $1`,
				[`${prefix}-%`]
			);
		const report = async (
			label: string,
			prefix: string,
			at: Map<string, number>,
			started: number,
			n = FILES
		) => {
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM ingest WHERE status = 'INGESTED' AND file_name LIKE '${prefix}-%'`,
				n,
				900000,
				200
			);
			const rows = await ended(prefix);
			const last = Math.max(...rows.map(r => new Date(r.ended).getTime()));
			const latencies = rows.map(r => new Date(r.ended).getTime() - at.get(r.file_name)!);
			console.log(
				`${label}: ${n} ingested at ${(n / ((last - started) / 1000)).toFixed(0)} files/s; → INGESTED ${summary(latencies)}`
			);
		};

		// P5: renames into the watched directory, as fast as this client can
		const names = Array.from(
			{ length: FILES },
			(_, i) => `h-${String(i).padStart(5, "0")}.dat`
		);
		for (const [i, name] of names.entries())
			fs.writeFileSync(path.join(staging, name), `file ${i}\n`);
		const renamed = new Map<string, number>();
		const hostStarted = Date.now();
		for (const name of names) {
			fs.renameSync(path.join(staging, name), path.join(strikeDir, name));
			renamed.set(name, Date.now());
		}
		await report("P5 (host directory)", "h", renamed, hostStarted);

		// P5-S3: puts into the watched bucket, each with its notification, AT_ONCE at a time
		const put = new Map<string, number>();
		const s3Started = Date.now();
		let next = 0;
		await Promise.all(
			Array.from({ length: AT_ONCE }, async () => {
				while (next < FILES) {
					const name = `s-${String(next++).padStart(5, "0")}.dat`;
					await send("landing", `in/${name}`, `object ${name}\n`);
					put.set(name, Date.now());
				}
			})
		);
		console.log(
			`   (${FILES} puts and notifications took ${((Date.now() - s3Started) / 1000).toFixed(1)} s: ${(FILES / ((Date.now() - s3Started) / 1000)).toFixed(0)}/s offered)`
		);
		await report("P5-S3 (watched bucket, puts at moto's pace)", "s", put, s3Started);

		// P5-S3 burst: the objects are there already; their notifications sent 10 a request
		const burstKeys = Array.from(
			{ length: BURST },
			(_, i) => `in/u-${String(i).padStart(5, "0")}.dat`
		);
		const etags = await putAll("landing", burstKeys);
		const notified = new Map<string, number>();
		const burstStarted = Date.now();
		next = 0;
		await Promise.all(
			Array.from({ length: 4 }, async () => {
				while (next < BURST) {
					const keys = burstKeys.slice(next, next + 10);
					next += 10;
					await sqs.send(
						new sqsSdk.SendMessageBatchCommand({
							QueueUrl: queueUrl,
							Entries: keys.map((key, j) => ({
								Id: String(j),
								MessageBody: notification(
									"landing",
									key,
									Buffer.byteLength(`object ${key}\n`),
									etags.get(key)!
								)
							}))
						})
					);
					for (const key of keys) notified.set(path.posix.basename(key), Date.now());
				}
			})
		);
		console.log(
			`   (${BURST} notifications sent in ${((Date.now() - burstStarted) / 1000).toFixed(1)} s)`
		);
		await report(
			"P5-S3 burst (notifications of objects put before)",
			"u",
			notified,
			burstStarted,
			BURST
		);

		// Scan: objects already in a bucket
		await putAll(
			"backlog",
			Array.from(
				{ length: SCANNED },
				(_, i) => `d${i % 10}/k-${String(i).padStart(5, "0")}.dat`
			)
		);
		const scan = await postJson(`${service.api}/scans/`, {
			name: "backlog",
			configuration: {
				workspace: "backlog",
				scanner: { type: "s3" },
				files_to_ingest: [{ filename_regex: ".*\\.dat$" }]
			}
		});
		for (const ingest of [false, true]) {
			await postJson(`${service.api}/scans/${scan.id}/process/`, { ingest });
			await waitForCount(
				db,
				`SELECT count(*) AS n FROM scan WHERE id = ${Number(scan.id)} AND status = 'COMPLETED'`,
				1,
				900000,
				200
			);
			const [row] = await q<{ s: number; files: number }>(
				`SELECT extract(epoch FROM ended - started)::float AS s, file_count::int AS files FROM scan WHERE id = $1`,
				[scan.id]
			);
			console.log(
				`Scan (${ingest ? "ingest" : "dry run"}) of ${row.files} objects: ${(row.files / row.s).toFixed(0)} files/s (${row.s.toFixed(1)} s)`
			);
		}
	} finally {
		sqs.destroy();
		if (service.proc.exitCode === null) await service.stop();
		await stop();
		await moto.stop();
		fs.rmSync(root, { recursive: true, force: true });
	}
}

main().then(
	() => process.exit(0),
	error => {
		console.error(error);
		process.exit(1);
	}
);
