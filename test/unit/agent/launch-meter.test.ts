import { LaunchMeter } from "../../../lib/agent/launch-meter";

describe("LaunchMeter", () => {
	it("counts the executions accepted and not launched yet", () => {
		let at = 0;
		const meter = new LaunchMeter(() => at);
		meter.accepted(1);
		meter.accepted(2);
		meter.accepted(3);
		expect(meter.state().backlog).toBe(3);
		meter.launchAsked(1);
		at += 2;
		meter.launched(1);
		meter.dropped(2);
		// a repeat, or an execution never accepted, changes nothing
		meter.launched(1);
		meter.launchAsked(9);
		meter.launched(9);
		expect(meter.state().backlog).toBe(1);
	});

	it("measures the launcher's rate, not what it was given", () => {
		let at = 0;
		const meter = new LaunchMeter(() => at);
		expect(meter.state().rate).toBe(0);
		// 20 handed to the launcher at once, one launched every 5 ms: 200/s
		for (let id = 1; id <= 20; id++) {
			meter.accepted(id);
			meter.launchAsked(id);
		}
		for (let id = 1; id <= 20; id++) {
			at += 5;
			meter.launched(id);
		}
		expect(meter.state().rate).toBeCloseTo(200, 0);
		// then one at a time, 20 ms apart (staging inputs, say), each launched in 5 ms: still
		// 200/s, though the pipeline launched 50 a second
		for (let id = 21; id <= 40; id++) {
			meter.accepted(id);
			at += 15;
			meter.launchAsked(id);
			at += 5;
			meter.launched(id);
		}
		expect(meter.state().rate).toBeCloseTo(200, 0);
	});

	it("tells the best rate of late, not a stretch of one launch's latency", () => {
		let at = 0;
		const meter = new LaunchMeter(() => at);
		// 20 at once, launched over 10 ms: 2,000/s
		for (let id = 1; id <= 20; id++) {
			meter.accepted(id);
			meter.launchAsked(id);
		}
		at += 10;
		for (let id = 1; id <= 20; id++) meter.launched(id);
		expect(meter.state().rate).toBeCloseTo(2000, 0);
		// then one at a time, each 4 ms (a busy event loop): 250/s a stretch, not the rate
		for (let id = 21; id <= 40; id++) {
			meter.accepted(id);
			meter.launchAsked(id);
			at += 4;
			meter.launched(id);
		}
		expect(meter.state().rate).toBeGreaterThan(1900);
		// unbeaten for 10 s, it halves
		at += 10_000;
		expect(meter.state().rate).toBeCloseTo(2000 / 2 ** (10_080 / 10_000), -1);
	});
});
