import { packetSubject, subjectSender, subscriptionSubjects } from "../../lib/transport/subjects";
import { natsPermissions } from "../../lib/cluster/nats-identities";

/** Whether NATS subject `subject` matches the pattern `pattern` (`*` a token, `>` the rest). */
function matches(pattern: string, subject: string): boolean {
	const p = pattern.split(".");
	const s = subject.split(".");
	for (let i = 0; i < p.length; i++) {
		if (p[i] === ">") return s.length > i;
		if (i >= s.length || (p[i] !== "*" && p[i] !== s[i])) return false;
	}
	return p.length === s.length;
}

const allowed = (patterns: string[], subject: string) => patterns.some(p => matches(p, subject));

describe("the cluster's NATS subjects", () => {
	it("name the sender and its role, and the target of a targeted packet", () => {
		expect(packetSubject("HEARTBEAT", "agent", "a-1")).toBe("MOL-scale.HEARTBEAT.agent.a-1");
		expect(packetSubject("REQ", "control", "c-1", "a-1")).toBe("MOL-scale.REQ.control.c-1.a-1");
		expect(subjectSender("MOL-scale.REQ.control.c-1.a-1")).toEqual({
			role: "control",
			sender: "c-1"
		});
		expect(subjectSender("MOL-scale.INFO.agent.a-1")).toEqual({ role: "agent", sender: "a-1" });
	});

	it("are not read from a subject of another shape or role", () => {
		for (const subject of [
			"MOL-scale.REQ.a-1",
			"MOL-scale.REQ.root.c-1.a-1",
			"MOL-other.REQ.control.c-1.a-1",
			"MOL-scale.REQ.control.c-1.a-1.x"
		])
			expect(subjectSender(subject)).toBeNull();
	});

	it("are subscribed to by target, from any sender by a control plane", () => {
		expect(subscriptionSubjects("REQ", "control", "c-1", true)).toEqual([
			"MOL-scale.REQ.*.*.c-1"
		]);
		expect(subscriptionSubjects("INFO", "operator", "operator", false)).toEqual([
			"MOL-scale.INFO.*.*"
		]);
		const [req] = subscriptionSubjects("REQ", "control", "c-1", true);
		expect(matches(req, packetSubject("REQ", "agent", "a-1", "c-1"))).toBe(true);
		expect(matches(req, packetSubject("REQ", "agent", "a-1", "c-2"))).toBe(false);
	});

	it("are subscribed to by an agent from the control planes and the operator only", () => {
		expect(subscriptionSubjects("REQ", "agent", "a-1", true)).toEqual([
			"MOL-scale.REQ.control.*.a-1",
			"MOL-scale.REQ.operator.*.a-1"
		]);
		const heard = (subject: string, type: string, target?: string) =>
			subscriptionSubjects(type, "agent", "a-1", Boolean(target)).some(p =>
				matches(p, subject)
			);
		expect(heard(packetSubject("REQ", "control", "c-1", "a-1"), "REQ", "a-1")).toBe(true);
		expect(heard(packetSubject("REQ", "operator", "operator", "a-1"), "REQ", "a-1")).toBe(true);
		expect(heard(packetSubject("HEARTBEAT", "control", "c-1"), "HEARTBEAT")).toBe(true);
		expect(heard(packetSubject("HEARTBEAT", "agent", "a-2"), "HEARTBEAT")).toBe(false);
		expect(heard(packetSubject("DISCOVER", "agent", "a-2"), "DISCOVER")).toBe(false);
		expect(heard(packetSubject("INFO", "agent", "a-2", "a-1"), "INFO", "a-1")).toBe(false);
		// another process of its own ID announcing itself: how it learns of one
		expect(heard(packetSubject("INFO", "agent", "a-1"), "INFO")).toBe(true);
		expect(heard(packetSubject("INFO", "agent", "a-2"), "INFO")).toBe(false);
	});
});

describe("an identity's permissions", () => {
	const agent = natsPermissions("agent", "a-1", ["c-1", "operator"]);
	const control = natsPermissions("control", "c-1", ["c-1", "operator"]);

	it("let an agent publish as itself, an agent, to the control planes and the operator", () => {
		for (const subject of [
			packetSubject("HEARTBEAT", "agent", "a-1"),
			packetSubject("INFO", "agent", "a-1"),
			packetSubject("INFO", "agent", "a-1", "c-1"),
			packetSubject("DISCOVER", "agent", "a-1", "c-1"),
			packetSubject("REQ", "agent", "a-1", "c-1"),
			packetSubject("RES", "agent", "a-1", "operator")
		])
			expect([subject, allowed(agent.publish.allow, subject)]).toEqual([subject, true]);
	});

	it("refuse an agent another sender, another role, or a request to another agent", () => {
		for (const subject of [
			packetSubject("REQ", "agent", "a-2", "c-1"),
			packetSubject("REQ", "control", "a-1", "c-1"),
			packetSubject("INFO", "control", "a-1"),
			packetSubject("REQ", "agent", "a-1", "a-2"),
			packetSubject("EVENT", "agent", "a-1", "a-2"),
			packetSubject("INFO", "agent", "a-1", "a-2"),
			packetSubject("DISCOVER", "agent", "a-1", "a-2"),
			"MOL-scale.REQ.c-1",
			"MOL-scale.INFO"
		])
			expect([subject, allowed(agent.publish.allow, subject)]).toEqual([subject, false]);
	});

	it("let a control plane publish any packet to anyone, as itself only", () => {
		expect(allowed(control.publish.allow, packetSubject("REQ", "control", "c-1", "a-1"))).toBe(
			true
		);
		expect(allowed(control.publish.allow, packetSubject("INFO", "control", "c-1"))).toBe(true);
		expect(allowed(control.publish.allow, packetSubject("REQ", "control", "c-2", "a-1"))).toBe(
			false
		);
		expect(allowed(control.publish.allow, packetSubject("REQ", "agent", "c-1", "a-1"))).toBe(
			false
		);
	});

	it("deliver a node the broadcasts and what is sent to it, nothing sent to another", () => {
		const may = (s: string[]) => s.every(subject => allowed(agent.subscribe.allow, subject));
		expect(may(subscriptionSubjects("REQ", "agent", "a-1", true))).toBe(true);
		expect(may(subscriptionSubjects("HEARTBEAT", "agent", "a-1", false))).toBe(true);
		expect(may(subscriptionSubjects("INFO", "agent", "a-1", false))).toBe(true);
		expect(may(subscriptionSubjects("REQ", "agent", "a-2", true))).toBe(false);
		expect(may(subscriptionSubjects("INFO", "agent", "a-2", false))).toBe(false);
		expect(may(subscriptionSubjects("HEARTBEAT", "control", "a-1", false))).toBe(false);
		expect(may(subscriptionSubjects("REQ", "control", "a-1", true))).toBe(false);
		expect(allowed(agent.subscribe.allow, ">")).toBe(false);
		expect(allowed(agent.subscribe.allow, "MOL-scale.>")).toBe(false);
	});
});
