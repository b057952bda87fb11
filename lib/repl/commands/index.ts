import type { ReplCommand } from "../command";
import cancel from "./cancel";
import job from "./job";
import jobs from "./jobs";
import logs from "./logs";
import metricsDay from "./metrics-day";
import nodeDrain from "./node-drain";
import nodePause from "./node-pause";
import nodeResume from "./node-resume";
import nodeStatus from "./node-status";
import nodeUndrain from "./node-undrain";
import queue from "./queue";
import requeue from "./requeue";
import schedulerPause from "./scheduler-pause";
import schedulerResume from "./scheduler-resume";
import strikes from "./strikes";
import why from "./why";

/** The operators' commands, added to moleculer-repl's own. */
export const COMMANDS: ReplCommand[] = [
	queue,
	jobs,
	job,
	why,
	cancel,
	requeue,
	nodeStatus,
	nodePause,
	nodeResume,
	nodeDrain,
	nodeUndrain,
	schedulerPause,
	schedulerResume,
	logs,
	strikes,
	metricsDay
];
