import { freePort, freePortRun } from "../helpers/ports";

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

	it("answers ports that can be bound, below the ephemeral range", async () => {
		const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
		expect(new Set(ports).size).toBe(20);
		for (const port of ports) {
			expect(port).toBeGreaterThanOrEqual(20000);
			expect(port).toBeLessThan(32000);
		}
	});
});
