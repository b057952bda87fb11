import { defineCommand } from "../command";
import { formatTable } from "../table";

/**
 * `node-status` (moleculer-repl has `nodes`, the Moleculer nodes): the active nodes, online or
 * not, paused or not, draining or not (`shutdown`: its agent is stopping; `user`: node-drain or
 * the API), and what runs on them.
 */
export default defineCommand({
	command: "node-status",
	description: "Active nodes: online, paused (and why), draining, running executions",
	async run({ broker, print }) {
		const page: any = await broker.call("nodes.status", { page_size: "1000" });
		print(
			formatTable(
				["id", "hostname", "online", "paused", "reason", "draining", "running"],
				page.results.map((s: any) => [
					s.node.id,
					s.node.hostname,
					s.is_online ? "yes" : "no",
					s.node.is_paused ? "yes" : "no",
					s.node.pause_reason,
					!s.node.is_draining
						? "no"
						: s.node.drain_by === "agent"
							? "yes (shutdown)"
							: "yes (user)",
					(s.job_exes_running ?? []).length
				])
			)
		);
	}
});
