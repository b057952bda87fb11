import { defineCommand } from "../command";

/** `scheduler-resume`: placement goes on. */
export default defineCommand({
	command: "scheduler-resume",
	description: "Resume the scheduler",
	async run({ broker, print }) {
		const s: any = await broker.call("scheduler.update", { is_paused: false });
		print(`scheduler: ${s.is_paused ? "paused" : "running"}`);
	}
});
