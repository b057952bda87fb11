import fs from "fs";
import os from "os";
import path from "path";
import { ServiceBroker, type Context } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadConfig } from "../../lib/launch/config";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";

/**
 * Calls between two brokers (this project's broker options: its NATS transporter and its
 * middlewares) through a real nats-server that stops and starts again. No call may stay pending
 * beyond its timeout, for its caller or for the broker's stop; a call that cannot be answered
 * because this process lost NATS fails at once; the brokers hear of the loss and of the return.
 */

const USER = "calls";
const PASSWORD = "calls-secret";

async function refusal(call: Promise<unknown>): Promise<any> {
	try {
		await call;
	} catch (err) {
		return err;
	}
	throw new Error("the call was answered");
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (!check()) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await new Promise(r => setTimeout(r, 20));
	}
}

describe("calls over NATS through an outage", () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nats-calls-"));
	let port: number;
	let server: RunningNatsServer | null = null;
	let caller: ServiceBroker;
	let callee: ServiceBroker;
	/** releases the `slow.hang` calls under way */
	const hanging = new Set<() => void>();
	const events: string[] = [];

	const startServer = () => startNatsServer({ dir, port, user: USER, password: PASSWORD });

	function broker(name: string): ServiceBroker {
		const config = loadConfig({
			LOG_LEVEL: "warn",
			SERVICES: "status",
			NODE_ID: name,
			TRANSPORTER: `nats://127.0.0.1:${port}`,
			NATS_USER: USER,
			NATS_PASSWORD: PASSWORD
		});
		return new ServiceBroker({
			...brokerOptions(config, null),
			nodeID: name,
			logger: false
		});
	}

	/** Pending requests and tracked contexts of the caller (what its stop would wait for). */
	function leftOver(b: ServiceBroker): { pending: number; tracked: number } {
		return {
			pending: (b.transit as any).pendingRequests.size,
			tracked: (b as any)._trackedContexts.length
		};
	}

	beforeAll(async () => {
		ensureNatsServer();
		port = await freePort();
		server = await startServer();
		caller = broker(`caller-${process.pid}`);
		caller.createService({
			name: "watcher",
			events: {
				"$transporter.disconnected"(ctx: Context<{ graceFul: boolean }>) {
					if (!ctx.params.graceFul) events.push("down");
				},
				"$transporter.connected"(ctx: Context<{ wasReconnect: boolean }>) {
					events.push(ctx.params.wasReconnect ? "back" : "up");
				}
			}
		});
		callee = broker(`callee-${process.pid}`);
		callee.createService({
			name: "slow",
			actions: {
				hang: () => new Promise<string>(resolve => hanging.add(() => resolve("late"))),
				echo: (ctx: Context<{ n: number }>) => ctx.params.n
			}
		});
		await Promise.all([caller.start(), callee.start()]);
		await caller.waitForServices(["slow"], 10000);
	}, 30000);

	afterAll(async () => {
		for (const release of hanging) release();
		await caller?.stop().catch(() => undefined);
		await callee?.stop().catch(() => undefined);
		await server?.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}, 30000);

	it("lets go of a call at its timeout: nothing left for the broker's stop to wait for", async () => {
		const err = await refusal(caller.call("slow.hang", {}, { timeout: 300 }));
		expect(err.type).toBe("REQUEST_TIMEOUT");
		// Moleculer alone left the request pending and its context tracked until an answer
		await until(() => leftOver(caller).tracked === 0, 1000, "the context to be let go");
		expect(leftOver(caller)).toEqual({ pending: 0, tracked: 0 });
		for (const release of hanging) release();
		hanging.clear();
		expect(await caller.call("slow.echo", { n: 1 })).toBe(1);
	});

	it("fails calls at once while cut off from NATS, and answers again within a second of its return", async () => {
		const waiting = refusal(caller.call("slow.hang", {}, { timeout: 30000 }));
		await until(() => hanging.size === 1, 5000, "the call to arrive");
		const stopped = Date.now();
		await server!.stop();
		server = null;
		// the call under way fails as soon as the loss is known, not 30 s later
		const lost = await waiting;
		expect(lost.type).toBe("BROKER_DISCONNECTED");
		expect(lost.retryable).toBe(true);
		expect(Date.now() - stopped).toBeLessThan(3000);
		await until(() => events.includes("down"), 5000, "$transporter.disconnected");
		// a call made meanwhile is not sent (nats.js would discard it) and fails at once
		const started = Date.now();
		const unsent = await refusal(caller.call("slow.echo", { n: 2 }, { timeout: 30000 }));
		expect(unsent.type).toBe("BROKER_DISCONNECTED");
		expect(Date.now() - started).toBeLessThan(500);
		expect(leftOver(caller)).toEqual({ pending: 0, tracked: 0 });

		await new Promise(r => setTimeout(r, 3000));
		server = await startServer();
		const back = Date.now();
		let answer: unknown = null;
		while (answer === null && Date.now() - back < 10000) {
			answer = await caller.call("slow.echo", { n: 3 }, { timeout: 200 }).catch(() => null);
			// a call fails at once while cut off: a loop of them would keep the client from
			// ever reading its socket
			if (answer === null) await new Promise(r => setTimeout(r, 20));
		}
		expect(answer).toBe(3);
		const answeredAfter = Date.now() - back;
		process.stdout.write(
			`calls answered again ${answeredAfter} ms after nats-server was back\n`
		);
		expect(answeredAfter).toBeLessThan(2000);
		expect(events).toEqual(expect.arrayContaining(["down", "back"]));
		expect(events.indexOf("back")).toBeGreaterThan(events.indexOf("down"));
	}, 30000);

	it("stops at once afterwards: no context left for its shutdownTimeout (GracefulStopTimeoutError)", async () => {
		for (const release of hanging) release();
		hanging.clear();
		expect(leftOver(caller)).toEqual({ pending: 0, tracked: 0 });
		const started = Date.now();
		await caller.stop();
		await callee.stop();
		expect(Date.now() - started).toBeLessThan(3000);
	});
});
