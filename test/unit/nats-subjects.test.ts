import { packetSubject, subjectSender, subscriptionSubject } from "../../lib/transport/subjects";
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

	it("are subscribed to by target, from any sender", () => {
		expect(subscriptionSubject("REQ", "a-1")).toBe("MOL-scale.REQ.*.*.a-1");
		expect(subscriptionSubject("INFO")).toBe("MOL-scale.INFO.*.*");
		expect(
			matches(subscriptionSubject("REQ", "a-1"), packetSubject("REQ", "control", "c", "a-1"))
		).toBe(true);
		expect(
			matches(subscriptionSubject("INFO"), packetSubject("INFO", "agent", "a-2", "a-1"))
		).toBe(false);
	});
});

describe("an identity's permissions", () => {
	const agent = natsPermissions("agent", "a-1", ["c-1", "operator"]);
	const control = natsPermissions("control", "c-1", ["c-1", "operator"]);

	it("let an agent publish as itself, an agent, to the control planes and the operator", () => {
		for (const subject of [
			packetSubject("HEARTBEAT", "agent", "a-1"),
			packetSubject("INFO", "agent", "a-1"),
			packetSubject("INFO", "agent", "a-1", "a-2"),
			packetSubject("DISCOVER", "agent", "a-1", "a-2"),
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
		expect(allowed(agent.subscribe.allow, subscriptionSubject("REQ", "a-1"))).toBe(true);
		expect(allowed(agent.subscribe.allow, subscriptionSubject("HEARTBEAT"))).toBe(true);
		expect(allowed(agent.subscribe.allow, subscriptionSubject("REQ", "a-2"))).toBe(false);
		expect(allowed(agent.subscribe.allow, ">")).toBe(false);
		expect(allowed(agent.subscribe.allow, "MOL-scale.>")).toBe(false);
	});
});
