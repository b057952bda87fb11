import { emptyResult, type FinishResult } from "../../../lib/scheduling/finish";
import { writeReportBatch, type ReportItem } from "../../../lib/scheduling/reports";

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
