import fs from "fs";
import path from "path";
import { AGENT_NODE_OPTIONS, CONTROL_NODE_OPTIONS } from "../../lib/cluster/node-process";

/** The node options and script of a package.json script running `node ... dist/bin/start.js`. */
function nodeOf(name: string): string[] {
	const pkg = JSON.parse(
		fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")
	);
	const script: string = pkg.scripts[name];
	return script.slice(script.indexOf(" node ") + " node ".length).split(" ");
}

describe("a control plane's node options", () => {
	it("are the same for `npm start` and the control planes of `npm run cluster`", () => {
		const node = nodeOf("start");
		expect(node.slice(0, CONTROL_NODE_OPTIONS.length)).toEqual(CONTROL_NODE_OPTIONS);
		expect(node[CONTROL_NODE_OPTIONS.length]).toBe("dist/bin/start.js");
	});
});

describe("an agent's node options", () => {
	it("are the same for `npm run agent` and the agents of `npm run cluster`", () => {
		const node = nodeOf("agent");
		expect(node.slice(0, AGENT_NODE_OPTIONS.length)).toEqual(AGENT_NODE_OPTIONS);
		expect(node[AGENT_NODE_OPTIONS.length]).toBe("dist/bin/start.js");
	});
});
