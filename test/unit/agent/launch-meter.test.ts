import { LaunchMeter } from "../../../lib/agent/launch-meter";

describe("LaunchMeter", () => {
	it("counts the executions accepted and not launched yet", () => {
		let at = 0;
		const meter = new LaunchMeter(() => at);
		meter.accepted(1);
		meter.accepted(2);
		meter.accepted(3);
		expect(meter.state().backlog).toBe(3);
		at += 2;
		meter.launched(1);
		meter.dropped(2);
		// a repeat, or an execution never accepted, changes nothing
		meter.launched(1);
		meter.launched(9);
		expect(meter.state().backlog).toBe(1);
	});

	it("tells the best rate of late, not a stretch of one launch's latency", () => {
		let at = 0;
		const meter = new LaunchMeter(() => at);
		expect(meter.state().rate).toBe(0);
		// 20 accepted at once, one launched every 5 ms: 200/s
		for (let id = 1; id <= 20; id++) meter.accepted(id);
		for (let id = 1; id <= 20; id++) {
			at += 5;
			meter.launched(id);
		}
		expect(meter.state().rate).toBeCloseTo(200, 0);
		// then one at a time, 20 ms apart, each launched in 10 ms (a busy event loop): 100/s a
		// stretch, which says the latency, not the rate
		for (let id = 21; id <= 40; id++) {
			at += 10;
			meter.accepted(id);
			at += 10;
			meter.launched(id);
		}
		expect(meter.state().rate).toBeGreaterThan(190);
		// unbeaten for 10 s, it halves
		at += 10_000;
		expect(meter.state().rate).toBeCloseTo(200 / 2 ** (10_400 / 10_000), 0);
	});
});
