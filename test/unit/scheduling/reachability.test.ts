import { AgentReachability, type ReachabilityLink } from "../../../lib/scheduling/reachability";

/** A link whose agents answer pings once `answering` has them; records the pings and wakes. */
function cluster(listed: string[]) {
	const seen = { pings: [] as string[][], wakes: 0 };
	const answering = new Set<string>();
	const link: ReachabilityLink = {
		agents: () => listed,
		ping: async ids => {
			seen.pings.push(ids);
			return ids.filter(id => answering.has(id));
		},
		wake: () => void seen.wakes++
	};
	return { link, seen, answering };
}

const until = async (check: () => boolean) => {
	for (let i = 0; i < 200 && !check(); i++) await new Promise(r => setTimeout(r, 5));
	expect(check()).toBe(true);
};

describe("AgentReachability", () => {
	let reach: AgentReachability;
	afterEach(() => reach?.stop());

	it("reaches every listed agent while this process has never lost NATS", () => {
		const { link } = cluster(["a", "b"]);
		reach = new AgentReachability(link, { probeMs: 10, windowMs: 1000 });
		expect(reach.usable(["a", "b"])).toEqual(["a", "b"]);
		expect(reach.confirming).toBe(false);
	});

	it("reaches none while cut off, then each agent once it answers a ping", async () => {
		const { link, seen, answering } = cluster(["a", "b"]);
		reach = new AgentReachability(link, { probeMs: 10, windowMs: 5000 });
		reach.down();
		expect(reach.usable(["a", "b"])).toEqual([]);

		answering.add("a");
		reach.up();
		await until(() => reach.usable(["a", "b"]).length === 1);
		expect(reach.usable(["a", "b"])).toEqual(["a"]);
		expect(seen.wakes).toBeGreaterThan(0);
		expect(reach.confirming).toBe(true);

		// b comes back later: it is pinged again until it answers, then all are reached
		answering.add("b");
		await until(() => !reach.confirming);
		expect(reach.usable(["a", "b"])).toEqual(["a", "b"]);
		// a was not pinged again once it had answered
		expect(seen.pings.slice(1).every(ids => !ids.includes("a"))).toBe(true);
	});

	it("takes every listed agent again once the window has passed", async () => {
		let now = 1000;
		const { link, answering } = cluster(["a", "silent"]);
		answering.add("a");
		reach = new AgentReachability(link, { probeMs: 10, windowMs: 500, now: () => now });
		reach.down();
		reach.up();
		await until(() => reach.usable(["a", "silent"]).length === 1);
		expect(reach.usable(["a", "silent"])).toEqual(["a"]);
		now += 500;
		expect(reach.usable(["a", "silent"])).toEqual(["a", "silent"]);
		expect(reach.confirming).toBe(false);
	});

	it("starts over when cut off again before every agent answered", async () => {
		const { link, answering } = cluster(["a"]);
		answering.add("a");
		reach = new AgentReachability(link, { probeMs: 10, windowMs: 5000 });
		reach.down();
		reach.up();
		reach.down();
		await new Promise(r => setTimeout(r, 30));
		expect(reach.usable(["a"])).toEqual([]);
		reach.up();
		await until(() => !reach.confirming);
		expect(reach.usable(["a"])).toEqual(["a"]);
	});
});
