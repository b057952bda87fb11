import {
	Iso8601Error,
	formatDatetime,
	parseDatetime,
	parseDuration
} from "../../lib/validation/schema";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function problemOf(parse: () => unknown): string {
	try {
		parse();
	} catch (error) {
		expect(error).toBeInstanceOf(Iso8601Error);
		return (error as Iso8601Error).problem;
	}
	throw new Error("expected an Iso8601Error");
}

describe("parseDatetime", () => {
	it.each([
		["2015-10-05T21:26:04Z", "2015-10-05T21:26:04.000Z"],
		["2015-10-05T21:26:04.876Z", "2015-10-05T21:26:04.876Z"],
		["2015-10-05T21:26:04,876Z", "2015-10-05T21:26:04.876Z"],
		["2015-10-05T21:26:04.8Z", "2015-10-05T21:26:04.800Z"],
		["2015-10-05T21:26:04.876543Z", "2015-10-05T21:26:04.876Z"],
		["2015-10-05T21:26Z", "2015-10-05T21:26:00.000Z"],
		["2015-10-05T21:26:04+05:00", "2015-10-05T16:26:04.000Z"],
		["2015-10-05T21:26:04+0530", "2015-10-05T15:56:04.000Z"],
		["2015-10-05T01:00:00-02:30", "2015-10-05T03:30:00.000Z"],
		["2015-10-05T00:00:00-00:00", "2015-10-05T00:00:00.000Z"],
		["2016-02-29T00:00:00Z", "2016-02-29T00:00:00.000Z"],
		["0050-01-01T00:00:00Z", "0050-01-01T00:00:00.000Z"]
	])("parses %s", (text, iso) => {
		expect(parseDatetime(text).toISOString()).toBe(iso);
	});

	it.each(["2015-01-01T00:00:00", "2015-01-01T00:00", "2015-01-01T00:00:00.123", "2015-01-01"])(
		"rejects %s, which has no timezone",
		text => {
			expect(problemOf(() => parseDatetime(text))).toBe("has no timezone");
		}
	);

	it("puts the text and problem in the message", () => {
		expect(() => parseDatetime("2015-01-01T00:00:00")).toThrow(
			'"2015-01-01T00:00:00" has no timezone'
		);
	});

	it("explains an offset whose + was decoded to a space", () => {
		expect(problemOf(() => parseDatetime("2015-01-01T00:00:00 05:00"))).toMatch(/%2B/);
	});

	it.each([
		"",
		"garbage",
		"yesterday",
		"2015-1-1T00:00:00Z",
		"20150101T000000Z",
		"2015-01-01 00:00:00Z",
		"2015-01-01t00:00:00z",
		"2015-01-01T00:00:00+05",
		"2015-01-01T00:00:00.Z",
		"2015-01-01T00:00:00ZZ",
		" 2015-01-01T00:00:00Z",
		"1443907200",
		"2015-W01-1T00:00:00Z",
		"2015-001T00:00:00Z",
		"21:26:04Z"
	])("rejects %j as not a datetime", text => {
		expect(problemOf(() => parseDatetime(text))).toBe("is not an ISO-8601 datetime");
	});

	it.each([
		"2015-02-29T00:00:00Z",
		"2015-02-30T00:00:00Z",
		"2015-13-01T00:00:00Z",
		"2015-00-01T00:00:00Z",
		"2015-01-00T00:00:00Z",
		"2015-01-01T24:00:00Z",
		"2015-01-01T23:60:00Z",
		"2015-01-01T23:59:60Z",
		"2015-01-01T00:00:00+24:00",
		"2015-01-01T00:00:00+05:60"
	])("rejects %s, which is out of range", text => {
		expect(problemOf(() => parseDatetime(text))).toBe("is not a valid date and time");
	});
});

describe("parseDuration", () => {
	it.each([
		["PT3H", 3 * HOUR],
		["PT3H0M0S", 3 * HOUR],
		["PT0S", 0],
		["PT90M", 90 * 60_000],
		["PT1.5S", 1500],
		["PT0,25S", 250],
		["P1D", DAY],
		["P1W", 7 * DAY],
		["P1M", 30 * DAY],
		["P1Y", 365 * DAY],
		["P1DT12H", 36 * HOUR],
		["P1Y2M3DT4H5M6.5S", (365 + 60 + 3) * DAY + 4 * HOUR + 5 * 60_000 + 6500],
		["P0,5D", 12 * HOUR],
		["P1.5Y", 1.5 * 365 * DAY]
	])("parses %s", (text, ms) => {
		expect(parseDuration(text)).toBe(ms);
	});

	it.each([
		"",
		"P",
		"PT",
		"P1DT",
		"T3H",
		"PT3",
		"3H",
		"-PT3H",
		"PT-3H",
		"P1H",
		"PT1D",
		"pt3h",
		"PT3H4H",
		"P1S2M"
	])("rejects %j", text => {
		expect(problemOf(() => parseDuration(text))).toBe("is not an ISO-8601 duration");
	});

	it("rejects a duration longer than any date range", () => {
		expect(problemOf(() => parseDuration("P99999999999Y"))).toBe("is too long a duration");
	});

	it("answers a duration read before the same, and refuses a bad one every time", () => {
		for (let i = 0; i < 3; i++) {
			expect(parseDuration("P7D")).toBe(7 * DAY);
			expect(parseDuration("PT3H")).toBe(3 * HOUR);
			expect(problemOf(() => parseDuration("PT3"))).toBe("is not an ISO-8601 duration");
		}
		// more texts than are kept: each still read right
		for (let n = 1; n <= 600; n++) expect(parseDuration(`PT${n}S`)).toBe(n * 1000);
		expect(parseDuration("P7D")).toBe(7 * DAY);
	});
});

describe("formatDatetime", () => {
	it("gives UTC with milliseconds and Z", () => {
		expect(formatDatetime(new Date(Date.UTC(2015, 9, 5, 21, 26, 4, 876)))).toBe(
			"2015-10-05T21:26:04.876Z"
		);
	});

	it("pads zero milliseconds", () => {
		expect(formatDatetime(new Date("2015-10-05T16:26:04+05:00"))).toBe(
			"2015-10-05T11:26:04.000Z"
		);
	});

	it("round-trips through parseDatetime", () => {
		const text = "2020-02-29T23:59:59.999Z";
		expect(formatDatetime(parseDatetime(text))).toBe(text);
	});
});
