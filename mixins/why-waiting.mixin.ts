import type { ServiceSchema } from "moleculer";
import type { WhyWaiting } from "../lib/scheduling/waiting";

/** A queued job's reason, as the leading scheduler answers it. */
export type JobWaiting = WhyWaiting & { job_id: number; job_type_id: number };

/**
 * `this.askWhyWaiting({ jobIds } | { jobTypeIds })`: asks every scheduler replica
 * (`scheduler.waiting`); the leader answers from its last pass, the others say they do not lead.
 * Answers null when no leader answered (none leads, or it did not answer in a second): the
 * reason is then left out rather than guessed.
 */
export function WhyWaitingMixin(): Partial<ServiceSchema> {
	return {
		methods: {
			async askWhyWaiting(which: {
				jobIds?: number[];
				jobTypeIds?: number[];
			}): Promise<JobWaiting[] | null> {
				const list = (this.broker.registry as any).getActionEndpoints("scheduler.waiting");
				const nodeIDs: string[] = (list?.endpoints ?? [])
					.filter((e: any) => e.isAvailable)
					.map((e: any) => e.id);
				const answers = await Promise.all(
					nodeIDs.map(nodeID =>
						this.broker
							.call("scheduler.waiting", which, { nodeID, timeout: 1000, retries: 0 })
							.catch(() => null)
					)
				);
				const led = answers.find((a: any) => a?.leader === true) as
					{ jobs: JobWaiting[] } | undefined;
				return led ? led.jobs : null;
			}
		}
	};
}
