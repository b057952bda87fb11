import { positiveInt } from "../args";
import { defineCommand } from "../command";

/** `node-pause <id> [reason...]`: no new work is placed on the node. */
export default defineCommand({
	command: "node-pause <id> [reason...]",
	description: "Pause a node: nothing new is placed on it (running work goes on)",
	values: { operand: "node" },
	async run({ broker, print }, args) {
		const id = positiveInt("node id", args.id);
		const reason = Array.isArray(args.reason) ? args.reason.join(" ") : args.reason;
		const node: any = await broker.call("nodes.update", {
			id,
			is_paused: true,
			pause_reason: reason ? String(reason) : "paused from the REPL"
		});
		print(`node ${node.id} (${node.hostname}): paused: ${node.pause_reason}`);
	}
});
