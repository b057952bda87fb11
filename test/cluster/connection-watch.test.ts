import fs from "fs";
import os from "os";
import path from "path";
import { ServiceBroker } from "moleculer";
import { startNatsServer, type RunningNatsServer } from "../../lib/cluster/nats-server";
import { watchNatsConnection } from "../../lib/transport/connection-watch";
import { ensureNatsServer } from "../helpers/nats";
import { freePort } from "../helpers/ports";

/**
 * The scheduler learns from the nats client itself that its process was cut off from NATS
 * (Moleculer's NATS transporter reconnects without telling the broker): a real nats-server
 * stopped and started again under a real broker.
 */

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (!check()) {
		if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await new Promise(r => setTimeout(r, 50));
	}
}

describe("watchNatsConnection", () => {
	let server: RunningNatsServer | null = null;
	let broker: ServiceBroker | null = null;
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nats-watch-"));

	afterAll(async () => {
		await broker?.stop();
		await server?.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	});

	it("reports the connection lost when nats-server stops and back when it returns", async () => {
		ensureNatsServer();
		const port = await freePort();
		const options = { dir, port, user: "watch", password: "watch-secret" };
		server = await startNatsServer(options);
		broker = new ServiceBroker({
			nodeID: `watch-${process.pid}`,
			logger: false,
			transporter: {
				type: "NATS",
				options: { servers: [`127.0.0.1:${port}`], user: "watch", pass: "watch-secret" }
			}
		});
		await broker.start();
		const events: string[] = [];
		const watching = watchNatsConnection(
			broker.transit,
			() => events.push("down"),
			() => events.push("up")
		);
		expect(watching).toBe(true);

		await server.stop();
		await until(() => events.includes("down"), 10000, "the disconnect");
		expect(events).toEqual(["down"]);
		server = await startNatsServer(options);
		await until(() => events.includes("up"), 20000, "the reconnect");
		expect(events).toEqual(["down", "up"]);
	}, 40000);

	it("answers false for a broker without a NATS connection", async () => {
		const local = new ServiceBroker({ nodeID: `local-${process.pid}`, logger: false });
		await local.start();
		expect(
			watchNatsConnection(
				local.transit,
				() => undefined,
				() => undefined
			)
		).toBe(false);
		await local.stop();
	});
});
