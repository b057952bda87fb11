import { defineCommand } from "../command";
import { formatTable } from "../table";
import { when } from "../age";

const round = (n: number) => Math.round(n * 100) / 100;
/** "1.5 / 4": free of offered */
const share = (free: number, offered: number) => `${round(free)} / ${round(offered)}`;

/**
 * `node-status` (moleculer-repl has `nodes`, the Moleculer nodes): the active nodes with their
 * agent's node id, state (online, paused, draining: `shutdown` when its agent is stopping, lost),
 * the whole pause reason, the last heartbeat, resources free of offered, and what runs on them.
 */
export default defineCommand({
	command: "node-status",
	description:
		"Active nodes: agent, state (online, paused and why, draining, lost), heartbeat, resources free/offered, running executions",
	options: [{ option: "--timestamps", description: "times as timestamps rather than ages" }],
	async run({ broker, print }, args) {
		const stamps = args.options?.timestamps === true;
		const page: any = await broker.call("nodes.status", { page_size: "1000" });
		print(
			formatTable(
				[
					"id",
					"hostname",
					"agent",
					"state",
					"reason",
					"heartbeat",
					"cpus free",
					"mem MiB free",
					"disk MiB free",
					"running"
				],
				page.results.map((s: any) => {
					const state =
						s.state === "draining" && s.node.drain_by === "agent"
							? "draining (shutdown)"
							: s.state;
					const r = s.resources;
					return [
						s.node.id,
						s.node.hostname,
						s.node.agent_id,
						state,
						s.node.pause_reason,
						when(s.node.last_heartbeat, stamps),
						r ? share(r.free.cpus, r.offered.cpus) : null,
						r ? share(r.free.mem, r.offered.mem) : null,
						r ? share(r.free.disk, r.offered.disk) : null,
						(s.job_exes_running ?? []).length
					];
				})
			)
		);
	}
});
