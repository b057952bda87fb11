import { positiveInt } from "../args";
import { defineCommand } from "../command";

/** `node-drain <id>`: PATCH /nodes/{id}/ {"is_draining": true}, from the REPL. */
export default defineCommand({
	command: "node-drain <id>",
	description:
		"Drain a node: nothing new is placed on it, its running executions get the agent's AGENT_DRAIN_S to end, then are stopped and queued again (the agent keeps running)",
	values: { operand: "node" },
	async run({ broker, print }, args) {
		const id = positiveInt("node id", args.id);
		const node: any = await broker.call("nodes.update", { id, is_draining: true });
		print(`node ${node.id} (${node.hostname}): draining since ${node.draining_since}`);
	}
});
