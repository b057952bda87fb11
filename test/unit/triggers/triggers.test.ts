import { CLOCK_PROCESSORS } from "../../../lib/clock/processors";
import { dueMetricsDays, PROCESSORS } from "../../../lib/triggers/clock";
import { matchesCondition } from "../../../lib/triggers/process";

describe("matchesCondition", () => {
	const file = { media_type: "image/png", data_type: ["a", "b"] };

	it("matches every file without a condition", () => {
		expect(matchesCondition({ media_type: "", data_types: [] }, file)).toBe(true);
	});

	it("wants the media type exactly, when the rule names one", () => {
		expect(matchesCondition({ media_type: "image/png", data_types: [] }, file)).toBe(true);
		expect(matchesCondition({ media_type: "image/jpeg", data_types: [] }, file)).toBe(false);
	});

	it("wants every data type listed", () => {
		expect(matchesCondition({ media_type: "", data_types: ["b", "a"] }, file)).toBe(true);
		expect(matchesCondition({ media_type: "", data_types: ["a", "c"] }, file)).toBe(false);
	});
});

describe("dueMetricsDays", () => {
	it("is yesterday the first time", () => {
		expect(dueMetricsDays(null, new Date("2026-11-24T00:00:30Z"))).toEqual(["2026-11-23"]);
	});

	it("is each day from the previous tick's up to yesterday, days missed included", () => {
		expect(
			dueMetricsDays(new Date("2026-11-20T00:00:10Z"), new Date("2026-11-24T00:00:30Z"))
		).toEqual(["2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"]);
		expect(
			dueMetricsDays(new Date("2026-11-24T00:00:10Z"), new Date("2026-11-24T10:00:00Z"))
		).toEqual([]);
	});
});

it("registers a processor for every clock rule name a rule may take", () => {
	expect(Object.keys(PROCESSORS).sort()).toEqual([...CLOCK_PROCESSORS].sort());
});
