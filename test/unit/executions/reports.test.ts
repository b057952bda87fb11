import { emptyResult } from "../../../lib/executions/complete";
import type { FinishResult } from "../../../lib/executions/types";
import {
	announceReports,
	writeReportBatch,
	type ReportItem,
	type ReportNews
} from "../../../lib/executions/complete";

const finished = (jobExeId: number): ReportItem => ({
	kind: "finished",
	finished: { jobExeId, agentId: "a", status: "COMPLETED", exitCode: 0 } as any
});
const step = (jobExeId: number): ReportItem => ({
	kind: "step",
	step: { jobExeId, agentId: "a", step: "main", event: "started", at: "2022-01-01T00:00:00Z" }
});
const ended = (...ids: number[]): FinishResult => {
	const result = emptyResult();
	for (const id of ids) result.ended.add(id);
	return result;
};
const refused = () => Object.assign(new Error("value refused"), { code: "22P02" });
const deadlock = () => Object.assign(new Error("deadlock detected"), { code: "40P01" });

describe("writeReportBatch", () => {
	it("writes a batch in one go", async () => {
		const writes: ReportItem[][] = [];
		const { result, failed } = await writeReportBatch(
			[finished(1), finished(2)],
			async items => (writes.push(items), ended(1, 2)),
			() => {
				throw new Error("not called");
			}
		);
		expect(writes).toHaveLength(1);
		expect([...result.ended]).toEqual([1, 2]);
		expect(failed.size).toBe(0);
	});

	it("throws a transient failure, and the failure of a batch of one", async () => {
		await expect(
			writeReportBatch(
				[finished(1), finished(2)],
				() => Promise.reject(deadlock()),
				() => {}
			)
		).rejects.toMatchObject({ code: "40P01" });
		await expect(
			writeReportBatch(
				[finished(1)],
				() => Promise.reject(refused()),
				() => {}
			)
		).rejects.toMatchObject({ code: "22P02" });
	});

	it("writes each alone when the batch is refused; an unwritable end fails its execution instead", async () => {
		const unwritable: number[] = [];
		const writes: ReportItem[][] = [];
		const { result, failed } = await writeReportBatch(
			[finished(1), finished(2), step(3)],
			async items => {
				writes.push(items);
				if (items.length > 1) throw refused();
				const [item] = items;
				if (item.kind === "finished" && item.finished.jobExeId === 2) throw refused();
				if (item.kind === "step") throw refused();
				return ended(item.kind === "failure" ? item.failure.jobExeId : 1);
			},
			jobExeId => unwritable.push(jobExeId)
		);
		expect(unwritable).toEqual([2]);
		expect(writes.at(-1)).toEqual([
			{ kind: "failure", failure: { jobExeId: 2, errorName: "unknown" } }
		]);
		expect([...result.ended].sort()).toEqual([1, 2]);
		// the step stays failed (its caller is answered with the error); the end of 2 is written as a failure
		expect([...failed.keys()]).toEqual([2]);
	});
});

describe("announceReports", () => {
	/** What was said: log lines, events, wake-ups. */
	function listener() {
		const said = {
			info: [] as string[],
			warn: [] as string[],
			broadcast: [] as [string, unknown][],
			emit: [] as [string, unknown][],
			wakes: 0
		};
		const news: ReportNews = {
			info: (_fields, message) => said.info.push(message),
			warn: (_fields, message) => said.warn.push(message),
			broadcast: (event, payload) => said.broadcast.push([event, payload]),
			emit: (event, payload) => said.emit.push([event, payload]),
			wakeScheduler: () => void said.wakes++
		};
		return { news, said };
	}

	it("says nothing and wakes nobody for reports that changed nothing", () => {
		const { news, said } = listener();
		announceReports(emptyResult(), news);
		expect(said).toEqual({ info: [], warn: [], broadcast: [], emit: [], wakes: 0 });
	});

	it("logs each ended job, wakes the scheduler and announces what others act on", () => {
		const { news, said } = listener();
		const result = ended(1, 2, 3);
		result.completedJobs.push(10);
		result.failedJobs.push(20);
		result.requeuedJobs.push(30);
		result.recipeQueued.push(40, 41);
		result.parseEvents.push(7);
		result.pausedNodes.push(5);
		result.notes.push("job_exe 1: outputs refused");
		announceReports(result, news);
		expect(said.wakes).toBe(1);
		expect(said.info).toEqual([
			"job ended",
			"job ended",
			"job requeued (a new execution is queued)",
			"recipe job queued (its dependencies completed)",
			"recipe job queued (its dependencies completed)"
		]);
		expect(said.warn).toEqual([
			"job_exe 1: outputs refused",
			"nodes paused: too many system failures"
		]);
		expect(said.broadcast).toEqual([
			["trigger-events.created", { type: "PARSE", eventIds: [7] }],
			["nodes.changed", { nodeIds: [5] }]
		]);
		expect(said.emit).toEqual([["queue.changed", { count: 2 }]]);
	});
});
