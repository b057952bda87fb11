import { day } from "../args";
import { defineCommand } from "../command";
import { formatTable } from "../table";

/** `metrics-day <YYYY-MM-DD>`: computes (again) the daily metrics of a UTC day. */
export default defineCommand({
	command: "metrics-day <day>",
	description:
		"Compute the daily metrics of a UTC day (YYYY-MM-DD); running it twice is harmless",
	async run({ broker, print }, args) {
		const d = day("day", args.day);
		const rows: any = await broker.call("metrics.compute", { day: d });
		print(`daily metrics of ${d}:`);
		print(formatTable(["table", "rows"], Object.entries(rows ?? {})));
	}
});
