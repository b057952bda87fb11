import fs from "fs";
import path from "path";
import {
	AGENT_NODE_OPTIONS,
	CONTROL_ENV,
	CONTROL_NODE_OPTIONS
} from "../../lib/cluster/node-process";

function scriptOf(name: string): string {
	const pkg = JSON.parse(
		fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")
	);
	return pkg.scripts[name];
}

/** The node options and script of a package.json script running `node ... dist/bin/start.js`. */
function nodeOf(name: string): string[] {
	const script = scriptOf(name);
	return script.slice(script.indexOf(" node ") + " node ".length).split(" ");
}

/** The variables a package.json script sets for its `node` (`A=1 B=2 node ...`). */
function envOf(name: string): Record<string, string> {
	const script = scriptOf(name);
	const before = script.slice(script.lastIndexOf("&&") + 2, script.indexOf(" node ")).trim();
	return Object.fromEntries(
		before
			.split(" ")
			.filter(word => word.includes("="))
			.map(word => [word.slice(0, word.indexOf("=")), word.slice(word.indexOf("=") + 1)])
	);
}

describe("a control plane's node options", () => {
	it("are the same for `npm start` and the control planes of `npm run cluster`", () => {
		const node = nodeOf("start");
		expect(node.slice(0, CONTROL_NODE_OPTIONS.length)).toEqual(CONTROL_NODE_OPTIONS);
		expect(node[CONTROL_NODE_OPTIONS.length]).toBe("dist/bin/start.js");
	});

	it("run with the same malloc settings for `npm start` as for the control planes of `npm run cluster`", () => {
		expect(envOf("start")).toEqual(CONTROL_ENV);
	});
});

describe("an agent's node options", () => {
	it("are the same for `npm run agent` and the agents of `npm run cluster`", () => {
		const node = nodeOf("agent");
		expect(node.slice(0, AGENT_NODE_OPTIONS.length)).toEqual(AGENT_NODE_OPTIONS);
		expect(node[AGENT_NODE_OPTIONS.length]).toBe("dist/bin/start.js");
	});
});
