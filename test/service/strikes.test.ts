import fs from "fs";
import os from "os";
import path from "path";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";

/**
 * Strikes over real HTTP and PostgreSQL, on the directories they may watch: no system directory
 * and none of the service's own, refused on create, validation and edit with nothing written.
 */
describe("strikes on refused directories", () => {
	let db: TestDatabase;
	let services: TestApi;
	let api: string;
	let root: string;
	/** where the nodes mount NFS exports; the service's data directory is on one of them */
	let net: string;
	let dataDir: string;
	let agentWorkDir: string;
	let strikeId: number;

	/** A configuration storing everything in the workspace raw, with `mounts` for its directory. */
	function configuration(mounts: Record<string, string>) {
		return {
			...mounts,
			transfer_suffix: "_tmp",
			files_to_ingest: [{ filename_regex: ".*", workspace_path: "in", workspace_name: "raw" }]
		};
	}

	/** What a strike's create or edit writes: strikes, their events and jobs. */
	async function written(): Promise<unknown[]> {
		const tables = ["strike", "trigger_event", "job"];
		return Promise.all(
			tables.map(async table => (await db.db.query(`SELECT * FROM ${table} ORDER BY id`))[0])
		);
	}

	beforeAll(async () => {
		root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "strike-service-")));
		net = path.join(root, "net");
		dataDir = path.join(net, "filer", "scale", "data");
		agentWorkDir = path.join(root, "agent-work");
		fs.mkdirSync(dataDir, { recursive: true });
		fs.mkdirSync(path.join(root, "raw"));
		fs.mkdirSync(path.join(root, "incoming"));
		fs.mkdirSync(path.join(net, "filer", "scale", "incoming"));
		fs.symlinkSync("/etc", path.join(root, "to-etc"));
		fs.symlinkSync(dataDir, path.join(root, "to-data"));
		db = await createTestDatabase();
		services = await startServices(db.url, ["api", "workspaces", "ingest"], {
			DATA_DIR: dataDir,
			AGENT_WORK_DIR: agentWorkDir,
			NFS_MOUNT_ROOT: net
		});
		api = services.api;
		const raw = await request("POST", `${api}/workspaces/`, {
			name: "raw",
			json_config: { broker: { type: "host", host_path: path.join(root, "raw") } }
		});
		expect(raw.status).toBe(201);
		const made = await request("POST", `${api}/strike/create/`, {
			name: "incoming",
			configuration: configuration({ mount: path.join(root, "incoming") })
		});
		expect(made.status).toBe(200);
		strikeId = made.body.strike_id;
	});

	afterAll(async () => {
		await services?.stop();
		await db?.drop();
		if (root) fs.rmSync(root, { recursive: true, force: true });
	});

	const refused: [string, () => Record<string, string>, RegExp][] = [
		[
			"the root directory",
			() => ({ mount: "/" }),
			/^configuration\.mount: "\/" is a system directory; a strike may not watch it$/
		],
		[
			"a system directory",
			() => ({ mount: "/etc" }),
			/^configuration\.mount: "\/etc" is a system directory; a strike may not watch it$/
		],
		[
			"/var/lib itself, written with a trailing slash",
			() => ({ mount: "/var/lib/" }),
			/^configuration\.mount: "\/var\/lib" is a system directory; /
		],
		[
			"a directory inside a system directory",
			() => ({ mount: "/usr/share/incoming" }),
			/^configuration\.mount: "\/usr\/share\/incoming" is inside the system directory \/usr; a strike may not watch it$/
		],
		[
			"a mount_on inside a system directory",
			() => ({ mount: "filer:/exports/in", mount_on: "/dev/shm" }),
			/^configuration\.mount_on: "\/dev\/shm" is inside the system directory \/dev; /
		],
		[
			"a symbolic link to a system directory",
			() => ({ mount: path.join(root, "to-etc") }),
			/^configuration\.mount: ".*\/to-etc" leads to \/etc, which is a system directory; /
		],
		[
			"a symbolic link to the service's data directory",
			() => ({ mount: path.join(root, "to-data") }),
			/^configuration\.mount: ".*\/to-data" leads to .*\/data, which is the service's data directory; /
		],
		[
			"the service's data directory",
			() => ({ mount: dataDir }),
			/^configuration\.mount: ".*\/data" is the service's data directory; /
		],
		[
			"a directory inside the node agent's work directory",
			() => ({ mount: "filer:/exports/in", mount_on: path.join(agentWorkDir, "tasks") }),
			/^configuration\.mount_on: ".*\/agent-work\/tasks" is inside the node agent's work directory .*\/agent-work; /
		],
		[
			"a directory holding the service's data directory",
			() => ({ mount: root }),
			/^configuration\.mount: ".*" contains the service's data directory .*\/data; a strike may not watch it$/
		],
		[
			"an NFS export holding the service's data directory",
			() => ({ mount: "filer:/scale" }),
			/^configuration\.mount: ".*\/net\/filer\/scale" contains the service's data directory /
		]
	];

	describe.each([
		["create (the spec's route)", "strike/create/"],
		["create (Scale 3.0's route)", "strikes/"],
		["validation", "strikes/validation/"]
	])("on %s", (_action, route) => {
		it.each(refused)(
			"refuses %s with a 400 naming the field",
			async (_what, mounts, detail) => {
				const before = await written();
				const res = await request("POST", `${api}/${route}`, {
					name: "refused",
					configuration: configuration(mounts())
				});
				expect(res.status).toBe(400);
				expect(res.body.detail).toMatch(detail);
				expect(await written()).toEqual(before);
			}
		);
	});

	it.each(refused)("refuses an edit to %s, changing nothing", async (_what, mounts, detail) => {
		const before = await written();
		const res = await request("PATCH", `${api}/strikes/${strikeId}/`, {
			title: "changed",
			configuration: configuration(mounts())
		});
		expect(res.status).toBe(400);
		expect(res.body.detail).toMatch(detail);
		expect(await written()).toEqual(before);
	});

	it("accepts directories beside the refused ones", async () => {
		const missing = (dir: string) => [
			{
				id: "mount",
				details: `configuration.mount: "${dir}" does not exist on this node; a strike watches a directory, it creates none`
			}
		];
		const accepted: [Record<string, string>, unknown[]][] = [
			[{ mount: "/var/lib/scale-data" }, missing("/var/lib/scale-data")],
			[{ mount: "/tmp/incoming-nowhere" }, missing("/tmp/incoming-nowhere")],
			[{ mount: path.join(net, "filer", "scale", "incoming") }, []],
			// mounted by the operator, maybe not yet: the strike's job says so if still missing
			[{ mount: "filer:/scale", mount_on: path.join(root, "mounted") }, []],
			// an export under NFS_MOUNT_ROOT, mounted on demand (autofs): not checked either
			[{ mount: "filer:/elsewhere" }, []]
		];
		for (const [mounts, warnings] of accepted) {
			const res = await request("POST", `${api}/strikes/validation/`, {
				name: "fine",
				configuration: configuration(mounts)
			});
			expect({ mounts, status: res.status, body: res.body }).toEqual({
				mounts,
				status: 200,
				body: { warnings }
			});
		}
	});

	it("refuses a directory that does not exist on create and edit, writing nothing", async () => {
		const nowhere = path.join(root, "not-there");
		const detail = `configuration.mount: "${nowhere}" does not exist on this node; a strike watches a directory, it creates none`;
		const before = await written();
		for (const route of ["strike/create/", "strikes/"]) {
			const res = await request("POST", `${api}/${route}`, {
				name: "nowhere",
				configuration: configuration({ mount: nowhere })
			});
			expect([route, res.status, res.body.detail]).toEqual([route, 400, detail]);
		}
		const edit = await request("PATCH", `${api}/strikes/${strikeId}/`, {
			configuration: configuration({ mount: nowhere })
		});
		expect([edit.status, edit.body.detail]).toEqual([400, detail]);
		// a file where the directory should be
		fs.writeFileSync(path.join(root, "a-file"), "");
		const file = await request("POST", `${api}/strikes/`, {
			name: "on-a-file",
			configuration: configuration({ mount: path.join(root, "a-file") })
		});
		expect(file.body.detail).toMatch(/^configuration\.mount: ".*\/a-file" is not a directory$/);
		expect(await written()).toEqual(before);
		expect(fs.existsSync(nowhere)).toBe(false);
	});
});
