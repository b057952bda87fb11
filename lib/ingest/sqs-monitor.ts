import { createdObjects, SqsQueue, type QueueMessage, type SqsPlace } from "../storage/sqs";
import { isRefusal, type MonitorCall } from "./protocol";

/**
 * An S3 strike's monitor (configuration 2.0), on the agent that runs the strike's job: it reads
 * the bucket's object-created notifications from the SQS queue, sends the objects they name to
 * `ingest.s3Objects`, and deletes the messages only once that has answered, so a message whose
 * objects were not recorded (this agent died, the control plane failed) comes back when its
 * visibility timeout ends, and the service, which records each object once, makes no second
 * ingest of it.
 */

export interface SqsMonitorLink {
	call<T>(action: string, params: Record<string, unknown>): Promise<T>;
	info(message: string): void;
	warn(message: string): void;
}

/** Long polling: a receive waits this long for a message (and a stop waits at most this). */
const WAIT_S = 2;
/**
 * Receives under way at once: a receive answers at most 10 messages, and each batch waits for
 * its record before its delete, so one loop alone leaves the queue and the service idle by turns.
 */
const CONSUMERS = 4;
/** Objects per call to the service (its batch limit). */
const OBJECTS_PER_CALL = 500;

/** Runs until `signal` aborts (answers 0) or the control plane refuses it (answers 1). */
export async function runSqsMonitor(
	task: MonitorCall,
	place: SqsPlace,
	link: SqsMonitorLink,
	signal: AbortSignal,
	retryMs: number
): Promise<number> {
	const queue = new SqsQueue(place);
	const pause = () =>
		new Promise<void>(resolve => {
			const timer = setTimeout(resolve, retryMs);
			signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), {
				once: true
			});
		});
	link.info(`strike ${task.strikeId}: reading the notifications of SQS queue ${place.queueName}`);
	let refused = false;
	const consume = async () => {
		while (!signal.aborted && !refused) {
			let messages: QueueMessage[];
			try {
				messages = await queue.receive(WAIT_S, signal);
			} catch (error) {
				if (signal.aborted) break;
				link.warn(
					`strike ${task.strikeId}: receiving from ${place.queueName} failed (tried again): ${(error as Error).message}`
				);
				await pause();
				continue;
			}
			if (messages.length === 0) continue;
			const objects = messages.flatMap(m => createdObjects(m.body));
			try {
				for (let i = 0; i < objects.length; i += OBJECTS_PER_CALL)
					await link.call("ingest.s3Objects", {
						...task,
						objects: objects.slice(i, i + OBJECTS_PER_CALL)
					});
			} catch (error) {
				if (isRefusal(error)) {
					link.warn(
						`strike ${task.strikeId}: the control plane refused this monitor (${(error as Error).message}); stopping`
					);
					refused = true;
					return;
				}
				link.warn(
					`strike ${task.strikeId}: ingest.s3Objects failed (the messages come back): ${(error as Error).message}`
				);
				await pause();
				continue;
			}
			// recorded: the messages (test events and others naming no object too) are done
			await queue
				.delete(messages)
				.catch(error =>
					link.warn(
						`strike ${task.strikeId}: deleting messages failed (their objects are recorded once): ${(error as Error).message}`
					)
				);
		}
	};
	try {
		await Promise.all(Array.from({ length: CONSUMERS }, consume));
		return refused ? 1 : 0;
	} finally {
		queue.destroy();
		link.info(`strike ${task.strikeId}: monitor stopped`);
	}
}
