import pg from "pg";
import { isoTimestamp, parseTimestamptz } from "../../../lib/db/timestamps";

const pgParse = pg.types.getTypeParser(1184, "text") as (text: string) => Date;

/** `n` timestamptz texts as PostgreSQL writes them to a UTC session, microseconds included. */
function randomUtcTexts(n: number): string[] {
	return Array.from({ length: n }, () => {
		const ms = Date.UTC(1990, 0, 1) + Math.floor(Math.random() * 60 * 365 * 86400000);
		const micros = String(Math.floor(Math.random() * 1000)).padStart(3, "0");
		const iso = new Date(ms).toISOString();
		return `${iso.slice(0, 10)} ${iso.slice(11, 23)}${micros}+00`;
	});
}

describe("parseTimestamptz", () => {
	it.each([
		"2026-11-24 09:05:50+00",
		"2026-11-24 09:05:50.5+00",
		"2026-11-24 09:05:50.06+00",
		"2026-11-24 09:05:50.069+00",
		"2026-11-24 09:05:50.0695+00",
		"2026-11-24 09:05:50.069553+00",
		"2026-11-24 09:05:50.999999+00",
		"1970-01-01 00:00:00+00",
		"2000-02-29 23:59:59.001+00",
		"0050-06-01 12:00:00+00"
	])("reads %s as pg does", text => {
		expect(parseTimestamptz(text).toISOString()).toBe(pgParse(text).toISOString());
	});

	it.each([
		"2026-11-24 09:05:50+05:30",
		"2026-11-24 09:05:50.123-08",
		"0044-03-15 12:00:00+00 BC",
		"12026-11-24 09:05:50+00"
	])("hands %s to pg's parser", text => {
		expect(parseTimestamptz(text).getTime()).toBe(pgParse(text).getTime());
	});

	it("passes infinity to pg's parser", () => {
		expect(parseTimestamptz("infinity")).toEqual(pgParse("infinity"));
	});

	it("agrees with pg over a spread of instants", () => {
		for (const text of randomUtcTexts(2000)) {
			expect(parseTimestamptz(text).getTime()).toBe(pgParse(text).getTime());
		}
	});
});

describe("isoTimestamp", () => {
	it.each([
		"2026-11-24 09:05:50+00",
		"2026-11-24 09:05:50.5+00",
		"2026-11-24 09:05:50.06+00",
		"2026-11-24 09:05:50.069553+00",
		"2026-11-24 09:05:50.999999+00",
		"1970-01-01 00:00:00+00",
		"0050-06-01 12:00:00+00",
		"2026-11-24 09:05:50+05:30",
		"2026-11-24 09:05:50.123-08",
		"0044-03-15 12:00:00+00 BC",
		"12026-11-24 09:05:50+00"
	])("writes %s as the Date pg reads would be written", text => {
		expect(isoTimestamp(text)).toBe(pgParse(text).toISOString());
	});

	it("answers what is no instant as it is", () => {
		expect(isoTimestamp("infinity")).toBe("infinity");
	});

	it("takes no text that only looks like a timestamp apart", () => {
		expect(isoTimestamp("2026-11-24 09:05:5x+00")).not.toBe("2026-11-24T09:05:5x.000Z");
		expect(isoTimestamp("2026-11-24 09:05:50.12a+00")).not.toMatch(/12a/);
	});

	it("agrees with pg over a spread of instants", () => {
		for (const text of randomUtcTexts(2000)) {
			expect(isoTimestamp(text)).toBe(pgParse(text).toISOString());
		}
	});
});
