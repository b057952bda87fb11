import { defineCommand } from "../command";

/** `scheduler-pause`: nothing new is placed anywhere. */
export default defineCommand({
	command: "scheduler-pause",
	description: "Pause the scheduler: nothing new is placed (running work goes on)",
	async run({ broker, print }) {
		const s: any = await broker.call("scheduler.update", { is_paused: true });
		print(`scheduler: ${s.is_paused ? "paused" : "running"}`);
	}
});
