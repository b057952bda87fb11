import fs from "fs";
import os from "os";
import path from "path";
import { BadRequestError } from "../../lib/errors";
import {
	checkWorkspaceConfig,
	parseWorkspaceConfig,
	validateBroker
} from "../../lib/documents/workspace-config";
import { validateHostBroker } from "../../lib/documents/host-broker";
import { textProblem } from "../../lib/validation/schema";

let dir: string;
let file: string;

beforeAll(() => {
	dir = fs.mkdtempSync(path.join(os.tmpdir(), "ws-config-"));
	file = path.join(dir, "plain-file");
	fs.writeFileSync(file, "not a directory");
	fs.mkdirSync(path.join(dir, "sub"));
});

afterAll(() => {
	fs.rmSync(dir, { recursive: true, force: true });
});

/** The message of the error `fn` throws, after checking it is a 400. */
function problemOf(fn: () => unknown): string {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(BadRequestError);
		expect((error as BadRequestError).code).toBe(400);
		return (error as Error).message;
	}
	throw new Error("expected a BadRequestError");
}

async function asyncProblemOf(promise: Promise<unknown>): Promise<string> {
	try {
		await promise;
	} catch (error) {
		expect(error).toBeInstanceOf(BadRequestError);
		expect((error as BadRequestError).code).toBe(400);
		return (error as Error).message;
	}
	throw new Error("expected a BadRequestError");
}

/** The service's own directories, away from the test's, which they would otherwise refuse. */
const OWN = { dataDir: "/nonexistent/scale/data", agentWorkDir: "/nonexistent/scale/agent" };

/** checkWorkspaceConfig as the service calls it, with no NFS_MOUNT_ROOT unless given. */
function check(doc: unknown, nfsMountRoot?: string) {
	return checkWorkspaceConfig(doc, "json_config", { ...OWN, nfsMountRoot });
}

function host(hostPath: unknown, extra: Record<string, unknown> = {}) {
	return { broker: { type: "host", host_path: hostPath }, ...extra };
}

describe("parseWorkspaceConfig (shape and version)", () => {
	it("fills in the default version and copies the document", () => {
		const doc = host("/x");
		const config = parseWorkspaceConfig(doc);
		expect(config).toEqual({ version: "1.0", broker: { type: "host", host_path: "/x" } });
		expect(doc).not.toHaveProperty("version");
		config.broker.host_path = "/changed";
		expect(doc.broker.host_path).toBe("/x");
	});

	it("keeps an explicit 1.0 and further broker fields, as Scale does", () => {
		expect(
			parseWorkspaceConfig({
				version: "1.0",
				broker: { type: "host", host_path: "/x", note: 1 }
			})
		).toEqual({
			version: "1.0",
			broker: { type: "host", host_path: "/x", note: 1 }
		});
	});

	it.each([
		["not an object", [], /^json_config: must be object/],
		["null", null, /^json_config: must be object/],
		["a string", "host", /^json_config: must be object/],
		["missing broker", {}, /^json_config\.broker: is required/],
		["broker not an object", { broker: "host" }, /^json_config\.broker: must be object/],
		["missing broker type", { broker: {} }, /^json_config\.broker\.type: is required/],
		[
			"broker type not a string",
			{ broker: { type: 3 } },
			/^json_config\.broker\.type: must be string/
		],
		["empty broker type", { broker: { type: "" } }, /^json_config\.broker\.type: /],
		[
			"unknown top-level field",
			{ ...host("/x"), extra: 1 },
			/^json_config\.extra: is not allowed/
		],
		[
			"version not a string",
			{ ...host("/x"), version: 1 },
			/^json_config\.version: must be string/
		],
		[
			"unknown version",
			{ ...host("/x"), version: "2.0" },
			/^json_config\.version: "2\.0" is an unsupported version/
		],
		["NUL in a value", host("/x\0y"), /^json_config\.broker\.host_path: must not contain NUL/],
		[
			"NUL in a key",
			{ broker: { type: "host", host_path: "/x", ["a\0"]: 1 } },
			/^json_config\.broker: field names must not contain NUL/
		],
		[
			"unpaired surrogate",
			host("/x\ud800"),
			/^json_config\.broker\.host_path: must not contain unpaired/
		]
	])("refuses %s", (_what, doc, expected) => {
		expect(problemOf(() => parseWorkspaceConfig(doc))).toMatch(expected);
	});

	it("names the document as the caller calls it", () => {
		expect(problemOf(() => parseWorkspaceConfig({}, "config"))).toBe(
			"config.broker: is required"
		);
	});
});

describe("validateBroker", () => {
	it("says plainly that Scale's s3 broker is not supported", async () => {
		const message = await asyncProblemOf(
			validateBroker({ version: "1.0", broker: { type: "s3" } }, "json_config", OWN)
		);
		expect(message).toBe(
			'json_config.broker.type: the "s3" broker is not supported by this service; only "host", "nfs" workspaces can be created'
		);
	});

	it("refuses an unknown broker type", async () => {
		expect(
			await asyncProblemOf(
				validateBroker({ version: "1.0", broker: { type: "ftp" } }, "json_config", OWN)
			)
		).toBe('json_config.broker.type: unknown broker type "ftp" (supported: "host", "nfs")');
	});
});

describe("nfs broker", () => {
	const nfs = (nfsPath: unknown) => ({ broker: { type: "nfs", nfs_path: nfsPath } });

	it("is a host workspace where the nodes mount the export under NFS_MOUNT_ROOT", async () => {
		fs.mkdirSync(path.join(dir, "net", "filer", "exports", "raw"), { recursive: true });
		const root = path.join(dir, "net");
		expect(await check(nfs("filer:/exports//raw/"), root)).toEqual({
			config: {
				version: "1.0",
				broker: {
					type: "nfs",
					nfs_path: "filer:/exports//raw/",
					host_path: path.join(dir, "net", "filer", "exports", "raw")
				}
			},
			warnings: []
		});
	});

	it("is refused without NFS_MOUNT_ROOT, for a path that is no export, or one not mounted", async () => {
		expect(await asyncProblemOf(check(nfs("filer:/exports/raw")))).toMatch(
			/^json_config\.broker\.type: an "nfs" workspace needs NFS_MOUNT_ROOT/
		);
		const root = path.join(dir, "net");
		expect(await asyncProblemOf(check(nfs("/exports/raw"), root))).toBe(
			'json_config.broker.nfs_path: "/exports/raw" is not an NFS export (host:/path)'
		);
		expect(await asyncProblemOf(check(nfs(7), root))).toMatch(
			/^json_config\.broker\.nfs_path: /
		);
		expect(await asyncProblemOf(check(nfs("filer:/nowhere"), root))).toBe(
			`json_config.broker.nfs_path: "filer:/nowhere" is mounted at ${path.join(dir, "net", "filer", "nowhere")} on the nodes (NFS_MOUNT_ROOT), which does not exist`
		);
	});

	it("is refused where the export holds the service's data directory", async () => {
		// DATA_DIR=/nonexistent/scale/data on the export "nonexistent:/scale" mounted under "/"
		expect(await asyncProblemOf(check(nfs("nonexistent:/scale"), "/"))).toBe(
			`json_config.broker.nfs_path: "/nonexistent/scale" contains the service's data directory /nonexistent/scale/data; a workspace may not keep its files there`
		);
	});
});

describe("host broker", () => {
	it("accepts an existing readable directory, with or without a trailing slash", async () => {
		expect(await check(host(dir))).toEqual({
			config: { version: "1.0", broker: { type: "host", host_path: dir } },
			warnings: []
		});
		expect((await check(host(`${dir}/`))).warnings).toEqual([]);
	});

	it("accepts a symbolic link to a directory", async () => {
		const link = path.join(dir, "link");
		fs.symlinkSync(path.join(dir, "sub"), link);
		expect((await check(host(link))).warnings).toEqual([]);
	});

	const cases: [string, () => unknown, RegExp][] = [
		["missing host_path", () => undefined, /^json_config\.broker\.host_path: is required/],
		[
			"empty host_path",
			() => "",
			/^json_config\.broker\.host_path: must NOT have fewer than 1/
		],
		["host_path not a string", () => 42, /^json_config\.broker\.host_path: must be string/],
		[
			"a relative path",
			() => "relative/dir",
			/^json_config\.broker\.host_path: must be an absolute path/
		],
		[
			"a '.' relative path",
			() => "./dir",
			/^json_config\.broker\.host_path: must be an absolute path/
		],
		[
			"a '..' segment",
			() => `${dir}/sub/..`,
			/^json_config\.broker\.host_path: must be a normalised path/
		],
		[
			"a '..' in the middle",
			() => `${dir}/../${path.basename(dir)}`,
			/^json_config\.broker\.host_path: must be a normalised path/
		],
		[
			"a '.' segment",
			() => `${dir}/./sub`,
			/^json_config\.broker\.host_path: must be a normalised path/
		],
		[
			"repeated slashes",
			() => `${dir}//sub`,
			/^json_config\.broker\.host_path: must be a normalised path/
		],
		[
			"a missing directory",
			() => `${dir}/missing`,
			/^json_config\.broker\.host_path: ".*\/missing" does not exist$/
		],
		[
			"a path through a file",
			() => `${file}/below`,
			/^json_config\.broker\.host_path: ".*" does not exist \(a part of the path is not a directory\)$/
		],
		[
			"a file",
			() => file,
			/^json_config\.broker\.host_path: ".*plain-file" is not a directory$/
		]
	];
	it.each(cases)("refuses %s", async (_what, hostPath, expected) => {
		const value = hostPath();
		const broker = value === undefined ? { type: "host" } : { type: "host", host_path: value };
		expect(await asyncProblemOf(check({ broker }))).toMatch(expected);
	});

	it("refuses system directories and the service's own, before looking at them", async () => {
		const refused: [string, string][] = [
			["/", '"/" is a system directory'],
			["/etc", '"/etc" is a system directory'],
			["/proc/self", '"/proc/self" is inside the system directory /proc'],
			[
				"/nonexistent",
				'"/nonexistent" contains the service\'s data directory /nonexistent/scale/data'
			],
			[
				"/nonexistent/scale/agent/tasks",
				'"/nonexistent/scale/agent/tasks" is inside the node agent\'s work directory /nonexistent/scale/agent'
			]
		];
		for (const [hostPath, problem] of refused)
			expect(await asyncProblemOf(check(host(hostPath)))).toBe(
				`json_config.broker.host_path: ${problem}; a workspace may not keep its files there`
			);
		const link = path.join(dir, "to-etc");
		fs.symlinkSync("/etc", link);
		expect(await asyncProblemOf(check(host(link)))).toBe(
			`json_config.broker.host_path: "${link}" leads to /etc, which is a system directory; a workspace may not keep its files there`
		);
	});

	it("suggests the normalised path", async () => {
		expect(await asyncProblemOf(check(host(`${dir}/sub/..`)))).toContain(
			`(did you mean "${dir}"?)`
		);
	});

	// root may read anything, so the check can only be seen failing as another user
	const asRoot = typeof process.getuid === "function" && process.getuid() === 0;
	(asRoot ? it.skip : it)("refuses a directory the process cannot read", async () => {
		const locked = path.join(dir, "locked");
		fs.mkdirSync(locked, { mode: 0o000 });
		try {
			expect(await asyncProblemOf(check(host(locked)))).toMatch(
				/^json_config\.broker\.host_path: ".*locked" is not readable by the service/
			);
		} finally {
			fs.chmodSync(locked, 0o700);
		}
	});

	it("names the broker object as the caller calls it", async () => {
		expect(
			await asyncProblemOf(
				validateHostBroker({ type: "host", host_path: "x" }, "cfg.broker", OWN)
			)
		).toMatch(/^cfg\.broker\.host_path: must be an absolute path/);
	});
});

describe("textProblem", () => {
	it("accepts ordinary text, including paired surrogates", () => {
		expect(textProblem("plain")).toBeNull();
		expect(textProblem("emoji \ud83d\ude00 ok")).toBeNull();
	});

	it("refuses what PostgreSQL cannot store", () => {
		expect(textProblem("a\0b")).toMatch(/NUL/);
		expect(textProblem("\ud800")).toMatch(/surrogate/);
		expect(textProblem("x\udc00")).toMatch(/surrogate/);
		expect(textProblem("\ude00\ud83d")).toMatch(/surrogate/);
	});
});
