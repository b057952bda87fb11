import fs from "fs";
import { pipeline } from "stream/promises";
import type { Readable } from "stream";
import type * as S3Sdk from "@aws-sdk/client-s3";
import type { S3Place } from "../documents/s3-broker";

export type { S3Place } from "../documents/s3-broker";

/**
 * Files in S3 (or an S3-compatible store) for s3 workspaces: uploads in parts, streamed from
 * disk; downloads streamed to disk; presigned links; listings. The AWS SDK is loaded at the
 * first use (some 20 MiB of RSS that a process with no s3 workspace never pays), and one client
 * is kept per store and identity.
 */

/** One part of a multipart upload; the upload holds at most QUEUE_SIZE of them at once. */
export const PART_SIZE = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;

let sdk: typeof S3Sdk | null = null;
function s3Sdk(): typeof S3Sdk {
	sdk ??= require("@aws-sdk/client-s3") as typeof S3Sdk;
	return sdk;
}

const clients = new Map<string, S3Sdk.S3Client>();

/** The client for a place (one per endpoint, region and access key). */
export function s3Client(place: S3Place): S3Sdk.S3Client {
	const region =
		place.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1";
	const key = JSON.stringify([
		place.endpoint ?? null,
		region,
		place.credentials?.accessKeyId ?? null,
		place.credentials?.secretAccessKey ?? null
	]);
	let client = clients.get(key);
	if (!client) {
		const custom =
			place.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
		client = new (s3Sdk().S3Client)({
			region,
			...(place.endpoint ? { endpoint: place.endpoint } : {}),
			// S3-compatible stores (MinIO, Ceph, moto) name buckets in the path, not the host
			forcePathStyle: Boolean(custom),
			...(place.credentials ? { credentials: place.credentials } : {})
		});
		clients.set(key, client);
	}
	return client;
}

export interface StoredObject {
	size: number;
	/** S3's ETag without its quotes (an MD5 for a single-part upload, `md5-N` for N parts) */
	etag: string | null;
}

function unquote(etag: string | undefined): string | null {
	return etag ? etag.replace(/^"|"$/g, "") : null;
}

/**
 * Uploads a file to `key`, read as a stream in parts of PART_SIZE (a single PUT when smaller),
 * at most QUEUE_SIZE parts in memory. Answers the size and ETag stored.
 */
export async function uploadFile(place: S3Place, key: string, file: string): Promise<StoredObject> {
	const { Upload } = require("@aws-sdk/lib-storage") as typeof import("@aws-sdk/lib-storage");
	const size = (await fs.promises.stat(file)).size;
	const upload = new Upload({
		client: s3Client(place),
		params: { Bucket: place.bucket, Key: key, Body: fs.createReadStream(file) },
		partSize: PART_SIZE,
		queueSize: QUEUE_SIZE,
		leavePartsOnError: false
	});
	const done = await upload.done();
	return { size, etag: unquote((done as { ETag?: string }).ETag) };
}

/** Uploads a small body (a test's or a bench's object) in one PUT; answers its ETag. */
export async function putObject(
	place: S3Place,
	key: string,
	body: Buffer | string
): Promise<string | null> {
	const { PutObjectCommand } = s3Sdk();
	const answer = await s3Client(place).send(
		new PutObjectCommand({ Bucket: place.bucket, Key: key, Body: body })
	);
	return unquote(answer.ETag);
}

/** Streams the object at `key` into `target` (created or replaced); answers the bytes written. */
export async function downloadToFile(place: S3Place, key: string, target: string): Promise<number> {
	const { GetObjectCommand } = s3Sdk();
	const answer = await s3Client(place).send(
		new GetObjectCommand({ Bucket: place.bucket, Key: key })
	);
	await pipeline(answer.Body as Readable, fs.createWriteStream(target, { flags: "w" }));
	return (await fs.promises.stat(target)).size;
}

/** The object's size and ETag, or null when there is none at `key`. */
export async function headObject(place: S3Place, key: string): Promise<StoredObject | null> {
	const { HeadObjectCommand } = s3Sdk();
	try {
		const head = await s3Client(place).send(
			new HeadObjectCommand({ Bucket: place.bucket, Key: key })
		);
		return { size: Number(head.ContentLength ?? 0), etag: unquote(head.ETag) };
	} catch (error: any) {
		if (error?.$metadata?.httpStatusCode === 404 || error?.name === "NotFound") return null;
		throw error;
	}
}

/** Removes the object at `key` (nothing there is no error). */
export async function deleteObject(place: S3Place, key: string): Promise<void> {
	const { DeleteObjectCommand } = s3Sdk();
	await s3Client(place).send(new DeleteObjectCommand({ Bucket: place.bucket, Key: key }));
}

/** Copies an object within the store (one request, the bytes never pass through here). */
export async function copyObject(
	place: S3Place,
	fromBucket: string,
	fromKey: string,
	toKey: string
): Promise<void> {
	const { CopyObjectCommand } = s3Sdk();
	const source = `${fromBucket}/${fromKey.split("/").map(encodeURIComponent).join("/")}`;
	await s3Client(place).send(
		new CopyObjectCommand({ Bucket: place.bucket, Key: toKey, CopySource: source })
	);
}

/** A link that reads the object for `expiresS` seconds, saying its name and type to the client. */
export async function presignedGet(
	place: S3Place,
	key: string,
	disposition: string,
	mediaType: string,
	expiresS: number
): Promise<string> {
	const { GetObjectCommand } = s3Sdk();
	const { getSignedUrl } =
		require("@aws-sdk/s3-request-presigner") as typeof import("@aws-sdk/s3-request-presigner");
	return getSignedUrl(
		s3Client(place),
		new GetObjectCommand({
			Bucket: place.bucket,
			Key: key,
			ResponseContentDisposition: disposition,
			ResponseContentType: mediaType
		}),
		{ expiresIn: expiresS }
	);
}

export interface ListedObject extends StoredObject {
	key: string;
}

/**
 * The objects under `prefix` in key order, a page of up to 1,000 at a time, starting after
 * `startAfter` (a listing resumed where it stopped).
 */
export async function* listObjects(
	place: S3Place,
	prefix: string,
	startAfter?: string
): AsyncGenerator<ListedObject[]> {
	const { ListObjectsV2Command } = s3Sdk();
	let token: string | undefined;
	do {
		const page = await s3Client(place).send(
			new ListObjectsV2Command({
				Bucket: place.bucket,
				Prefix: prefix || undefined,
				ContinuationToken: token,
				StartAfter: token ? undefined : startAfter
			})
		);
		yield (page.Contents ?? []).map(o => ({
			key: o.Key!,
			size: Number(o.Size ?? 0),
			etag: unquote(o.ETag)
		}));
		token = page.IsTruncated ? page.NextContinuationToken : undefined;
	} while (token);
}
