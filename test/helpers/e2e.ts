import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { loadServiceSchemas } from "../../lib/launch/services";
import { request, type Reply } from "./broker";
import { JOBS_CONTROL_PLANE } from "./process";

/**
 * What the end-to-end suites share: the process layout of `npm start` in one in-process broker
 * (the named services, the gateway on a free port, the node agent in a work directory of the
 * test's), with fast settings, and a REST client over it.
 */

export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** Fast settings, so that the suites run in seconds (the defaults are made for production). */
export const FAST_SETTINGS: Record<string, Record<string, unknown>> = {
	scheduler: { tickMs: 100, leaderRetryMs: 200, leadGraceMs: 0, flushMs: 1 },
	"node-agent": {
		heartbeatMs: 250,
		registerRetryMs: 200,
		finishRetryMs: 200,
		killGraceMs: 500,
		strikeRescanMs: 300
	},
	triggers: { pollMs: 200 },
	scans: { claimMs: 200, leaseMs: 1500, pageSize: 100 }
};

/** The services a job needs from POST /queue/new-job/ to its logs, with one agent. */
export const JOB_SERVICES = [...JOBS_CONTROL_PLANE, "node-agent"];

export interface E2e {
	broker: ServiceBroker;
	/** e.g. http://127.0.0.1:41234/api */
	api: string;
	/** a request to `${api}${path}` */
	call(method: string, path: string, body?: unknown): Promise<Reply>;
	/** a request that must answer `status`: its body, or an error naming what it got */
	ok(method: string, path: string, body?: unknown, status?: number): Promise<any>;
	stop(): Promise<void>;
}

/** Starts the services against the database, the agent working in `agentDir`. */
export async function startE2e(
	databaseUrl: string,
	services: string[],
	agentDir: string,
	prefix: string,
	env: Record<string, string> = {}
): Promise<E2e> {
	const config = loadConfig({
		LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "error",
		SERVICES: services.join(","),
		AGENT_WORK_DIR: agentDir,
		AGENT_CPUS: "2",
		AGENT_MEM_MIB: "2048",
		AGENT_DISK_MIB: "1024",
		...env
	});
	const broker = new ServiceBroker({
		...brokerOptions(config, databaseUrl),
		nodeID: `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
	});
	for (const schema of loadServiceSchemas({ ...config, port: 0 }))
		broker.createService({
			...schema,
			settings: { ...schema.settings, ...(FAST_SETTINGS[schema.name as string] ?? {}) }
		});
	await broker.start();
	const gateway = broker.getLocalService("api") as any;
	const api = `http://127.0.0.1:${gateway.server.address().port}/api`;
	const call = (method: string, path: string, body?: unknown) =>
		request(method, `${api}${path}`, body);
	return {
		broker,
		api,
		call,
		async ok(method, path, body, status = 200) {
			const res = await call(method, path, body);
			if (res.status !== status)
				throw new Error(
					`${method} ${path}: expected ${status}, got ${res.status}: ${res.text}`
				);
			return res.body;
		},
		stop: () => broker.stop()
	};
}

/** Polls `probe` until `done` accepts its value; fails with the last value after the deadline. */
export async function until<T>(
	what: string,
	probe: () => Promise<T>,
	done: (value: T) => boolean,
	timeoutMs = 20000
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await probe();
		if (done(value)) return value;
		if (Date.now() > deadline)
			throw new Error(
				`timed out waiting for ${what}; last value: ${JSON.stringify(value)?.slice(0, 3000)}`
			);
		await sleep(50);
	}
}
