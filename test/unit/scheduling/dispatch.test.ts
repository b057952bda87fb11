import type { ExecutionSpec } from "../../../lib/documents/agent-protocol";
import type { PlacedExe } from "../../../lib/executions/types";
import { dispatchPlaced, type DispatchLink } from "../../../lib/scheduling/dispatch";
import { ERRORS } from "../../../lib/executions/failure";
import type { FailureRequest } from "../../../lib/executions/types";

const placed = (id: number, agentId: string) =>
	({ id, job_id: id * 10, node_id: 1, agent_id: agentId }) as PlacedExe;

/** A link that records what dispatching did; `run` answers as `runs` says per agent. */
function recorder(runs: Record<string, () => Promise<unknown>> = {}) {
	const seen = {
		runs: [] as { agentId: string; ids: number[] }[],
		failed: [] as FailureRequest[],
		canceled: [] as { jobExeId: number; agentId: string }[],
		setAside: [] as string[],
		warned: 0
	};
	const link: DispatchLink = {
		buildSpecs: async list => list.map(e => ({ jobExeId: e.id }) as unknown as ExecutionSpec),
		run: (agentId, executions) => {
			seen.runs.push({ agentId, ids: executions.map(s => (s as any).jobExeId) });
			return (runs[agentId] ?? (async () => ({ ok: true })))();
		},
		fail: failure => seen.failed.push(failure),
		cancelOnAgent: (jobExeId, agentId) => seen.canceled.push({ jobExeId, agentId }),
		setAside: agentId => seen.setAside.push(agentId),
		info: () => undefined,
		warn: () => void seen.warned++,
		error: () => undefined
	};
	return { link, seen };
}

const settle = () => new Promise(resolve => setImmediate(resolve));

describe("dispatchPlaced", () => {
	it("calls each agent once with the executions placed on it, in order", async () => {
		const { link, seen } = recorder();
		await dispatchPlaced([placed(1, "a"), placed(2, "b"), placed(3, "a")], link);
		await settle();
		expect(seen.runs).toEqual([
			{ agentId: "a", ids: [1, 3] },
			{ agentId: "b", ids: [2] }
		]);
		expect(seen.failed).toEqual([]);
	});

	it("fails the executions of an agent out of reach (node-lost) and sets the agent aside", async () => {
		const unreachable = Object.assign(new Error("gone"), { type: "SERVICE_NOT_FOUND" });
		const { link, seen } = recorder({ a: () => Promise.reject(unreachable) });
		await dispatchPlaced([placed(1, "a"), placed(2, "b"), placed(3, "a")], link);
		await settle();
		expect(seen.failed).toEqual([
			{ jobExeId: 1, errorName: ERRORS.nodeLost },
			{ jobExeId: 3, errorName: ERRORS.nodeLost }
		]);
		expect(seen.setAside).toEqual(["a"]);
		expect(seen.canceled).toEqual([]);
		expect(seen.warned).toBe(1);
	});

	it("asks the agent to stop what a timed-out run may have started", async () => {
		const timeout = Object.assign(new Error("slow"), { type: "REQUEST_TIMEOUT" });
		const { link, seen } = recorder({ a: () => Promise.reject(timeout) });
		await dispatchPlaced([placed(1, "a")], link);
		await settle();
		expect(seen.canceled).toEqual([{ jobExeId: 1, agentId: "a" }]);
		expect(seen.failed).toHaveLength(1);
	});

	it("fails the runs this process could not send, cut off from NATS, without setting the agent aside", async () => {
		const cutOff = Object.assign(new Error("cut off"), {
			type: "BROKER_DISCONNECTED",
			retryable: true
		});
		const { link, seen } = recorder({ a: () => Promise.reject(cutOff) });
		await dispatchPlaced([placed(1, "a")], link);
		await settle();
		expect(seen.failed).toEqual([{ jobExeId: 1, errorName: ERRORS.nodeLost }]);
		expect(seen.setAside).toEqual([]);
		expect(seen.canceled).toEqual([]);
	});

	it("fails a refused launch as task-launch without setting the agent aside", async () => {
		const refused = Object.assign(new Error("bad spec"), { type: "VALIDATION_ERROR" });
		const { link, seen } = recorder({ a: () => Promise.reject(refused) });
		await dispatchPlaced([placed(1, "a")], link);
		await settle();
		expect(seen.failed).toEqual([{ jobExeId: 1, errorName: ERRORS.taskLaunch }]);
		expect(seen.setAside).toEqual([]);
	});

	it("fails every execution when their specs cannot be built, calling no agent", async () => {
		const { link, seen } = recorder();
		link.buildSpecs = () => Promise.reject(new Error("database gone"));
		await dispatchPlaced([placed(1, "a"), placed(2, "b")], link);
		expect(seen.runs).toEqual([]);
		expect(seen.failed).toEqual([
			{ jobExeId: 1, errorName: ERRORS.unknown },
			{ jobExeId: 2, errorName: ERRORS.unknown }
		]);
	});
});
