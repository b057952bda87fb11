import crypto from "crypto";
import fs from "fs";
import http from "http";
import os from "os";
import path from "path";
import { startE2e, until, type E2e } from "../helpers/e2e";
import { createTestDatabase, sqlOn, type TestDatabase } from "../helpers/db";
import { startMoto, type Moto } from "../helpers/moto";
import { headObject, putObject, s3Client } from "../../lib/storage/s3";
import type { S3Place } from "../../lib/documents/s3-broker";

/**
 * S3 workspaces end to end, against a real S3-compatible server (moto's) on this machine: a job
 * whose input is a source file in one s3 workspace and whose product goes to another, the
 * product downloaded back through the API's redirect; a 100 MiB product uploaded in parts with
 * the process's memory bounded; the secret never answered.
 */

const SERVICES = [
	"api",
	"workspaces",
	"job-types",
	"queue",
	"jobs",
	"job-executions",
	"products",
	"files",
	"nodes",
	"scheduler",
	"node-agent"
];

let tdb: TestDatabase;
let moto: Moto;
let e2e: E2e;
let root: string;
const sql = sqlOn(() => tdb.db);
const SECRET = "not-to-be-answered-0123456789";

let rawPlace: S3Place;
let outPlace: S3Place;
let rawId: number;
let outId: number;

async function createBucket(place: S3Place): Promise<void> {
	const { CreateBucketCommand } = await import("@aws-sdk/client-s3");
	await s3Client(place).send(new CreateBucketCommand({ Bucket: place.bucket }));
}

function s3Workspace(name: string, bucket: string) {
	return {
		name,
		json_config: {
			version: "1.0",
			broker: {
				type: "s3",
				bucket_name: bucket,
				credentials: { access_key_id: "AKIDTEST", secret_access_key: SECRET },
				region_name: "us-east-1",
				endpoint_url: moto.endpoint
			}
		}
	};
}

/** GET a URL (no redirect followed): status, headers and the body's bytes. */
function get(
	url: string
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
	return new Promise((resolve, reject) => {
		http.get(url, res => {
			const chunks: Buffer[] = [];
			res.on("data", c => chunks.push(c));
			res.on("end", () =>
				resolve({
					status: res.statusCode!,
					headers: res.headers,
					body: Buffer.concat(chunks)
				})
			);
		}).once("error", reject);
	});
}

function script(name: string, body: string): string {
	const file = path.join(root, name);
	fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
	return file;
}

async function jobType(name: string, command: string, args: string, inputs: unknown[]) {
	return e2e.ok(
		"POST",
		"/job-types/",
		{
			name,
			version: "1.0",
			cpus_required: 0.25,
			mem_required: 64,
			timeout: 120,
			interface: {
				version: "1.0",
				command,
				command_arguments: args,
				input_data: inputs,
				output_data: [{ name: "out", type: "file" }]
			}
		},
		201
	);
}

async function runJob(jobTypeId: number, inputData: unknown[]): Promise<any> {
	const job = await e2e.ok(
		"POST",
		"/queue/new-job/",
		{
			job_type_id: jobTypeId,
			job_data: { input_data: inputData, output_data: [{ name: "out", workspace_id: outId }] }
		},
		201
	);
	return until(
		`job ${job.id} to end`,
		() => e2e.ok("GET", `/jobs/${job.id}/`),
		j => ["COMPLETED", "FAILED", "CANCELED"].includes(j.status),
		120000
	);
}

beforeAll(async () => {
	root = fs.mkdtempSync(path.join(os.tmpdir(), "s3-e2e-"));
	fs.chmodSync(root, 0o755);
	[tdb, moto] = await Promise.all([createTestDatabase(), startMoto()]);
	rawPlace = {
		bucket: "raw",
		endpoint: moto.endpoint,
		credentials: { accessKeyId: "a", secretAccessKey: "b" }
	};
	outPlace = { ...rawPlace, bucket: "products" };
	await Promise.all([createBucket(rawPlace), createBucket(outPlace)]);
	// the agent's AWS chain names no store: what it reaches, it reaches by the specs it is sent
	e2e = await startE2e(tdb.url, SERVICES, path.join(root, "agent"), "s3");
	rawId = (await e2e.ok("POST", "/workspaces/", s3Workspace("raw", "raw"), 201)).id;
	outId = (await e2e.ok("POST", "/workspaces/", s3Workspace("products", "products"), 201)).id;
}, 60000);

afterAll(async () => {
	await e2e?.stop();
	await moto?.stop();
	await tdb?.drop();
	fs.rmSync(root, { recursive: true, force: true });
});

describe("an s3 workspace", () => {
	it("is answered with its secret masked, and keeps it through an edit that gives the mask back", async () => {
		const details = await e2e.ok("GET", `/workspaces/${rawId}/`);
		expect(details.json_config.broker).toEqual({
			type: "s3",
			bucket_name: "raw",
			credentials: { access_key_id: "AKIDTEST", secret_access_key: "********" },
			region_name: "us-east-1",
			endpoint_url: moto.endpoint
		});
		const list = await e2e.call("GET", "/workspaces/");
		expect(list.text).not.toContain(SECRET);
		const edited = await e2e.ok("PATCH", `/workspaces/${rawId}/`, {
			json_config: details.json_config
		});
		expect(JSON.stringify(edited)).not.toContain(SECRET);
		const [stored] = await sql.query(
			"SELECT json_config->'broker'->'credentials'->>'secret_access_key' AS s FROM workspace WHERE id = $1",
			[rawId]
		);
		expect(stored.s).toBe(SECRET);
	});

	it("refuses a bucket name S3 would refuse, naming the field", async () => {
		const res = await e2e.call("POST", "/workspaces/", s3Workspace("bad", "Not_A_Bucket"));
		expect(res.status).toBe(400);
		expect(res.text).toContain("json_config.broker.bucket_name");
	});

	it("stages a source file from S3 and stores the product there, downloaded back byte-identical", async () => {
		const content = crypto.randomBytes(3 * 1024 * 1024 + 17);
		await putObject(rawPlace, "in/2026/scene-1.bin", content);
		const [file] = await sql.query(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, file_size, uuid)
			 VALUES ('SOURCE', $1, 'scene-1.bin', 'in/2026/scene-1.bin', 'application/octet-stream', $2, md5('scene-1.bin'))
			 RETURNING id`,
			[rawId, content.length]
		);
		const copy = script("copy.sh", 'cp "$1" "$2/copy.bin" && echo "ARTIFACT:out:$2/copy.bin"');
		const type = await jobType("s3-copy", copy, "${in} ${job_output_dir}", [
			{ name: "in", type: "file" }
		]);
		const job = await runJob(type.id, [{ name: "in", file_id: file.id }]);
		expect(job.status).toBe("COMPLETED");
		const products = await e2e.ok("GET", `/products/?job_type_id=${type.id}`);
		expect(products.results).toHaveLength(1);
		const product = products.results[0];
		expect(product.workspace.id).toBe(outId);
		expect(product.file_size).toBe(content.length);
		const stored = await headObject(outPlace, `s3-copy/1.0/${job.id}/copy.bin`);
		expect(stored?.size).toBe(content.length);
		// the API answers a presigned link to the object; following it reads the bytes from S3
		const answer = await get(product.url);
		expect(answer.status).toBe(302);
		const link = String(answer.headers.location);
		expect(link.startsWith(`${moto.endpoint}/products/s3-copy/1.0/${job.id}/copy.bin?`)).toBe(
			true
		);
		expect(link).toContain("X-Amz-Signature=");
		expect(link).not.toContain(SECRET);
		const downloaded = await get(link);
		expect(downloaded.status).toBe(200);
		expect(downloaded.body.equals(content)).toBe(true);
	}, 120000);

	it("uploads a 100 MiB product in parts, the process's memory bounded", async () => {
		const make = script(
			"big.sh",
			'head -c 104857600 /dev/urandom > "$1/big.bin" && echo "ARTIFACT:out:$1/big.bin"'
		);
		const type = await jobType("s3-big", make, "${job_output_dir}", []);
		global.gc?.();
		const before = process.memoryUsage().rss;
		let peak = before;
		const sampler = setInterval(() => {
			peak = Math.max(peak, process.memoryUsage().rss);
		}, 10);
		let job: any;
		try {
			job = await runJob(type.id, []);
		} finally {
			clearInterval(sampler);
		}
		expect(job.status).toBe("COMPLETED");
		const key = `s3-big/1.0/${job.id}/big.bin`;
		const stored = await headObject(outPlace, key);
		expect(stored?.size).toBe(104857600);
		// a multipart upload's ETag is the MD5 of its parts' MD5s, then "-" and their count
		expect(stored?.etag).toMatch(/-13$/);
		// never whole in memory: two 8 MiB parts in flight at most, with the SDK's buffers and
		// the garbage not yet collected (~62 MiB for 100 MiB as for 300 MiB in a process alone)
		expect(peak - before).toBeLessThan(100 * 1024 * 1024);
	}, 300000);

	it("reads a partial input through the bucket's host_path mount, and downloads the others", async () => {
		// a directory stands in for the bucket's read-only mount on the nodes (s3fs, goofys):
		// the bucket's objects are written there too
		const mount = path.join(root, "mnt-raw");
		const place = { ...rawPlace, bucket: "mounted" };
		await createBucket(place);
		const workspace = s3Workspace("mounted", "mounted");
		(workspace.json_config.broker as Record<string, unknown>).host_path = mount;
		const wsId = (await e2e.ok("POST", "/workspaces/", workspace, 201)).id;
		const source = async (key: string, content: string, inMount: boolean) => {
			await putObject(place, key, content);
			if (inMount) {
				fs.mkdirSync(path.dirname(path.join(mount, key)), { recursive: true });
				fs.writeFileSync(path.join(mount, key), content);
			}
			const name = path.basename(key);
			const [row] = await sql.query(
				`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, file_size, uuid)
				 VALUES ('SOURCE', $1, $2, $3::text, 'text/plain', $4, md5($3::text)) RETURNING id`,
				[wsId, name, key, content.length]
			);
			return row.id as number;
		};
		const mounted = await source("big/scene-2.txt", "scene two\n", true);
		const unmounted = await source("big/scene-3.txt", "scene three\n", false);
		// the product says how the input reached the job: a link into the mount, or a copy
		const how = script(
			"how.sh",
			'{ if [ -L "$1" ]; then echo "link $(readlink "$1")"; else echo copy; fi; cat "$1"; } > "$2/how.txt" && echo "ARTIFACT:out:$2/how.txt"'
		);
		const partial = await jobType("s3-partial", how, "${in} ${job_output_dir}", [
			{ name: "in", type: "file", partial: true }
		]);
		expect(partial.interface.input_data[0]).toMatchObject({ name: "in", partial: true });
		const whole = await jobType("s3-whole", how, "${in} ${job_output_dir}", [
			{ name: "in", type: "file" }
		]);
		const productOf = async (typeId: number, fileId: number) => {
			const job = await runJob(typeId, [{ name: "in", file_id: fileId }]);
			expect(job.status).toBe("COMPLETED");
			// products filter on their job type, not their job: the latest of the type is this job's
			const [product] = (
				await e2e.ok("GET", `/products/?job_type_id=${typeId}&order=-last_modified`)
			).results;
			expect(product.job.id).toBe(job.id);
			const link = String((await get(product.url)).headers.location);
			return (await get(link)).body.toString();
		};
		expect(await productOf(partial.id, mounted)).toBe(
			`link ${path.join(fs.realpathSync(mount), "big/scene-2.txt")}\nscene two\n`
		);
		// not partial: downloaded, the mount notwithstanding
		expect(await productOf(whole.id, mounted)).toBe("copy\nscene two\n");
		// partial, but not in this node's mount: downloaded
		expect(await productOf(partial.id, unmounted)).toBe("copy\nscene three\n");
		// a property input may not say partial
		const refused = await e2e.call("POST", "/job-types/", {
			name: "bad-partial",
			version: "1.0",
			interface: {
				command: "true",
				command_arguments: "${p}",
				input_data: [{ name: "p", type: "property", partial: true }]
			}
		});
		expect(refused.status).toBe(400);
		expect(refused.body.detail).toMatch(
			/^interface\.input_data\[0\]\.partial: is only allowed on file and files inputs/
		);
	}, 120000);
});
