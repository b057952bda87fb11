import {
	countsAgainstNode,
	errorNameFor,
	isFreeRetry,
	runFailureError,
	shouldRequeue
} from "../../../lib/executions/failure";

const mapping = {
	version: "1.0" as const,
	exit_codes: { "3": "bad-pixels", "-1": "out-of-range" }
};

describe("errorNameFor", () => {
	it("takes the error the agent diagnosed first", () => {
		expect(errorNameFor({ errorName: "timeout", exitCode: 3 }, mapping)).toBe("timeout");
	});

	it("maps the exit code through the error mapping", () => {
		expect(errorNameFor({ exitCode: 3 }, mapping)).toBe("bad-pixels");
		expect(errorNameFor({ exitCode: -1 }, mapping)).toBe("out-of-range");
	});

	it("defaults to algorithm-unknown for an unmapped code, and unknown without one", () => {
		expect(errorNameFor({ exitCode: 7 }, mapping)).toBe("algorithm-unknown");
		expect(errorNameFor({ exitCode: 0 }, mapping)).toBe("algorithm-unknown");
		expect(errorNameFor({ exitCode: 3 }, null)).toBe("algorithm-unknown");
		expect(errorNameFor({ exitCode: null }, mapping)).toBe("unknown");
		expect(errorNameFor({}, mapping)).toBe("unknown");
	});
});

describe("shouldRequeue", () => {
	it("retries SYSTEM errors while tries remain", () => {
		expect(shouldRequeue("SYSTEM", 1, 3, false)).toBe(true);
		expect(shouldRequeue("SYSTEM", 2, 3, false)).toBe(true);
		expect(shouldRequeue("SYSTEM", 3, 3, false)).toBe(false);
	});

	it("ends the job on ALGORITHM and DATA errors", () => {
		expect(shouldRequeue("ALGORITHM", 1, 3, false)).toBe(false);
		expect(shouldRequeue("DATA", 1, 3, false)).toBe(false);
	});

	it("always requeues long-running types", () => {
		expect(shouldRequeue("ALGORITHM", 9, 1, true)).toBe(true);
		expect(shouldRequeue("SYSTEM", 9, 1, true)).toBe(true);
	});

	it("always requeues a job whose node was shut down under it, tries used up or not", () => {
		expect(shouldRequeue("SYSTEM", 1, 1, false, "node-shutdown")).toBe(true);
		expect(shouldRequeue("SYSTEM", 5, 3, false, "node-shutdown")).toBe(true);
		expect(shouldRequeue("SYSTEM", 1, 1, false, "node-lost")).toBe(false);
		expect(isFreeRetry("node-shutdown")).toBe(true);
		expect(isFreeRetry("node-lost")).toBe(false);
		expect(isFreeRetry("timeout")).toBe(false);
	});
});

describe("countsAgainstNode", () => {
	it("counts SYSTEM errors but node-lost and node-shutdown", () => {
		expect(countsAgainstNode("SYSTEM", "task-launch")).toBe(true);
		expect(countsAgainstNode("SYSTEM", "node-lost")).toBe(false);
		expect(countsAgainstNode("SYSTEM", "node-shutdown")).toBe(false);
		expect(countsAgainstNode("ALGORITHM", "algorithm-unknown")).toBe(false);
	});
});

describe("runFailureError", () => {
	it("says node-lost when the agent could not be reached", () => {
		expect(runFailureError({ type: "SERVICE_NOT_FOUND" })).toBe("node-lost");
		expect(runFailureError({ type: "REQUEST_TIMEOUT" })).toBe("node-lost");
		expect(runFailureError({ type: "SOMETHING", retryable: true })).toBe("node-lost");
	});

	it("says task-launch when the agent answered with an error", () => {
		expect(runFailureError(new Error("cannot launch"))).toBe("task-launch");
		expect(runFailureError({ type: "VALIDATION_ERROR" })).toBe("task-launch");
	});
});
