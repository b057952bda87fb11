import { freePort, freePortRun, portRange } from "../helpers/ports";

describe("freePort", () => {
	afterEach(() => jest.restoreAllMocks());

	it("never hands out a port twice, alone or in a run, though nothing bound it yet", async () => {
		const random = jest.spyOn(Math, "random");
		// the same draw three times: the second and third must move on to the next draws
		random
			.mockReturnValueOnce(0.5)
			.mockReturnValueOnce(0.5)
			.mockReturnValueOnce(0.25)
			.mockReturnValueOnce(0.5)
			.mockReturnValueOnce(0.75);
		const first = await freePort();
		const second = await freePort();
		expect(second).not.toBe(first);
		// a run that would cover `first` from the port before it is drawn anew
		const run = await freePortRun(2);
		expect([run, run + 1]).not.toContain(first);
		expect([run, run + 1]).not.toContain(second);
	});

	it("answers ports that can be bound, in this worker's slice below the ephemeral range", async () => {
		const [low, high] = portRange();
		expect(low).toBeGreaterThanOrEqual(20000);
		expect(high).toBeLessThanOrEqual(32000);
		const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
		expect(new Set(ports).size).toBe(20);
		for (const port of ports) {
			expect(port).toBeGreaterThanOrEqual(low);
			expect(port).toBeLessThan(high);
		}
	});

	it("gives each Jest worker a slice of its own, and the whole range outside Jest", () => {
		const saved = process.env.JEST_WORKER_ID;
		const rangeOf = (worker: string | undefined) => {
			if (worker === undefined) delete process.env.JEST_WORKER_ID;
			else process.env.JEST_WORKER_ID = worker;
			return portRange();
		};
		try {
			const [one, two] = [rangeOf("1"), rangeOf("2")];
			expect(one[1]).toBeLessThanOrEqual(two[0]);
			expect(one[1] - one[0]).toBeGreaterThanOrEqual(1000);
			expect(rangeOf(undefined)).toEqual([20000, 32000]);
		} finally {
			if (saved === undefined) delete process.env.JEST_WORKER_ID;
			else process.env.JEST_WORKER_ID = saved;
		}
	});
});
