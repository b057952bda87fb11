/**
 * ns per timestamptz value: pg's own text parser beside lib/db/timestamps.ts, on the texts a UTC
 * session sends (with 0 to 6 fraction digits).
 *
 *   npm run build && node dist/bench/timestamp-parse.js
 */
import pg from "pg";
import { parseTimestamptz } from "../lib/db/timestamps";

const pgParse = pg.types.getTypeParser(1184, "text") as (text: string) => Date;
const texts = Array.from({ length: 1000 }, (_, i) => {
	const iso = new Date(Date.UTC(2026, 0, 1) + i * 7777777).toISOString();
	return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${
		i % 7
			? "." +
				String(i)
					.padStart(6, "0")
					.slice(0, i % 7)
			: ""
	}+00`;
});

function nsPerValue(parse: (text: string) => Date): number {
	let best = Infinity;
	for (let round = 0; round < 5; round++) {
		let sum = 0;
		const start = process.hrtime.bigint();
		for (let i = 0; i < 1000; i++) for (const text of texts) sum += parse(text).getTime() & 1;
		best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
		if (sum < 0) console.log(sum);
	}
	return best;
}

console.log(`pg's parser: ${nsPerValue(pgParse).toFixed(0)} ns per value`);
console.log(`parseTimestamptz: ${nsPerValue(parseTimestamptz).toFixed(0)} ns per value`);
