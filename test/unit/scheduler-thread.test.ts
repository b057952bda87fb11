import { ServiceBroker } from "moleculer";
import { MessageChannel } from "worker_threads";
import { loadConfig } from "../../lib/launch/config";
import { splitForSchedulerThread, wantsSchedulerThread } from "../../lib/launch/scheduler-thread";
import { JsonTextSerializer, ThreadTransporter } from "../../lib/transport/threads";

describe("the scheduler thread's configuration", () => {
	it("is wanted where SCHEDULER_THREAD is on, the scheduler runs among others, and no TRANSPORTER", () => {
		expect(wantsSchedulerThread(loadConfig({}))).toBe(false);
		expect(wantsSchedulerThread(loadConfig({ SCHEDULER_THREAD: "true" }))).toBe(true);
		expect(
			wantsSchedulerThread(loadConfig({ SCHEDULER_THREAD: "true", SERVICES: "scheduler" }))
		).toBe(false);
		expect(
			wantsSchedulerThread(loadConfig({ SCHEDULER_THREAD: "true", SERVICES: "api,queue" }))
		).toBe(false);
		expect(
			wantsSchedulerThread(
				loadConfig({ SCHEDULER_THREAD: "true", TRANSPORTER: "nats://127.0.0.1:4222" })
			)
		).toBe(false);
	});

	it("puts the scheduler alone in the thread, its metrics on the next port", () => {
		const config = loadConfig({ SCHEDULER_THREAD: "true", METRICS_PORT: "9100" });
		const { main, thread } = splitForSchedulerThread(config);
		expect(thread.services).toEqual(["scheduler"]);
		expect(main.services).toEqual(config.services.filter(s => s !== "scheduler"));
		expect([main.metricsPort, thread.metricsPort]).toEqual([9100, 9101]);
		expect(splitForSchedulerThread(loadConfig({})).thread.metricsPort).toBeNull();
	});
});

describe("ThreadTransporter", () => {
	const brokers: ServiceBroker[] = [];
	afterAll(async () => {
		for (const b of brokers) await b.stop();
	});

	it("joins two brokers over a MessageChannel: calls, answers, errors and events cross", async () => {
		const { port1, port2 } = new MessageChannel();
		const make = (nodeID: string, port: typeof port1) => {
			const broker = new ServiceBroker({
				nodeID,
				logger: false,
				transporter: new ThreadTransporter({ port }),
				serializer: new JsonTextSerializer()
			});
			brokers.push(broker);
			return broker;
		};
		const a = make("a", port1);
		const b = make("b", port2);
		const seen: unknown[] = [];
		b.createService({
			name: "far",
			actions: {
				echo: (ctx: any) => ({ got: ctx.params, from: ctx.nodeID, at: new Date(0) }),
				refuse: () => {
					throw new Error("no");
				}
			},
			events: { "thing.happened": (ctx: any) => void seen.push(ctx.params) }
		});
		await Promise.all([a.start(), b.start()]);
		await a.waitForServices(["far"], 5000);

		// answered as over a network transporter: JSON, a Date as its ISO text
		expect(await a.call("far.echo", { n: 1, text: "é" })).toEqual({
			got: { n: 1, text: "é" },
			from: "a",
			at: "1970-01-01T00:00:00.000Z"
		});
		await expect(a.call("far.refuse")).rejects.toMatchObject({ message: "no" });
		a.emit("thing.happened", { id: 7 });
		for (let i = 0; i < 100 && seen.length === 0; i++)
			await new Promise(r => setTimeout(r, 10));
		expect(seen).toEqual([{ id: 7 }]);
	});
});
