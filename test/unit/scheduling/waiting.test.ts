import {
	whyWaiting,
	type LastPass,
	type NodeFacts,
	type WaitingJob
} from "../../../lib/scheduling/waiting";
import type { PassContext } from "../../../lib/scheduling/claim";

const AT = new Date("2026-11-28T02:00:00Z");

function pass(over: Partial<PassContext> = {}): LastPass {
	return {
		at: AT,
		ctx: {
			paused: false,
			queued: true,
			nodes: [{ id: 1, agentId: "a1", free: { cpus: 2, mem: 1000, disk: 5000 } }],
			limits: { paused: new Set(), remaining: new Map() },
			unrunnable: [],
			...over
		}
	};
}

const job = (over: Partial<WaitingJob> = {}): WaitingJob => ({
	job_id: 10,
	job_type_id: 3,
	job_type: "t:1",
	max_scheduled: null,
	priority: 100,
	cpus: 1,
	mem: 64,
	disk: 0,
	queued: new Date(AT.getTime() - 1000),
	ahead: 0,
	...over
});

const node = (over: Partial<NodeFacts> = {}): NodeFacts => ({
	id: 1,
	hostname: "vm",
	online: true,
	paused: false,
	pause_reason: null,
	draining: false,
	offered: { cpus: 4, mem: 4000, disk: 10000 },
	...over
});

describe("whyWaiting", () => {
	it.each<[string, LastPass | null, WaitingJob, NodeFacts[], string, RegExp]>([
		["before any pass", null, job(), [node()], "NOT_YET_CONSIDERED", /no scheduling pass/],
		["scheduler paused", pass({ paused: true }), job(), [node()], "SCHEDULER_PAUSED", /paused/],
		[
			"queued after the last pass",
			pass(),
			job({ queued: new Date(AT.getTime() + 1) }),
			[node()],
			"NOT_YET_CONSIDERED",
			/next pass/
		],
		[
			"job type paused",
			pass({ limits: { paused: new Set([3]), remaining: new Map() } }),
			job(),
			[node()],
			"JOB_TYPE_PAUSED",
			/job type t:1 is paused/
		],
		[
			"no node online",
			pass({ nodes: [] }),
			job(),
			[node({ online: false })],
			"NO_NODE_ONLINE",
			/no node is online/
		],
		[
			"every node paused, the whole reason said",
			pass({ nodes: [] }),
			job(),
			[
				node({ paused: true, pause_reason: "disk full" }),
				node({ id: 2, hostname: "w", draining: true })
			],
			"ALL_NODES_PAUSED",
			/node 1 \(vm\) paused: disk full; node 2 \(w\) draining/
		],
		[
			"max_scheduled reached",
			pass({ limits: { paused: new Set(), remaining: new Map([[3, 0]]) } }),
			job({ max_scheduled: 2 }),
			[node()],
			"MAX_SCHEDULED",
			/max_scheduled 2/
		],
		[
			"no node can run its image",
			pass({
				unrunnable: [
					{
						jobTypeId: 3,
						image: "x:1",
						privileged: false,
						reason: "no node has a Docker engine"
					}
				]
			}),
			job(),
			[node()],
			"IMAGE_UNAVAILABLE",
			/no node has a Docker engine/
		],
		[
			"larger than any node",
			pass(),
			job({ cpus: 64 }),
			[node()],
			"RESOURCES",
			/needs 64 cpus.*more than any online node offers \(the largest, node 1 \(vm\), offers 4 cpus, 4000 MiB memory, 10000 MiB disk\)/
		],
		[
			"no node has it free now",
			pass(),
			job({ cpus: 3 }),
			[node()],
			"RESOURCES",
			/no online node has that free \(the most free, node 1 \(vm\), has 2 cpus, 1000 MiB memory, 5000 MiB disk free\)/
		],
		[
			"behind higher priority",
			pass(),
			job({ ahead: 7 }),
			[node()],
			"BEHIND_HIGHER_PRIORITY",
			/behind 7 jobs of higher priority/
		],
		["placeable", pass(), job(), [node()], "NEXT_PASS", /next pass places it/]
	])("%s", (_, last, j, nodes, code, reason) => {
		const why = whyWaiting(last, j, nodes);
		expect(why.code).toBe(code);
		expect(why.reason).toMatch(reason);
		expect(why.pass_at).toBe(last ? AT.toISOString() : null);
	});
});
