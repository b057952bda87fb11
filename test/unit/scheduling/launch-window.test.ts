import { LaunchWindows } from "../../../lib/scheduling/launch-window";

const options = { windowMs: 50, minimum: 2, holdMs: 10_000 };

/** A clock the test moves by hand. */
function clock() {
	let at = 1000;
	return { now: () => at, advance: (ms: number) => (at += ms) };
}

/** A window for agent "a" that has told this rate and backlog after `placed` placements. */
function toldAt(rate: number, backlog: number, placed: number) {
	const c = clock();
	const windows = new LaunchWindows(options, c.now);
	windows.told("a", { rate, backlog }, windows.placed("a", placed));
	return { c, windows };
}

describe("LaunchWindows", () => {
	it("has no window for an agent that has not told its launch rate", () => {
		const c = clock();
		const windows = new LaunchWindows(options, c.now);
		expect(windows.room("a")).toBe(Infinity);
		const token = windows.placed("a", 200);
		windows.told("a", { rate: 0, backlog: 150 }, token);
		expect(windows.room("a")).toBe(Infinity);
		windows.told("a", undefined, token);
		expect(windows.room("a")).toBe(Infinity);
		expect(windows.reopensIn(["a"])).toBeNull();
	});

	it("gives an agent 50 ms of its launches, less what it has not launched yet", () => {
		// 200 launches a second: 10 in a window; 4 of the 10 still to launch
		const { c, windows } = toldAt(200, 4, 10);
		expect(windows.room("a")).toBe(6);
		windows.placed("a", 6);
		expect(windows.room("a")).toBe(0);
		// one launch every 5 ms: after 5 ms, room for one
		c.advance(5);
		expect(windows.room("a")).toBe(1);
		c.advance(45);
		expect(windows.room("a")).toBe(10);
		// not more than a window, however long it idled
		c.advance(1000);
		expect(windows.room("a")).toBe(10);
	});

	it("counts what was placed after the answered call as in flight", () => {
		const c = clock();
		const windows = new LaunchWindows(options, c.now);
		const first = windows.placedOn(["a", "b", "a", "a", "a", "a"]).get("a")!;
		windows.placed("a", 3);
		// the first call's answer: its 5 accepted, none launched; the 3 after it are on their way
		windows.told("a", { rate: 200, backlog: 5 }, first);
		expect(windows.room("a")).toBe(2);
	});

	it("follows the rate the agent tells, up or down", () => {
		const c = clock();
		const windows = new LaunchWindows(options, c.now);
		let token = windows.placed("a", 1);
		windows.told("a", { rate: 2000, backlog: 0 }, token);
		expect(windows.room("a")).toBe(100);
		token = windows.placed("a", 100);
		windows.told("a", { rate: 170, backlog: 100 }, token);
		// 100 to launch at 170/s: ~588 ms; nothing more until it is under a window
		expect(windows.room("a")).toBe(0);
		const reopens = windows.reopensIn(["a", "b"])!;
		expect(reopens).toBeGreaterThan(500);
		expect(reopens).toBeLessThan(580);
		// it wakes the scheduler once half the window is free: 4 of 8.5
		c.advance(reopens);
		expect(windows.room("a")).toBe(4);
	});

	it("lets a slow launcher (a container engine) have the minimum at once", () => {
		// 4 launches a second: a window holds 0.2 of one
		const { c, windows } = toldAt(4, 0, 1);
		expect(windows.room("a")).toBe(2);
		windows.placed("a", 2);
		expect(windows.room("a")).toBe(0);
		// one launched (250 ms): room for one again
		expect(windows.reopensIn(["a"])).toBe(250);
		c.advance(250);
		expect(windows.room("a")).toBe(1);
	});

	it("holds room for the jobs a running execution will free until its report", () => {
		// 200 launches a second: 10 in a window, all launched
		const { c, windows } = toldAt(200, 0, 2);
		expect(windows.room("a")).toBe(10);
		// a recipe's A whose end queues B and C: one launch, two held
		windows.placed("a", 1);
		windows.hold("a", 42, 2);
		expect(windows.room("a")).toBe(7);
		// launched: its own launch is gone, the two stay held while it runs
		c.advance(5);
		expect(windows.room("a")).toBe(8);
		c.advance(1000);
		expect(windows.room("a")).toBe(8);
		// held alone: the window reopens when the first hold lapses (42's, 1,005 ms ago), not at once
		windows.hold("a", 43, 8);
		expect(windows.room("a")).toBe(0);
		expect(windows.reopensIn(["a"])).toBe(10_000 - 1005);
		// their reports are recorded: B and C find the room
		windows.release([42, 43]);
		expect(windows.room("a")).toBe(10);
		// a second hold of the same execution, or of none, holds nothing
		windows.hold("a", 44, 3);
		windows.hold("a", 44, 3);
		windows.hold("a", 45, 0);
		expect(windows.room("a")).toBe(7);
	});

	it("lets a hold lapse when its report does not come in time (a long run, or the agent lost)", () => {
		const { c, windows } = toldAt(200, 0, 1);
		windows.hold("a", 7, 4);
		expect(windows.room("a")).toBe(6);
		c.advance(10_000);
		expect(windows.room("a")).toBe(10);
		// no hold on an agent that has no window
		windows.hold("b", 8, 4);
		expect(windows.room("b")).toBe(Infinity);
	});

	it("forgets an agent that left", () => {
		const { windows } = toldAt(100, 50, 50);
		expect(windows.room("a")).toBe(0);
		windows.forget("a");
		expect(windows.room("a")).toBe(Infinity);
	});
});
