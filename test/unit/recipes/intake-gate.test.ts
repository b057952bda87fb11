import { IntakeGate, intakeGateOf } from "../../../lib/recipes/intake-gate";

const settled = async (p: Promise<unknown>) => {
	let done = false;
	void p.then(() => (done = true));
	await new Promise(r => setImmediate(r));
	return done;
};

describe("IntakeGate", () => {
	it("lets the intake go at once while no control work is in flight", async () => {
		const gate = new IntakeGate();
		expect(await settled(gate.quiet(1000))).toBe(true);
	});

	it("holds the intake until the control work in flight ends", async () => {
		const gate = new IntakeGate();
		gate.enterControl();
		gate.enterControl();
		const waiting = gate.quiet(10000);
		expect(await settled(waiting)).toBe(false);
		gate.leaveControl();
		expect(await settled(waiting)).toBe(false);
		gate.leaveControl();
		expect(await settled(waiting)).toBe(true);
	});

	it("keeps holding it when other control work takes over in the same turn", async () => {
		const gate = new IntakeGate();
		gate.enterControl();
		const waiting = gate.quiet(10000);
		// a flush waking its pass before it lets go: the pass enters right after
		gate.leaveControl();
		gate.enterControl();
		expect(await settled(waiting)).toBe(false);
		gate.leaveControl();
		expect(await settled(waiting)).toBe(true);
	});

	it("lets the intake go after its longest wait however busy the control loop", async () => {
		const gate = new IntakeGate();
		gate.enterControl();
		const started = Date.now();
		await gate.quiet(50);
		expect(Date.now() - started).toBeGreaterThanOrEqual(45);
		// a wait of 0: none
		expect(await settled(gate.quiet(0))).toBe(true);
	});

	it("is one per broker", () => {
		const a = {};
		expect(intakeGateOf(a)).toBe(intakeGateOf(a));
		expect(intakeGateOf(a)).not.toBe(intakeGateOf({}));
	});
});
