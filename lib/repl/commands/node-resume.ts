import { positiveInt } from "../args";
import { defineCommand } from "../command";

/** `node-resume <id>`: the node takes work again. */
export default defineCommand({
	command: "node-resume <id>",
	description: "Resume a paused node",
	values: { operand: "node" },
	async run({ broker, print }, args) {
		const id = positiveInt("node id", args.id);
		const node: any = await broker.call("nodes.update", { id, is_paused: false });
		print(`node ${node.id} (${node.hostname}): ${node.is_paused ? "still paused" : "resumed"}`);
	}
});
