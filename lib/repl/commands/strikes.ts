import { defineCommand } from "../command";
import { formatTable } from "../table";

const COUNTED = ["TRANSFERRING", "INGESTING", "INGESTED", "DUPLICATE", "DEFERRED", "ERRORED"];

/** `strikes`: each strike, its job, and its ingests by status. */
export default defineCommand({
	command: "strikes",
	description: "Strikes, their monitor job and their ingests by status",
	async run({ broker, print }) {
		const page: any = await broker.call("ingest.strikes", { page_size: "1000" });
		const rows = [];
		for (const s of page.results) {
			const counts = await Promise.all(
				COUNTED.map(
					async status =>
						(
							(await broker.call("ingest.list", {
								strike_id: String(s.id),
								status,
								page_size: "1"
							})) as any
						).count as number
				)
			);
			rows.push([s.id, s.name, s.job?.status ?? null, ...counts]);
		}
		print(formatTable(["id", "name", "job", ...COUNTED.map(c => c.toLowerCase())], rows));
	}
});
