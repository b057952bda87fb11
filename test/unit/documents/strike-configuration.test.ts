import { BadRequestError, FieldError } from "../../../lib/errors";
import {
	matchFileName,
	parseStrikeConfiguration,
	workspaceNamesIn
} from "../../../lib/documents/strike-configuration";

function problemOf(fn: () => unknown): { field: string; message: string } {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(FieldError);
		expect((error as BadRequestError).code).toBe(400);
		const field = (error as FieldError).data.field as string;
		return { field, message: (error as Error).message.slice(field.length + 2) };
	}
	throw new Error("expected a FieldError");
}

/**
 * Scale's docs/architecture/strike.rst example, with a host path for the mount and its
 * workspace_path made relative (Scale's own code refuses the absolute "/wrksp/path" of the docs).
 */
function sample(): any {
	return {
		version: "1.0",
		mount: "/data/ingest",
		transfer_suffix: "_tmp",
		files_to_ingest: [
			{
				filename_regex: ".*h5",
				data_types: [],
				workspace_path: "wrksp/path",
				workspace_name: "raw"
			}
		]
	};
}

describe("parseStrikeConfiguration", () => {
	it("accepts Scale's sample with a host path", () => {
		expect(parseStrikeConfiguration(sample())).toEqual({
			version: "1.0",
			mount: "/data/ingest",
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{
					filename_regex: ".*h5",
					data_types: [],
					workspace_path: "wrksp/path",
					workspace_name: "raw"
				}
			]
		});
	});

	it("fills the version and data_types, normalises paths and keeps mount_on", () => {
		const doc = sample();
		delete doc.version;
		delete doc.files_to_ingest[0].data_types;
		doc.mount = "/data//ingest/";
		doc.files_to_ingest[0].workspace_path = "./a//b/../c/";
		expect(parseStrikeConfiguration(doc)).toMatchObject({ mount: "/data/ingest" });
		// with mount_on, mount is the network mount the operator made there: recorded as given
		doc.mount = "host:/my/path";
		doc.mount_on = "/mnt/ingest/";
		expect(parseStrikeConfiguration(doc)).toEqual({
			version: "1.0",
			mount: "host:/my/path",
			mount_on: "/mnt/ingest",
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{
					filename_regex: ".*h5",
					data_types: [],
					workspace_path: "a/c",
					workspace_name: "raw"
				}
			]
		});
	});

	it("does not change the document it is given", () => {
		const doc = sample();
		const before = JSON.stringify(doc);
		parseStrikeConfiguration(doc);
		expect(JSON.stringify(doc)).toBe(before);
	});

	it("requires mount, transfer_suffix and at least one file rule", () => {
		for (const key of ["mount", "transfer_suffix", "files_to_ingest"]) {
			const doc = sample();
			delete doc[key];
			expect(problemOf(() => parseStrikeConfiguration(doc))).toEqual({
				field: `configuration.${key}`,
				message: "is required"
			});
		}
		const empty = sample();
		empty.files_to_ingest = [];
		expect(problemOf(() => parseStrikeConfiguration(empty)).field).toBe(
			"configuration.files_to_ingest"
		);
		const suffix = sample();
		suffix.transfer_suffix = "";
		expect(problemOf(() => parseStrikeConfiguration(suffix)).field).toBe(
			"configuration.transfer_suffix"
		);
	});

	it("requires filename_regex, workspace_path and workspace_name in each rule", () => {
		for (const key of ["filename_regex", "workspace_path", "workspace_name"]) {
			const doc = sample();
			doc.files_to_ingest.push({ ...doc.files_to_ingest[0] });
			delete doc.files_to_ingest[1][key];
			expect(problemOf(() => parseStrikeConfiguration(doc))).toEqual({
				field: `configuration.files_to_ingest[1].${key}`,
				message: "is required"
			});
		}
		const dataTypes = sample();
		dataTypes.files_to_ingest[0].data_types = [""];
		expect(problemOf(() => parseStrikeConfiguration(dataTypes)).field).toBe(
			"configuration.files_to_ingest[0].data_types[0]"
		);
		const extra = sample();
		extra.files_to_ingest[0].media_type = "x";
		expect(problemOf(() => parseStrikeConfiguration(extra))).toEqual({
			field: "configuration.files_to_ingest[0].media_type",
			message: "is not allowed"
		});
	});

	it("refuses an unsupported version and unknown fields", () => {
		const version = sample();
		version.version = "2.0";
		expect(problemOf(() => parseStrikeConfiguration(version))).toEqual({
			field: "configuration.version",
			message: '"2.0" is an unsupported version (supported: 1.0)'
		});
		const extra = sample();
		extra.host = "nfs";
		expect(problemOf(() => parseStrikeConfiguration(extra, "strike.configuration"))).toEqual({
			field: "strike.configuration.host",
			message: "is not allowed"
		});
	});

	it("requires a directory of the host to monitor: mount_on, or else mount", () => {
		const nfs = sample();
		nfs.mount = "host:/my/path";
		expect(problemOf(() => parseStrikeConfiguration(nfs))).toEqual({
			field: "configuration.mount_on",
			message:
				'is required when mount is the network export "host:/my/path": this service mounts nothing, so mount it on the node and give the directory it is mounted on (or set NFS_MOUNT_ROOT where the nodes mount every export, as autofs\'s /net)'
		});
		const relative = sample();
		relative.mount = "data/ingest";
		expect(problemOf(() => parseStrikeConfiguration(relative))).toEqual({
			field: "configuration.mount",
			message: '"data/ingest" must be an absolute path'
		});
		const mountOn = sample();
		mountOn.mount_on = "mnt";
		expect(problemOf(() => parseStrikeConfiguration(mountOn)).field).toBe(
			"configuration.mount_on"
		);
	});

	it("watches an NFS export named without mount_on under the mount root, kept inside it", () => {
		const nfs = sample();
		nfs.mount = "host:/my//path/";
		const mountRoot = "/net";
		expect(
			parseStrikeConfiguration(nfs, "configuration", { nfsMountRoot: mountRoot })
		).toMatchObject({
			mount: "host:/my//path/",
			mount_on: "/net/host/my/path"
		});
		nfs.mount = "host:/../../etc";
		expect(
			parseStrikeConfiguration(nfs, "configuration", { nfsMountRoot: mountRoot }).mount_on
		).toBe("/net/host/etc");
		nfs.mount = "..:/etc";
		expect(
			problemOf(() =>
				parseStrikeConfiguration(nfs, "configuration", { nfsMountRoot: mountRoot })
			)
		).toEqual({
			field: "configuration.mount",
			message: '"..:/etc" does not name a host'
		});
		// a mount_on given wins over the root; a host path is watched as it is
		nfs.mount = "host:/my/path";
		nfs.mount_on = "/mnt/here";
		expect(
			parseStrikeConfiguration(nfs, "configuration", { nfsMountRoot: mountRoot }).mount_on
		).toBe("/mnt/here");
		const local = sample();
		expect(
			parseStrikeConfiguration(local, "configuration", { nfsMountRoot: mountRoot })
		).toEqual(parseStrikeConfiguration(local));
	});

	it("requires workspace paths inside the workspace", () => {
		const absolute = sample();
		absolute.files_to_ingest[0].workspace_path = "/wrksp/path";
		expect(problemOf(() => parseStrikeConfiguration(absolute))).toEqual({
			field: "configuration.files_to_ingest[0].workspace_path",
			message: "may not be an absolute path"
		});
		const escaping = sample();
		escaping.files_to_ingest[0].workspace_path = "a/../../b";
		expect(problemOf(() => parseStrikeConfiguration(escaping))).toEqual({
			field: "configuration.files_to_ingest[0].workspace_path",
			message: '"a/../../b" leads outside the workspace'
		});
	});

	it("refuses a file name pattern that is not a regular expression", () => {
		const doc = sample();
		doc.files_to_ingest.push({
			filename_regex: "*.h5",
			workspace_path: "p",
			workspace_name: "raw"
		});
		const problem = problemOf(() => parseStrikeConfiguration(doc));
		expect(problem.field).toBe("configuration.files_to_ingest[1].filename_regex");
		expect(problem.message).toMatch(/^is not a valid regular expression: /);
	});

	it("refuses text PostgreSQL cannot store", () => {
		const doc = sample();
		doc.transfer_suffix = "_t\u0000";
		expect(problemOf(() => parseStrikeConfiguration(doc)).field).toBe(
			"configuration.transfer_suffix"
		);
	});
});

describe("workspaceNamesIn", () => {
	it("lists each workspace once", () => {
		const doc = sample();
		doc.files_to_ingest.push(
			{ filename_regex: "a", workspace_path: "p", workspace_name: "products" },
			{ filename_regex: "b", workspace_path: "p", workspace_name: "raw" }
		);
		expect(workspaceNamesIn(parseStrikeConfiguration(doc))).toEqual(["raw", "products"]);
	});
});

describe("matchFileName", () => {
	it("takes the first rule matching from the start of the name, as Python's re.match", () => {
		const config = parseStrikeConfiguration({
			mount: "/data",
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{
					filename_regex: "h5",
					workspace_path: "h5",
					workspace_name: "raw",
					data_types: ["h"]
				},
				{ filename_regex: ".*\\.png", workspace_path: "img", workspace_name: "raw" },
				{ filename_regex: ".*", workspace_path: "rest", workspace_name: "other" }
			]
		});
		expect(matchFileName(config, "h5_file")?.workspace_path).toBe("h5");
		expect(matchFileName(config, "file.h5")?.workspace_path).toBe("rest");
		expect(matchFileName(config, "a.png")?.workspace_path).toBe("img");
		expect(matchFileName(config, "a.png")?.workspace_path).toBe("img");
		expect(matchFileName({ files_to_ingest: [config.files_to_ingest[0]] }, "x.h5")).toBeNull();
	});
});
