import fs from "fs";
import os from "os";
import path from "path";
import { parseNewStrike } from "../../../lib/ingest/strikes";

/** A strike's `mount` at create: checked on one machine, left to the strike's job in a cluster. */
describe("a strike's mount at create", () => {
	const root = fs.mkdtempSync(path.join(os.tmpdir(), "strike-mounts-"));
	const nowhere = path.join(root, "not-there");
	const directories = {
		dataDir: path.join(root, "data"),
		agentWorkDir: path.join(root, "agent"),
		nfsMountRoot: null
	};
	const body = {
		name: "nowhere",
		configuration: {
			version: "1.0",
			mount: nowhere,
			transfer_suffix: "_tmp",
			files_to_ingest: [{ filename_regex: ".*", workspace_path: "in", workspace_name: "raw" }]
		}
	};
	afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

	it("refuses a directory missing on this host when the process is the whole service", async () => {
		await expect(parseNewStrike(body, { ...directories, checkMounts: true })).rejects.toThrow(
			`"${nowhere}" does not exist on this node`
		);
	});

	it("accepts it in a cluster, where only the agents may see it, creating nothing", async () => {
		const strike = await parseNewStrike(body, { ...directories, checkMounts: false });
		expect(strike.configuration.mount).toBe(nowhere);
		expect(fs.existsSync(nowhere)).toBe(false);
	});
});
