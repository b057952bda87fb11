import type * as SqsSdk from "@aws-sdk/client-sqs";
import type { S3Place } from "../documents/s3-broker";

/**
 * The SQS queue an S3 strike reads its bucket's notifications from. The SDK is loaded at the
 * first use, as S3's (lib/storage/s3.ts).
 */

/** A queue by name, where and as whom it is reached (as S3Place, without the bucket). */
export interface SqsPlace {
	queueName: string;
	region?: string;
	/** absent: AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL or AWS */
	endpoint?: string;
	credentials?: S3Place["credentials"];
}

export interface QueueMessage {
	id: string;
	receiptHandle: string;
	body: string;
	/** how many times it was received, this time included (ApproximateReceiveCount) */
	receiveCount: number;
}

let sdk: typeof SqsSdk | null = null;
function sqsSdk(): typeof SqsSdk {
	sdk ??= require("@aws-sdk/client-sqs") as typeof SqsSdk;
	return sdk;
}

/** A queue's client and URL. */
export class SqsQueue {
	private readonly client: SqsSdk.SQSClient;
	private url: string | null = null;

	constructor(private readonly place: SqsPlace) {
		this.client = new (sqsSdk().SQSClient)({
			region:
				place.region ??
				process.env.AWS_REGION ??
				process.env.AWS_DEFAULT_REGION ??
				"us-east-1",
			...(place.endpoint ? { endpoint: place.endpoint } : {}),
			...(place.credentials ? { credentials: place.credentials } : {})
		});
	}

	async queueUrl(): Promise<string> {
		if (!this.url) {
			const { GetQueueUrlCommand } = sqsSdk();
			const answer = await this.client.send(
				new GetQueueUrlCommand({ QueueName: this.place.queueName })
			);
			this.url = answer.QueueUrl!;
		}
		return this.url;
	}

	/** Up to 10 messages, waiting up to `waitS` seconds for the first (long polling). */
	async receive(waitS: number, abortSignal?: AbortSignal): Promise<QueueMessage[]> {
		const { ReceiveMessageCommand } = sqsSdk();
		const answer = await this.client.send(
			new ReceiveMessageCommand({
				QueueUrl: await this.queueUrl(),
				MaxNumberOfMessages: 10,
				WaitTimeSeconds: waitS,
				MessageSystemAttributeNames: ["ApproximateReceiveCount"]
			}),
			{ abortSignal }
		);
		return (answer.Messages ?? []).map(m => ({
			id: m.MessageId!,
			receiptHandle: m.ReceiptHandle!,
			body: m.Body ?? "",
			receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1)
		}));
	}

	/** Deletes messages received (at most 10 a request). */
	async delete(messages: QueueMessage[]): Promise<void> {
		const { DeleteMessageBatchCommand } = sqsSdk();
		for (let i = 0; i < messages.length; i += 10)
			await this.client.send(
				new DeleteMessageBatchCommand({
					QueueUrl: await this.queueUrl(),
					Entries: messages.slice(i, i + 10).map((m, j) => ({
						Id: String(j),
						ReceiptHandle: m.receiptHandle
					}))
				})
			);
	}

	/** Sends a message (what a bucket's notification would send: tests and benches). */
	async send(body: string): Promise<void> {
		const { SendMessageCommand } = sqsSdk();
		await this.client.send(
			new SendMessageCommand({ QueueUrl: await this.queueUrl(), MessageBody: body })
		);
	}

	destroy(): void {
		this.client.destroy();
	}
}

/** An object S3 says was created. */
export interface CreatedObject {
	bucket: string;
	key: string;
	size: number;
	etag: string | null;
	/** ISO-8601: when S3 says it was created */
	eventTime: string | null;
}

/**
 * The objects created that a notification names. Read by its fields, whatever its
 * `eventVersion` (Scale stopped at 2.1, #1450): every record with an `s3.object.key` and an
 * `eventName` that starts with `ObjectCreated` (or none given). An SNS envelope (`Message`) is
 * opened; a test event or a body that is not JSON names none.
 */
export function createdObjects(body: string): CreatedObject[] {
	let doc: any;
	try {
		doc = JSON.parse(body);
	} catch {
		return [];
	}
	if (typeof doc?.Message === "string") return createdObjects(doc.Message);
	const records: any[] = Array.isArray(doc?.Records) ? doc.Records : [];
	const found: CreatedObject[] = [];
	for (const record of records) {
		const name = record?.eventName;
		if (typeof name === "string" && !/^(s3:)?ObjectCreated/.test(name)) continue;
		const bucket = record?.s3?.bucket?.name;
		const key = record?.s3?.object?.key;
		if (typeof bucket !== "string" || typeof key !== "string" || key === "") continue;
		const etag = record.s3.object.eTag ?? record.s3.object.etag;
		found.push({
			bucket,
			// keys are URL-encoded in notifications, a space as "+"
			key: decodeURIComponent(key.replace(/\+/g, " ")),
			size: Number(record.s3.object.size ?? 0),
			etag: typeof etag === "string" ? etag.replace(/^"|"$/g, "") : null,
			eventTime: typeof record.eventTime === "string" ? record.eventTime : null
		});
	}
	return found;
}
