import { msUntilNextMinute } from "../../../lib/queue/load";

describe("msUntilNextMinute", () => {
	it("counts to the start of the next minute", () => {
		const minute = Date.UTC(2024, 0, 1, 12, 30);
		expect(msUntilNextMinute(minute)).toBe(60000);
		expect(msUntilNextMinute(minute + 1)).toBe(59999);
		expect(msUntilNextMinute(minute + 59999)).toBe(1);
	});
});
