import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { loadServiceSchemas } from "../../lib/launch/services";

export interface TestApi {
	broker: ServiceBroker;
	/** e.g. http://127.0.0.1:41234/api */
	api: string;
	stop(): Promise<void>;
}

/**
 * An in-process broker running the named services (the gateway on a free port) against the
 * given database, as `npm start` would, minus the embedded server and migrations.
 */
export async function startServices(
	databaseUrl: string,
	services: string[],
	env: Record<string, string> = {}
): Promise<TestApi> {
	const config = loadConfig({ LOG_LEVEL: "warn", ...env, SERVICES: services.join(",") });
	const broker = new ServiceBroker({
		...brokerOptions(config, databaseUrl),
		nodeID: `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
	});
	for (const schema of loadServiceSchemas({ ...config, port: 0 })) broker.createService(schema);
	await broker.start();
	const gateway = broker.getLocalService("api") as any;
	const port = gateway ? gateway.server.address().port : 0;
	const status = broker.getLocalService("status") as any;
	if (status) status.settings.apiPort = port;
	return { broker, api: `http://127.0.0.1:${port}/api`, stop: () => broker.stop() };
}

export interface Reply {
	status: number;
	headers: Headers;
	body: any;
	text: string;
}

/** A request with a JSON body (or a raw string body), answering status, headers and parsed body. */
export async function request(
	method: string,
	url: string,
	body?: unknown,
	headers: Record<string, string> = {}
): Promise<Reply> {
	const init: RequestInit = { method, headers: { ...headers } };
	if (body !== undefined) {
		init.body = typeof body === "string" ? body : JSON.stringify(body);
		(init.headers as Record<string, string>)["Content-Type"] ??= "application/json";
	}
	const res = await fetch(url, init);
	const text = await res.text();
	let parsed: unknown = undefined;
	try {
		parsed = JSON.parse(text);
	} catch {
		parsed = undefined;
	}
	return { status: res.status, headers: res.headers, body: parsed, text };
}

/** A JSON error answer: its status, its content type, and `{detail}` alone (matching `detail`). */
export function expectJsonError(reply: Reply, status: number, detail?: RegExp) {
	expect(reply.status).toBe(status);
	expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
	expect(Object.keys(reply.body)).toEqual(["detail"]);
	if (detail) expect(reply.body.detail).toMatch(detail);
}
