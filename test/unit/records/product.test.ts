import type { ProducedFile } from "../../../lib/documents/agent-protocol";
import type { JobInterface } from "../../../lib/documents/types";
import {
	canonicalJson,
	checkProducts,
	productRow,
	productUuid,
	type ProducingExe
} from "../../../lib/records/product";

const iface: JobInterface = {
	version: "1.0",
	command: "x",
	command_arguments: "",
	input_data: [],
	output_data: [
		{ name: "one", type: "file", required: true, media_type: "image/png" },
		{ name: "many", type: "files", required: false }
	]
};
const data = {
	version: "1.0",
	input_data: [{ name: "in", file_id: 3 }],
	output_data: [
		{ name: "one", workspace_id: 1 },
		{ name: "many", workspace_id: 2 }
	]
};

function file(extra: Partial<ProducedFile> = {}): ProducedFile {
	return {
		outputName: "one",
		workspaceId: 1,
		filePath: "a/out.png",
		fileName: "out.png",
		mediaType: "",
		size: 10,
		...extra
	};
}

const exe: ProducingExe = {
	jobExeId: 5,
	jobId: 6,
	jobTypeId: 7,
	jobTypeName: "detector",
	jobTypeVersion: "1.0",
	isOperational: true,
	jobData: data,
	iface
};

describe("productUuid", () => {
	it("is 32 hex digits and stable for the same type, data, output and file name", () => {
		const a = productUuid({ name: "t", version: "1" }, data, "one", "f.png");
		expect(a).toMatch(/^[0-9a-f]{32}$/);
		const reordered = {
			output_data: data.output_data,
			input_data: data.input_data,
			version: "1.0"
		};
		expect(productUuid({ name: "t", version: "1" }, reordered, "one", "f.png")).toBe(a);
	});

	it("changes with any of them", () => {
		const a = productUuid({ name: "t", version: "1" }, data, "one", "f.png");
		expect(productUuid({ name: "t", version: "2" }, data, "one", "f.png")).not.toBe(a);
		expect(productUuid({ name: "u", version: "1" }, data, "one", "f.png")).not.toBe(a);
		expect(productUuid({ name: "t", version: "1" }, data, "many", "f.png")).not.toBe(a);
		expect(productUuid({ name: "t", version: "1" }, data, "one", "g.png")).not.toBe(a);
		const other = { ...data, input_data: [{ name: "in", file_id: 4 }] };
		expect(productUuid({ name: "t", version: "1" }, other, "one", "f.png")).not.toBe(a);
	});
});

describe("canonicalJson", () => {
	it("sorts keys at every level and drops undefined", () => {
		expect(canonicalJson({ b: 1, a: [{ d: 2, c: undefined, e: null }] })).toBe(
			'{"a":[{"d":2,"e":null}],"b":1}'
		);
	});
});

describe("productRow", () => {
	it("takes the agent's media type, else the interface's, else the extension's", () => {
		expect(productRow(exe, file({ mediaType: "text/x-custom" })).media_type).toBe(
			"text/x-custom"
		);
		expect(productRow(exe, file()).media_type).toBe("image/png");
		expect(
			productRow(exe, file({ outputName: "many", workspaceId: 2, fileName: "b.csv" }))
				.media_type
		).toBe("text/csv");
	});

	it("fills geometry, center point and meta_data from geo_json; ignores an unreadable one", () => {
		const row = productRow(
			exe,
			file({
				dataStarted: "2020-01-01T00:00:00Z",
				geoJson: {
					type: "Feature",
					properties: { k: "v" },
					geometry: { type: "Point", coordinates: [3, 4] }
				}
			})
		);
		expect(row).toMatchObject({
			geometry: "POINT (3 4)",
			center_point: "POINT (3 4)",
			meta_data: { k: "v" },
			data_started: "2020-01-01T00:00:00Z",
			data_ended: null,
			job_exe_id: 5,
			job_id: 6,
			job_type_id: 7,
			is_operational: true
		});
		const bad = productRow(exe, file({ geoJson: { type: "Nope" } }));
		expect(bad).toMatchObject({ geometry: null, center_point: null, meta_data: {} });
	});
});

describe("checkProducts", () => {
	it("accepts products of the interface's outputs in their workspaces", () => {
		expect(
			checkProducts(iface, data, [
				file(),
				file({ outputName: "many", workspaceId: 2, fileName: "b", filePath: "b" }),
				file({ outputName: "many", workspaceId: 2, fileName: "c", filePath: "c" })
			])
		).toBeNull();
	});

	it("refuses unknown outputs, wrong workspaces, several files for a file output, missing required ones", () => {
		expect(checkProducts(iface, data, [file(), file({ outputName: "other" })])).toMatch(
			/not an output/
		);
		expect(checkProducts(iface, data, [file({ workspaceId: 2 })])).toMatch(/workspace 2/);
		expect(
			checkProducts(iface, data, [file(), file({ fileName: "x", filePath: "x" })])
		).toMatch(/takes one/);
		expect(checkProducts(iface, data, [])).toMatch(/required output "one"/);
	});
});
