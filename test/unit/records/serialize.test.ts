import { fileIdsIn } from "../../../lib/documents/job-data";
import { serializeJobExeBase, type JobExeRow } from "../../../lib/records/job";
import { currentLogUrl } from "../../../lib/records/job-exe";
import { fileUrl, serializeScaleFile, type ScaleFileRow } from "../../../lib/records/scale-file";

const T = new Date("2024-02-03T04:05:06.789Z");

function fileRow(extra: Partial<ScaleFileRow> = {}): ScaleFileRow {
	return {
		id: 5,
		file_type: "SOURCE",
		workspace_id: 2,
		workspace_name: "raw",
		workspace_base_url: "http://h/raw",
		file_name: "a b.png",
		file_path: "dir/a b.png",
		media_type: "image/png",
		file_size: "1234",
		data_type: ["x"],
		is_deleted: false,
		deleted: null,
		uuid: "u",
		data_started: T,
		data_ended: null,
		geometry: null,
		center_point: null,
		meta_data: {},
		countries: [],
		is_parsed: true,
		parsed: T,
		job_type_id: null,
		job_id: null,
		job_exe_id: null,
		is_operational: true,
		has_been_published: false,
		is_published: false,
		published: null,
		unpublished: null,
		is_superseded: false,
		superseded: null,
		created: T,
		last_modified: T,
		...extra
	};
}

describe("file records", () => {
	it("builds the download URL under the workspace's base URL", () => {
		expect(fileUrl(null, "a")).toBeNull();
		expect(fileUrl("http://h/raw", "a/b.png")).toBe("http://h/raw/a/b.png");
		expect(fileUrl("http://h/raw/", "/a/b c.png")).toBe("http://h/raw/a/b%20c.png");
	});

	it("shows a source file with its parse state and a product with its origin", () => {
		const source = serializeScaleFile(fileRow());
		expect(source).toMatchObject({
			id: 5,
			workspace: { id: 2, name: "raw" },
			file_size: 1234,
			url: "http://h/raw/dir/a%20b.png",
			data_started: "2024-02-03T04:05:06.789Z",
			is_parsed: true,
			parsed: "2024-02-03T04:05:06.789Z"
		});
		expect(source).not.toHaveProperty("job");
		const product = serializeScaleFile(
			fileRow({
				file_type: "PRODUCT",
				job_type_id: 1,
				job_id: 2,
				job_exe_id: 3,
				is_published: true,
				published: T
			})
		);
		expect(product).toMatchObject({
			job_type: { id: 1 },
			job: { id: 2 },
			job_exe: { id: 3 },
			is_published: true,
			published: "2024-02-03T04:05:06.789Z",
			unpublished: null
		});
		expect(product).not.toHaveProperty("is_parsed");
	});
});

describe("job and execution helpers", () => {
	it("lists the distinct input file ids of job data", () => {
		expect(
			fileIdsIn({
				input_data: [
					{ name: "a", file_id: 3 },
					{ name: "b", file_ids: [4, 3] },
					{ name: "c", value: "x" }
				]
			})
		).toEqual([3, 4]);
		expect(fileIdsIn(null)).toEqual([]);
	});

	it("shows an execution with its references as ids", () => {
		const row = {
			id: 9,
			job_id: 4,
			node_id: null,
			error_id: 2,
			status: "FAILED",
			command_arguments: null,
			timeout: 60,
			pre_started: null,
			pre_completed: null,
			pre_exit_code: null,
			job_started: T,
			job_completed: T,
			job_exit_code: 1,
			post_started: null,
			post_completed: null,
			post_exit_code: null,
			created: T,
			queued: T,
			started: T,
			ended: T,
			last_modified: T
		} as JobExeRow;
		expect(serializeJobExeBase(row)).toMatchObject({
			id: 9,
			job: { id: 4 },
			node: null,
			error: { id: 2 },
			job_exit_code: 1,
			ended: "2024-02-03T04:05:06.789Z"
		});
	});

	it("points the current log URLs at the logs view while running only", () => {
		expect(currentLogUrl("http://h/api", { id: 3, status: "RUNNING" }, "stdout")).toBe(
			"http://h/api/job-executions/3/logs/?stream=stdout"
		);
		expect(currentLogUrl("http://h/api", { id: 3, status: "COMPLETED" }, "stderr")).toBeNull();
	});
});
