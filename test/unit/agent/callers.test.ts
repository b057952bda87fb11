import type { ActionSchema } from "moleculer";
import { CallerCheckMiddleware, LeaderView, requireSender } from "../../../lib/agent/callers";

describe("requireSender", () => {
	it("accepts a report from the agent it names", () => {
		const ctx = { nodeID: "agent-1", broker: { nodeID: "control" } };
		expect(() => requireSender(ctx, "agent-1", "a report")).not.toThrow();
	});

	it("trusts a call from its own process", () => {
		const ctx = { nodeID: "control", broker: { nodeID: "control" } };
		expect(() => requireSender(ctx, "agent-1", "a report")).not.toThrow();
	});

	it("refuses one from another node, as FORBIDDEN", () => {
		try {
			requireSender(
				{ nodeID: "peer", broker: { nodeID: "control" } },
				"agent-1",
				"a finish report"
			);
			throw new Error("accepted");
		} catch (err: any) {
			expect(err.type).toBe("FORBIDDEN");
			expect(err.code).toBe(403);
			expect(err.message).toMatch(
				/a finish report names agent "agent-1" but comes from node "peer"/
			);
		}
	});
});

describe("LeaderView", () => {
	it("asks once, then knows the leader", async () => {
		const ask = jest.fn(async () => "control-1");
		const view = new LeaderView(ask);
		expect(await view.isLeader("control-1")).toBe(true);
		expect(await view.isLeader("control-1")).toBe(true);
		expect(ask).toHaveBeenCalledTimes(1);
	});

	it("asks again when another sender claims to lead, and follows a new leader", async () => {
		let leader = "control-1";
		const ask = jest.fn(async () => leader);
		const view = new LeaderView(ask);
		expect(await view.isLeader("control-1")).toBe(true);
		leader = "control-2";
		expect(await view.isLeader("control-2")).toBe(true);
		expect(await view.isLeader("control-1")).toBe(false);
		expect(ask).toHaveBeenCalledTimes(3);
	});

	it("refuses a sender refused a moment ago without asking, and asks again later", async () => {
		let now = 1000;
		const ask = jest.fn(async () => "control-1");
		const view = new LeaderView(ask, 1000, () => now);
		expect(await view.isLeader("peer")).toBe(false);
		expect(await view.isLeader("peer")).toBe(false);
		expect(ask).toHaveBeenCalledTimes(1);
		now += 1001;
		expect(await view.isLeader("peer")).toBe(false);
		expect(ask).toHaveBeenCalledTimes(2);
	});

	it("asks about the sender that called", async () => {
		const ask = jest.fn(async (sender: string) =>
			sender === "control-2" ? "control-2" : null
		);
		const view = new LeaderView(ask);
		expect(await view.isLeader("control-2")).toBe(true);
		expect(ask).toHaveBeenCalledWith("control-2");
	});

	it("shares one question among calls that arrive together", async () => {
		let answer!: (leader: string) => void;
		const ask = jest.fn(() => new Promise<string>(resolve => (answer = resolve)));
		const view = new LeaderView(ask);
		const calls = [view.isLeader("control-1"), view.isLeader("control-1")];
		answer("control-1");
		expect(await Promise.all(calls)).toEqual([true, true]);
		expect(ask).toHaveBeenCalledTimes(1);
	});

	it("refuses when the control plane cannot be asked, and forgets a departed leader", async () => {
		let fail = true;
		const view = new LeaderView(async () => {
			if (fail) throw new Error("no nodes service");
			return "control-1";
		});
		expect(await view.isLeader("control-1")).toBe(false);
		fail = false;
		expect(await view.isLeader("control-1")).toBe(true);
		view.forget("control-1");
		fail = true;
		expect(await view.isLeader("control-1")).toBe(false);
	});
});

describe("CallerCheckMiddleware", () => {
	const wrap = (action: Partial<ActionSchema>, handler = jest.fn(async () => "done")) => ({
		handler,
		checked: (CallerCheckMiddleware() as any).localAction(handler, action)
	});
	const ctxFrom = (nodeID: string, params: unknown, extra: Record<string, unknown> = {}) =>
		({ nodeID, params, broker: { nodeID: "control", ...extra } }) as any;

	it("leaves an action without a rule as it is", () => {
		const { handler, checked } = wrap({});
		expect(checked).toBe(handler);
	});

	it("refuses a report naming another agent, in one or among several", async () => {
		const { handler, checked } = wrap({
			caller: { agentNamed: "a finish report", each: "reports" }
		});
		await expect(checked(ctxFrom("agent-1", { agentId: "agent-1" }))).resolves.toBe("done");
		await expect(
			checked(
				ctxFrom("agent-1", { reports: [{ agentId: "agent-1" }, { agentId: "agent-2" }] })
			)
		).rejects.toMatchObject({
			type: "FORBIDDEN",
			code: 403,
			message: expect.stringMatching(/a finish report names agent "agent-2"/)
		});
		await expect(checked(ctxFrom("control", { agentId: "agent-2" }))).resolves.toBe("done");
		expect(handler).toHaveBeenCalledTimes(2);
	});

	it("sends live logs only to a node running job-executions", async () => {
		const registry = {
			getServiceList: () => [
				{ name: "job-executions", nodeID: "control-2" },
				{ name: "nodes", nodeID: "peer" }
			]
		};
		const { checked } = wrap({ caller: "execution-reader" });
		await expect(checked(ctxFrom("control-2", {}, { registry }))).resolves.toBe("done");
		await expect(checked(ctxFrom("peer", {}, { registry }))).rejects.toMatchObject({
			type: "FORBIDDEN",
			message: 'node "peer" runs no job-executions service: logs are not sent to it'
		});
	});
});
