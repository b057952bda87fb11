import { ExecutionMemory } from "../../../lib/agent/execution-memory";

describe("ExecutionMemory", () => {
	afterEach(() => jest.useRealTimers());

	it("keeps a cancel that came before its run until it is taken or expires", () => {
		jest.useFakeTimers({ now: 1_000_000 });
		const memory = new ExecutionMemory(60_000);
		memory.rememberCancel(7);
		memory.rememberCancel(8);
		expect(memory.takeEarlyCancel(7)).toBe(true);
		// used up
		expect(memory.takeEarlyCancel(7)).toBe(false);
		jest.setSystemTime(1_000_000 + 60_001);
		expect(memory.takeEarlyCancel(8)).toBe(false);
		expect(memory.takeEarlyCancel(9)).toBe(false);
	});

	it("forgets the oldest finished ids beyond 10,000", () => {
		const memory = new ExecutionMemory(60_000);
		for (let id = 1; id <= 10_001; id++) memory.finish(id);
		expect([memory.finished(1), memory.finished(2), memory.finished(10_001)]).toEqual([
			false,
			true,
			true
		]);
	});
});
