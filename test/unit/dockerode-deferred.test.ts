import { spawnSync } from "child_process";
import path from "path";

/**
 * lib/agent/dockerode.ts keeps ssh2 and gRPC out of an agent that never speaks to an `ssh://`
 * engine or runs a BuildKit session, and loads them when such a path is taken. Checked on the
 * built dist/ (npm test builds first) in a fresh process: jest's module registry is not Node's
 * require cache.
 */
const root = path.resolve(__dirname, "../..");

function run(script: string): string {
	const ran = spawnSync(process.execPath, ["-e", script], { cwd: root, encoding: "utf8" });
	if (ran.status !== 0) throw new Error(ran.stderr);
	return ran.stdout.trim();
}

const loaded = `Object.keys(require.cache).filter(f => /node_modules\\/(ssh2|@grpc)\\//.test(f)).map(f => f.match(/node_modules\\/(ssh2|@grpc\\/[^/]+)\\//)[1])`;

test("loading the agent's engine client loads neither ssh2 nor gRPC", () => {
	const out = run(
		`const { Dockerode } = require("./dist/lib/agent/dockerode"); new Dockerode({ socketPath: "/nonexistent" }); console.log(JSON.stringify([...new Set(${loaded})]))`
	);
	expect(JSON.parse(out)).toEqual([]);
});

test("an ssh:// engine loads ssh2 when it is first spoken to, and still reaches the address", () => {
	const out = run(
		`const { Dockerode } = require("./dist/lib/agent/dockerode");
		 const d = new Dockerode({ protocol: "ssh", host: "127.0.0.1", port: 1, username: "x" });
		 d.ping().then(() => console.log("answered"), e => console.log(JSON.stringify({ code: e.code, loaded: [...new Set(${loaded})] })));`
	);
	expect(JSON.parse(out)).toEqual({ code: "ECONNREFUSED", loaded: ["ssh2"] });
});
