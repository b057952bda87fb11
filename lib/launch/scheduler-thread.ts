import path from "path";
import { Worker, type MessagePort } from "worker_threads";
import type { Config } from "./config";

/**
 * With SCHEDULER_THREAD=true, `npm start` runs the scheduler (agents' reports, completions,
 * recipes advanced, the passes that place queued jobs) in a worker thread of its own, a Moleculer
 * node beside the process's main one over a ThreadTransporter: its transactions and passes no
 * longer wait their turn on the event loop that serves the API. See docs/decisions.md, "The
 * scheduler in a thread of its own".
 */

/** What the main thread tells the scheduler thread at its start. */
export interface SchedulerThreadData {
	/** the thread's broker's nodeID */
	nodeID: string;
	/** the thread's end of the MessageChannel the two brokers' ThreadTransporters share */
	port: MessagePort;
	databaseUrl: string;
	config: Config;
}

/**
 * Whether the scheduler gets a thread of its own: SCHEDULER_THREAD is on and the process runs the
 * scheduler among other services, not in a cluster (TRANSPORTER set: there it runs where
 * SERVICES puts it).
 */
export function wantsSchedulerThread(config: Config): boolean {
	return (
		config.schedulerThread &&
		config.transporter === null &&
		config.services.includes("scheduler") &&
		config.services.length > 1
	);
}

/** The configuration of the main thread's broker and of the scheduler thread's. */
export function splitForSchedulerThread(config: Config): { main: Config; thread: Config } {
	return {
		main: { ...config, services: config.services.filter(s => s !== "scheduler") },
		thread: {
			...config,
			services: ["scheduler"],
			// the thread is a node of its own: its metrics beside the main thread's
			metricsPort: config.metricsPort === null ? null : config.metricsPort + 1
		}
	};
}

export interface SchedulerThread {
	/** stops the thread's broker (its reports written) and waits for the thread to end */
	stop(): Promise<void>;
}

/**
 * Starts the scheduler thread and resolves once its broker has started. `onFailure` is called if
 * it ends, or fails, on its own afterwards.
 */
export function startSchedulerThread(
	data: SchedulerThreadData,
	onFailure: (reason: string) => void
): Promise<SchedulerThread> {
	// dist/bin/scheduler-thread.js beside dist/lib/: the thread runs compiled code, as npm start
	const worker = new Worker(path.join(__dirname, "..", "..", "bin", "scheduler-thread.js"), {
		workerData: data,
		transferList: [data.port]
	});
	let started = false;
	let stopping = false;
	const ended = new Promise<void>(resolve => worker.once("exit", () => resolve()));
	return new Promise((resolve, reject) => {
		worker.once("message", (message: { started?: boolean; error?: string }) => {
			if (!message.started) return reject(new Error(`scheduler thread: ${message.error}`));
			started = true;
			resolve({
				async stop() {
					stopping = true;
					worker.postMessage("stop");
					await ended;
				}
			});
		});
		// before it has started, the start fails; after, the process is told
		worker.on("error", error => {
			if (!started) reject(error);
			else if (!stopping) onFailure(`the scheduler thread failed: ${error.stack ?? error}`);
		});
		worker.once("exit", code => {
			if (!started)
				reject(new Error(`the scheduler thread ended (code ${code}) before it started`));
			else if (!stopping) onFailure(`the scheduler thread ended (code ${code})`);
		});
	});
}
