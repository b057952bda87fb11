import fs from "fs";
import path from "path";
import { AGENT_NODE_OPTIONS } from "../../lib/cluster/node-process";

describe("an agent's node options", () => {
	it("are the same for `npm run agent` and the agents of `npm run cluster`", () => {
		const pkg = JSON.parse(
			fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")
		);
		const script: string = pkg.scripts.agent;
		const node = script.slice(script.indexOf(" node ") + " node ".length).split(" ");
		expect(node.slice(0, AGENT_NODE_OPTIONS.length)).toEqual(AGENT_NODE_OPTIONS);
		expect(node[AGENT_NODE_OPTIONS.length]).toBe("dist/bin/start.js");
	});
});
