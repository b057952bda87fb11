import { Errors } from "moleculer";
import {
	callGroups,
	type ExecutionFinished,
	type ExecutionStep
} from "../documents/agent-protocol";

/** What the reporter needs of the node agent service that owns it. */
export interface ReporterLink {
	/** a call to the control plane (with the service's timeout) */
	call(action: string, params: Record<string, unknown>): Promise<unknown>;
	/** whether any node runs the service now */
	serviceRuns(name: string): boolean;
	/** logs a problem once a minute at most per key */
	warnOnce(key: string, message: string): void;
	info(fields: Record<string, unknown>, message: string): void;
	error(message: string): void;
	/** waits `ms`, or less when the service stops */
	pause(ms: number): Promise<void>;
	stopping(): boolean;
	/** how often an undelivered report is sent again */
	finishRetryMs: number;
}

/** Errors worth retrying: no peer, a timeout, a server-side failure; not a refusal (4xx). */
function isRetryable(error: any): boolean {
	if (error?.retryable) return true;
	const code = Number(error?.code);
	return !(code >= 400 && code < 500);
}

/**
 * The agent's reports to the `scheduler` service (see services/node-agent.service.ts): the steps
 * of running executions, best effort, and the ends of executions, gathered per turn of the event
 * loop and sent until the control plane answers, so a result survives a control-plane restart.
 */
export class ExecutionReporter {
	/** reports gathered in this turn of the event loop, sent together at its end */
	private finishing: { report: ExecutionFinished; sent: () => void }[] = [];

	constructor(private readonly link: ReporterLink) {}

	/** Reports steps, best effort: a failure is logged (once a minute at most), not retried. */
	async sendSteps(steps: ExecutionStep[]): Promise<void> {
		try {
			if (!this.link.serviceRuns("scheduler"))
				throw new Error("no scheduler service answers");
			await this.link.call("scheduler.exeSteps", { steps });
		} catch (error: any) {
			this.link.warnOnce(
				"step",
				`${steps.length} step events were not reported (best effort): ${error?.message ?? error}`
			);
		}
	}

	/**
	 * Reports an execution's end, with the others that end in the same turn of the event loop
	 * (a launcher tells of several exits at once), in one call (several where their JSON
	 * would make too large a message: callGroups); resolves once it is delivered.
	 * Calls do not wait for each other: a call waits for the transaction that records its
	 * reports, and the next ones go meanwhile.
	 */
	finish(report: ExecutionFinished): Promise<void> {
		return new Promise(sent => {
			if (this.finishing.length === 0)
				setImmediate(() => {
					const gathered = this.finishing;
					this.finishing = [];
					for (const group of callGroups(gathered, g => g.report))
						void this.deliver(group.map(g => g.report)).finally(() =>
							group.forEach(g => g.sent())
						);
				});
			this.finishing.push({ report, sent });
		});
	}

	/**
	 * Calls scheduler.exeFinished with the reports gathered together until it answers (or the
	 * service stops). Refused (a 4xx), several reports are sent again one by one, so one
	 * that is refused does not take the others with it.
	 */
	private async deliver(reports: ExecutionFinished[]): Promise<void> {
		while (!this.link.stopping()) {
			try {
				if (!this.link.serviceRuns("scheduler"))
					throw new Errors.ServiceNotFoundError({ action: "scheduler.exeFinished" });
				await this.link.call("scheduler.exeFinished", { reports });
				for (const report of reports)
					this.link.info(
						{
							jobExeId: report.jobExeId,
							status: report.status,
							exitCode: report.exitCode,
							errorName: report.errorName ?? null,
							...(report.errorDetail ? { errorDetail: report.errorDetail } : {})
						},
						"execution ended"
					);
				break;
			} catch (error: any) {
				if (!isRetryable(error)) {
					if (reports.length > 1) {
						for (const report of reports) await this.deliver([report]);
						break;
					}
					this.link.error(
						`execution ${reports[0].jobExeId}: the scheduler refused its result (${error?.message ?? error}); not retried`
					);
					break;
				}
				this.link.warnOnce(
					"finished",
					`execution${reports.length > 1 ? "s" : ""} ${reports.map(r => r.jobExeId).join(", ")}: reporting the end failed (retrying every ${this.link.finishRetryMs / 1000} s): ${error?.message ?? error}`
				);
			}
			await this.link.pause(this.link.finishRetryMs);
		}
	}
}
