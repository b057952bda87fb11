import { createdObjects } from "../../../lib/storage/sqs";

/** S3 event notifications as SQS delivers them, read by their fields whatever their version. */

const record = (over: Record<string, any> = {}, object: Record<string, any> = {}) => ({
	eventVersion: "2.1",
	eventName: "ObjectCreated:Put",
	eventTime: "2026-11-28T01:02:03.000Z",
	s3: {
		bucket: { name: "b" },
		object: { key: "dir/a+b%C3%A9.txt", size: 7, eTag: "abc", ...object }
	},
	...over
});

describe("createdObjects", () => {
	it("answers each object created, its key decoded (a space is sent as +)", () => {
		expect(createdObjects(JSON.stringify({ Records: [record()] }))).toEqual([
			{
				bucket: "b",
				key: "dir/a bé.txt",
				size: 7,
				etag: "abc",
				eventTime: "2026-11-28T01:02:03.000Z"
			}
		]);
	});

	it("reads versions it does not know, and records without an eventName, by their fields", () => {
		const body = JSON.stringify({
			Records: [
				record({ eventVersion: "3.0", newField: { x: 1 } }),
				record({ eventName: undefined }, { key: "k2", eTag: '"quoted"' })
			]
		});
		expect(createdObjects(body).map(o => [o.key, o.etag])).toEqual([
			["dir/a bé.txt", "abc"],
			["k2", "quoted"]
		]);
	});

	it("opens an SNS envelope", () => {
		const inner = JSON.stringify({ Records: [record()] });
		expect(
			createdObjects(JSON.stringify({ Type: "Notification", Message: inner }))
		).toHaveLength(1);
	});

	it("names nothing for a test event, a removal, a record without a key, or text that is not JSON", () => {
		expect(
			createdObjects(JSON.stringify({ Service: "Amazon S3", Event: "s3:TestEvent" }))
		).toEqual([]);
		expect(
			createdObjects(
				JSON.stringify({ Records: [record({ eventName: "ObjectRemoved:Delete" })] })
			)
		).toEqual([]);
		expect(
			createdObjects(JSON.stringify({ Records: [record({}, { key: undefined })] }))
		).toEqual([]);
		expect(createdObjects("not json")).toEqual([]);
	});
});
