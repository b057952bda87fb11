import type { PlacedExe } from "../../../lib/executions/types";
import { referencedIds, specFor } from "../../../lib/scheduling/dispatch";

const placed: PlacedExe = {
	id: 11,
	job_id: 12,
	timeout: 300,
	node_id: 1,
	agent_id: "agent-1",
	cpus: 2,
	mem: 512,
	disk_total: 100,
	data: {
		version: "1.0",
		input_data: [
			{ name: "word", value: "hello" },
			{ name: "image", file_id: 5 },
			{ name: "images", file_ids: [6, 7, 99] }
		],
		output_data: [{ name: "out", workspace_id: 3 }]
	},
	interface: {
		version: "1.0",
		command: "run",
		command_arguments: "",
		input_data: [],
		output_data: []
	},
	job_type_id: 4,
	name: "detector",
	version: "2.0",
	uses_docker: true,
	docker_image: "img:1",
	docker_privileged: false,
	is_long_running: false,
	is_system: false,
	successors: 0,
	num_exes: 1,
	max_tries: 3,
	is_operational: true,
	error_mapping: null,
	in_recipe: false
};

const file = (id: number) => ({
	id,
	file_name: `f${id}.tif`,
	file_path: `in/f${id}.tif`,
	media_type: "image/tiff",
	file_size: String(id * 100),
	host_path: "/data/raw"
});

describe("referencedIds", () => {
	it("collects the files and workspaces the job data names", () => {
		expect(referencedIds([placed])).toEqual({ fileIds: [5, 6, 7, 99], workspaceIds: [3] });
	});
});

describe("specFor", () => {
	it("builds the agent's ExecutionSpec", () => {
		const spec = specFor(
			placed,
			new Map([5, 6, 7].map(id => [id, file(id)])),
			new Map([[3, { id: 3, host_path: "/data/products" }]])
		);
		expect(spec).toEqual({
			jobExeId: 11,
			jobId: 12,
			jobType: {
				id: 4,
				name: "detector",
				version: "2.0",
				usesDocker: true,
				dockerImage: "img:1",
				dockerPrivileged: false,
				isLongRunning: false
			},
			interface: placed.interface,
			inputs: {
				word: { value: "hello" },
				image: {
					files: [
						{
							fileId: 5,
							hostPath: "/data/raw/in/f5.tif",
							fileName: "f5.tif",
							mediaType: "image/tiff",
							size: 500
						}
					]
				},
				images: {
					files: [6, 7].map(id => ({
						fileId: id,
						hostPath: `/data/raw/in/f${id}.tif`,
						fileName: `f${id}.tif`,
						mediaType: "image/tiff",
						size: id * 100
					}))
				}
			},
			outputWorkspaces: { out: { workspaceId: 3, hostPath: "/data/products" } },
			timeout: 300,
			resources: { cpus: 2, mem: 512, disk: 100 }
		});
	});

	it("gives long-running types no timeout", () => {
		expect(specFor({ ...placed, is_long_running: true }, new Map(), new Map()).timeout).toBe(0);
	});
});
