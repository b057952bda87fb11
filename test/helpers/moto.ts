import { spawn, spawnSync } from "child_process";
import http from "http";
import { freePort } from "./ports";

/**
 * A real S3- and SQS-compatible server for the tests and benches: moto's server
 * (`python3 -m moto.server`), started on a free port and stopped by the caller. Its credentials
 * are any: the helper sets the AWS environment a process needs to reach it.
 */

export interface Moto {
	/** e.g. http://127.0.0.1:41234 */
	endpoint: string;
	/** the AWS environment that points the SDK at it (credentials, region) */
	env: Record<string, string>;
	stop(): Promise<void>;
}

/** moto's server, or the command that installs it. */
function ensureMoto(): void {
	const found = spawnSync("python3", ["-c", "import moto.server, flask"], { encoding: "utf8" });
	if (found.status !== 0)
		throw new Error(
			"moto's server is missing: run `python3 -m pip install 'moto[server]'`, then the tests again"
		);
}

function answers(endpoint: string): Promise<boolean> {
	return new Promise(resolve => {
		const req = http.get(`${endpoint}/moto-api/`, res => {
			res.resume();
			resolve(true);
		});
		req.once("error", () => resolve(false));
		req.setTimeout(1000, () => {
			req.destroy();
			resolve(false);
		});
	});
}

export async function startMoto(): Promise<Moto> {
	ensureMoto();
	const port = await freePort();
	const child = spawn("python3", ["-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)], {
		stdio: ["ignore", "ignore", "pipe"]
	});
	let stderr = "";
	child.stderr!.on("data", chunk => {
		stderr = (stderr + chunk).slice(-4000);
	});
	const endpoint = `http://127.0.0.1:${port}`;
	const deadline = Date.now() + 30000;
	while (!(await answers(endpoint))) {
		if (child.exitCode !== null || Date.now() > deadline) {
			child.kill("SIGKILL");
			throw new Error(`moto's server did not start on port ${port}: ${stderr}`);
		}
		await new Promise(r => setTimeout(r, 100));
	}
	return {
		endpoint,
		env: {
			AWS_ACCESS_KEY_ID: "testing",
			AWS_SECRET_ACCESS_KEY: "testing",
			AWS_REGION: "us-east-1",
			AWS_ENDPOINT_URL_S3: endpoint,
			AWS_ENDPOINT_URL_SQS: endpoint
		},
		stop: () =>
			new Promise<void>(resolve => {
				if (child.exitCode !== null) return resolve();
				child.once("exit", () => resolve());
				child.kill("SIGTERM");
			})
	};
}
