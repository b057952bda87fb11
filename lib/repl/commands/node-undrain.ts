import { positiveInt } from "../args";
import { defineCommand } from "../command";

/** `node-undrain <id>`: PATCH /nodes/{id}/ {"is_draining": false}: the node takes work again. */
export default defineCommand({
	command: "node-undrain <id>",
	description: "End a node's drain: it takes work again",
	values: { operand: "node" },
	async run({ broker, print }, args) {
		const id = positiveInt("node id", args.id);
		const node: any = await broker.call("nodes.update", { id, is_draining: false });
		print(
			`node ${node.id} (${node.hostname}): ${node.is_draining ? "still draining" : "no longer draining"}`
		);
	}
});
