import { parseJobData } from "../../../lib/documents/job-data";
import { parseJobInterface } from "../../../lib/documents/job-interface";
import { checkDataFacts, diskRequired, type DataFacts } from "../../../lib/jobs/prepare-job";

const MIB = 1024 * 1024;

describe("diskRequired", () => {
	it("sums input in whole MiB, rounded up, and computes out = const + mult × in", () => {
		expect(diskRequired(0, 64, 2)).toEqual({ diskIn: 0, diskOut: 64 });
		expect(diskRequired(10 * MIB, 64, 2)).toEqual({ diskIn: 10, diskOut: 84 });
		expect(diskRequired(10 * MIB + 1, 0, 0)).toEqual({ diskIn: 11, diskOut: 0 });
		expect(diskRequired(3 * MIB, 0.5, 1.5)).toEqual({ diskIn: 3, diskOut: 5 });
	});
});

describe("checkDataFacts", () => {
	const iface = parseJobInterface({
		command: "x",
		command_arguments: "",
		input_data: [
			{ name: "image", type: "file", media_types: ["image/png", "image/tiff"] },
			{ name: "any", type: "files", required: false },
			{ name: "p", type: "property", required: false }
		],
		output_data: [{ name: "out", type: "file" }]
	});
	const facts: DataFacts = {
		files: new Map([
			[1, { id: 1, media_type: "image/png", file_size: String(2 * MIB), is_deleted: false }],
			[2, { id: 2, media_type: "text/plain", file_size: 100, is_deleted: false }],
			[3, { id: 3, media_type: "image/png", file_size: 5, is_deleted: true }]
		]),
		workspaces: new Map([
			[10, { id: 10, name: "ws", is_active: true }],
			[11, { id: 11, name: "gone", is_active: false }]
		])
	};
	const check = (doc: Record<string, unknown>) =>
		checkDataFacts(parseJobData(doc, iface), iface, facts, doc);
	const outputs = [{ name: "out", workspace_id: 10 }];

	it("answers the total size of the distinct input files", () => {
		const doc = {
			input_data: [
				{ name: "image", file_id: 1 },
				{ name: "any", file_ids: [2, 1] },
				{ name: "p", value: "v" }
			],
			output_data: outputs
		};
		expect(check(doc)).toBe(2 * MIB + 100);
	});

	it("accepts any media type for an input that lists none", () => {
		const doc = {
			input_data: [
				{ name: "image", file_id: 1 },
				{ name: "any", file_id: 2 }
			],
			output_data: outputs
		};
		expect(check(doc)).toBe(2 * MIB + 100);
	});

	it.each([
		[
			[{ name: "image", file_id: 9 }],
			outputs,
			/^job_data.input_data\[0\].file_id: no file with id 9$/
		],
		[
			[{ name: "image", file_id: 2 }],
			outputs,
			/media type "text\/plain".*accepted: image\/png, image\/tiff/
		],
		[[{ name: "image", file_id: 3 }], outputs, /file 3 is deleted/],
		[
			[
				{ name: "image", file_id: 1 },
				{ name: "any", file_ids: [1, 8] }
			],
			outputs,
			/^job_data.input_data\[1\].file_ids\[1\]: no file with id 8/
		],
		[
			[
				{ name: "image", file_id: 1 },
				{ name: "any", file_id: 8 }
			],
			outputs,
			/^job_data.input_data\[1\].file_id: no file with id 8/
		],
		[
			[{ name: "image", file_id: 1 }],
			[{ name: "out", workspace_id: 12 }],
			/^job_data.output_data\[0\].workspace_id: no workspace with id 12/
		],
		[
			[{ name: "image", file_id: 1 }],
			[{ name: "out", workspace_id: 11 }],
			/workspace "gone" \(id 11\) is not active/
		]
	])("refuses %j / %j", (inputs, outs, message) => {
		expect(() => check({ input_data: inputs, output_data: outs })).toThrow(message);
	});
});
