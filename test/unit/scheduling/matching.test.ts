import {
	canRun,
	excludedTypes,
	fits,
	hasCapacity,
	matchBatch,
	WaitingReasons,
	whyUnrunnable,
	type DockerNeed,
	type NodeDocker,
	type NodeSlot,
	type QueuedRow,
	type TypeLimits,
	TypeKinds
} from "../../../lib/scheduling/matching";
import { normalizeImage, normalizeImages } from "../../../lib/documents/images";

let seq = 0;
function row(extra: Partial<QueuedRow> = {}): QueuedRow {
	const id = ++seq;
	return {
		id,
		jobExeId: 1000 + id,
		jobId: 2000 + id,
		jobTypeId: 1,
		priority: 100,
		cpus: 1,
		mem: 64,
		diskIn: 0,
		diskOut: 0,
		diskTotal: 0,
		queuedKey: "2024-01-01 00:00:00+00",
		successors: 0,
		queuedUs: 1704067200000000,
		...extra
	};
}

function node(id: number, cpus: number, mem = 1024, disk = 1000): NodeSlot {
	return { id, agentId: `agent-${id}`, free: { cpus, mem, disk } };
}

const noLimits = (): TypeLimits => ({ paused: new Set(), remaining: new Map() });

describe("fits", () => {
	it("compares cpus, memory and total disk, with slack for float sums", () => {
		expect(fits({ cpus: 1, mem: 64, disk: 10 }, { cpus: 1, mem: 64, diskTotal: 10 })).toBe(
			true
		);
		expect(
			fits({ cpus: 0.3, mem: 1, disk: 1 }, { cpus: 0.1 + 0.2, mem: 1, diskTotal: 1 })
		).toBe(true);
		expect(fits({ cpus: 1, mem: 64, disk: 10 }, { cpus: 1.01, mem: 1, diskTotal: 1 })).toBe(
			false
		);
		expect(fits({ cpus: 1, mem: 64, disk: 10 }, { cpus: 1, mem: 65, diskTotal: 1 })).toBe(
			false
		);
		expect(fits({ cpus: 1, mem: 64, disk: 10 }, { cpus: 1, mem: 1, diskTotal: 11 })).toBe(
			false
		);
	});
});

describe("matchBatch", () => {
	it("places rows in the given order and takes their resources from the node", () => {
		const n = node(1, 2);
		const rows = [row(), row(), row()];
		const { placed, skipped } = matchBatch(rows, [n], noLimits());
		expect(placed.map(p => p.row.id)).toEqual([rows[0].id, rows[1].id]);
		expect(skipped.map(r => r.id)).toEqual([rows[2].id]);
		expect(n.free).toEqual({ cpus: 0, mem: 1024 - 128, disk: 1000 });
	});

	it("skips a row that fits nowhere and still places smaller ones behind it", () => {
		const big = row({ priority: 1, cpus: 64 });
		const small = row({ priority: 200, cpus: 1 });
		const { placed, skipped } = matchBatch([big, small], [node(1, 4)], noLimits());
		expect(placed.map(p => p.row.id)).toEqual([small.id]);
		expect(skipped).toEqual([big]);
	});

	it("spreads over nodes: the fitting node with the most free cpus, then memory, then id", () => {
		const a = node(1, 2);
		const b = node(2, 4);
		const c = node(3, 4, 2048);
		const rows = [row(), row(), row()];
		const { placed } = matchBatch(rows, [a, b, c], noLimits());
		expect(placed.map(p => p.node.id)).toEqual([3, 2, 3]);
	});

	it("picks the only node a row fits on", () => {
		const small = node(1, 8, 100);
		const roomy = node(2, 1, 4096);
		const { placed } = matchBatch([row({ mem: 1000 })], [small, roomy], noLimits());
		expect(placed.map(p => p.node.id)).toEqual([2]);
	});

	it("skips paused job types", () => {
		const limits: TypeLimits = { paused: new Set([7]), remaining: new Map() };
		const paused = row({ jobTypeId: 7 });
		const other = row({ jobTypeId: 8 });
		const { placed, skipped } = matchBatch([paused, other], [node(1, 4)], limits);
		expect(placed.map(p => p.row.id)).toEqual([other.id]);
		expect(skipped).toEqual([paused]);
	});

	it("honours max_scheduled through the remaining count, and counts it down", () => {
		const limits: TypeLimits = { paused: new Set(), remaining: new Map([[5, 2]]) };
		const rows = [row({ jobTypeId: 5 }), row({ jobTypeId: 5 }), row({ jobTypeId: 5 })];
		const { placed } = matchBatch(rows, [node(1, 16)], limits);
		expect(placed).toHaveLength(2);
		expect(limits.remaining.get(5)).toBe(0);
		expect(excludedTypes(limits)).toEqual([5]);
	});

	it("places nothing without nodes", () => {
		const { placed, skipped } = matchBatch([row()], [], noLimits());
		expect(placed).toEqual([]);
		expect(skipped).toHaveLength(1);
	});
});

describe("launch windows (NodeSlot.room)", () => {
	it("places no more on a node than its window takes, the rest elsewhere or left queued", () => {
		const a = { ...node(1, 8), room: 2 };
		const b = { ...node(2, 4), room: 1 };
		const rows = [
			row({ cpus: 0.01 }),
			row({ cpus: 0.01 }),
			row({ cpus: 0.01 }),
			row({ cpus: 0.01 })
		];
		const { placed, skipped } = matchBatch(rows, [a, b], noLimits());
		// the most free CPUs first (a, a), then b; the fourth waits for a window
		expect(placed.map(p => p.node.id)).toEqual([1, 1, 2]);
		expect(skipped).toEqual([rows[3]]);
		expect(a.room).toBe(0);
		expect(b.room).toBe(0);
		expect(hasCapacity([a, b])).toBe(false);
	});

	it("counts the jobs a row's end will queue (its successors) against the window", () => {
		const a = { ...node(1, 8), room: 4 };
		const rows = [
			row({ cpus: 0.01, successors: 2 }),
			row({ cpus: 0.01, successors: 2 }),
			row({ cpus: 0.01 })
		];
		const { placed, skipped } = matchBatch(rows, [a], noLimits());
		// the first takes 3 of 4; the second still finds room (1) and overdraws it
		expect(placed.map(p => p.row)).toEqual([rows[0], rows[1]]);
		expect(skipped).toEqual([rows[2]]);
		expect(a.room).toBe(-2);
	});

	it("holds a row's needs for its successors on its node as far as they fit, when asked", () => {
		const a = node(1, 2.5);
		const rows = [row({ cpus: 1, successors: 2 }), row({ cpus: 0.5 })];
		const { placed } = matchBatch(rows, [a], noLimits(), true);
		// the first takes 1 and holds 1 of the 2 it would hold (1.5 left after it), the second fits
		expect(placed.map(p => [p.row, p.held])).toEqual([
			[rows[0], 1],
			[rows[1], 0]
		]);
		expect(a.free.cpus).toBeCloseTo(0);
		// without holds, only the rows' own needs are taken
		const b = node(2, 2.5);
		const plain = matchBatch([row({ cpus: 1, successors: 2 })], [b], noLimits());
		expect(plain.placed[0].held).toBe(0);
		expect(b.free.cpus).toBe(1.5);
	});

	it("keeps resources the first cap: a window does not place what does not fit", () => {
		const a = { ...node(1, 1), room: 10 };
		const { placed } = matchBatch([row({ cpus: 0.6 }), row({ cpus: 0.6 })], [a], noLimits());
		expect(placed).toHaveLength(1);
		expect(a.room).toBe(9);
	});
});

describe("excludedTypes and hasCapacity", () => {
	it("lists paused types and types with no slot left, sorted", () => {
		expect(
			excludedTypes({
				paused: new Set([9, 3]),
				remaining: new Map([
					[4, 0],
					[5, 1],
					[6, -2]
				])
			})
		).toEqual([3, 4, 6, 9]);
	});

	it("tells whether any node has anything left", () => {
		expect(hasCapacity([])).toBe(false);
		expect(hasCapacity([node(1, 0, 0, 0)])).toBe(false);
		expect(hasCapacity([node(1, 0, 0, 0), node(2, 0.5, 0, 0)])).toBe(true);
	});
});

describe("container job types", () => {
	function engine(extra: Partial<NodeDocker> & { list?: string[] } = {}): NodeDocker {
		const { list, ...rest } = extra;
		return {
			engine: true,
			pull: false,
			privileged: false,
			images: new Set(normalizeImages(list ?? [])),
			...rest
		};
	}
	function dockerNode(id: number, docker?: NodeDocker, cpus = 4): NodeSlot {
		return { ...node(id, cpus), docker };
	}
	const need = (image: string | null, privileged = false): DockerNeed => ({
		image: image === null ? null : normalizeImage(image),
		privileged
	});
	const limitsFor = (docker: Map<number, DockerNeed>): TypeLimits => ({
		...noLimits(),
		docker
	});

	it("runs only where an engine answers, with the image or pulling, privileged if asked", () => {
		const busybox = need("busybox");
		expect(canRun(dockerNode(1), busybox)).toBe(false);
		expect(canRun(dockerNode(1, engine({ engine: false, pull: true })), busybox)).toBe(false);
		expect(canRun(dockerNode(1, engine()), busybox)).toBe(false);
		expect(canRun(dockerNode(1, engine({ list: ["busybox:latest"] })), busybox)).toBe(true);
		expect(canRun(dockerNode(1, engine({ pull: true })), busybox)).toBe(true);
		expect(canRun(dockerNode(1, engine({ pull: true })), need("busybox", true))).toBe(false);
		expect(
			canRun(dockerNode(1, engine({ pull: true, privileged: true })), need("busybox", true))
		).toBe(true);
		// no image: any engine (its agent then fails the execution, rather than it waiting)
		expect(canRun(dockerNode(1, engine()), need(null))).toBe(true);
	});

	it("places a container job's row only on nodes that can run it, and process rows anywhere", () => {
		// A has more free cpus, so it would win; only B has the image
		const a = dockerNode(1, engine({ list: ["alpine:3"] }), 8);
		const b = dockerNode(2, engine({ list: ["scale-x:1"] }), 4);
		const plain = dockerNode(3, undefined, 16);
		const limits = limitsFor(new Map([[7, need("scale-x:1")]]));
		const docker = row({ jobTypeId: 7 });
		const process = row({ jobTypeId: 1 });
		const { placed } = matchBatch([docker, process], [a, b, plain], limits);
		expect(placed.map(p => [p.row.id, p.node.id])).toEqual([
			[docker.id, b.id],
			[process.id, plain.id]
		]);
	});

	it("skips a container row no node can run, and still considers later rows", () => {
		const a = dockerNode(1, engine({ list: ["alpine:3"] }));
		const limits = limitsFor(
			new Map([
				[7, need("scale-x:1")],
				[8, need("alpine:3")]
			])
		);
		const missing = row({ jobTypeId: 7, priority: 1 });
		const there = row({ jobTypeId: 8, priority: 2 });
		const process = row({ jobTypeId: 1, priority: 3 });
		const { placed, skipped } = matchBatch([missing, there, process], [a], limits);
		expect(placed.map(p => p.row.id)).toEqual([there.id, process.id]);
		expect(skipped).toEqual([missing]);
	});

	it("leaves a container row whose type's needs the pass did not read to the next pass", () => {
		// its type's needs unknown: queued after the pass read them, with no other row of it
		const roomy = dockerNode(1, engine({ pull: true }), 8);
		const kinds = new TypeKinds();
		kinds.update("4", [[9], [1]]);
		const late = row({ jobTypeId: 9 });
		const process = row({ jobTypeId: 1 });
		const { placed, skipped } = matchBatch([late, process], [roomy], { ...noLimits(), kinds });
		expect(placed.map(p => p.row.id)).toEqual([process.id]);
		expect(skipped).toEqual([late]);
		// with its needs read, it is placed
		const again = matchBatch([late], [roomy], {
			...limitsFor(new Map([[9, need("busybox")]])),
			kinds
		});
		expect(again.placed.map(p => p.row.id)).toEqual([late.id]);
	});

	it("leaves a row of a job type created after the pass read the kinds to the next pass", () => {
		const roomy = dockerNode(1, engine({ pull: true }), 8);
		const kinds = new TypeKinds();
		kinds.update("4", [[], [1]]);
		const newer = row({ jobTypeId: 2 });
		const known = row({ jobTypeId: 1 });
		const { placed, skipped } = matchBatch([newer, known], [roomy], { ...noLimits(), kinds });
		expect(placed.map(p => p.row.id)).toEqual([known.id]);
		expect(skipped).toEqual([newer]);
	});

	it("takes the resources of a placement from the node whichever list found it", () => {
		const b = dockerNode(2, engine({ list: ["scale-x:1"] }), 2);
		const limits = limitsFor(new Map([[7, need("scale-x:1")]]));
		const rows = [row({ jobTypeId: 7 }), row({ jobTypeId: 1 }), row({ jobTypeId: 7 })];
		const { placed, skipped } = matchBatch(rows, [b], limits);
		expect(placed.map(p => p.row.id)).toEqual([rows[0].id, rows[1].id]);
		expect(skipped).toEqual([rows[2]]);
		expect(b.free.cpus).toBe(0);
	});

	it("says why no node can run a container job type", () => {
		const image = "scale-x:1";
		expect(whyUnrunnable(need(image), image, [dockerNode(1), dockerNode(2)])).toBe(
			"no node has a Docker engine (of 2 nodes taking work)"
		);
		expect(whyUnrunnable(need(image), image, [dockerNode(1, engine())])).toBe(
			"no node has the image scale-x:1 and none pulls (of 1 node taking work)"
		);
		expect(
			whyUnrunnable(need(image, true), image, [dockerNode(1, engine({ pull: true }))])
		).toBe("no node with a Docker engine allows privileged containers (of 1 node taking work)");
		expect(
			whyUnrunnable(need(image, true), image, [
				dockerNode(1, engine({ privileged: true })),
				dockerNode(2, engine({ list: [image] }))
			])
		).toBe(
			"no node allowing privileged containers has the image scale-x:1 and none pulls (of 2 nodes taking work)"
		);
		expect(whyUnrunnable(need(image), image, [dockerNode(1, engine({ pull: true }))])).toBe(
			null
		);
	});

	it("excludes the types no node can run", () => {
		expect(
			excludedTypes({
				paused: new Set([3]),
				remaining: new Map(),
				unrunnable: new Set([2, 3])
			})
		).toEqual([2, 3]);
	});
});

describe("WaitingReasons", () => {
	it("says a reason once per interval, again when it changes", () => {
		let now = 0;
		const reasons = new WaitingReasons(60_000, () => now);
		const w = (jobTypeId: number, reason = "no engine") => ({ jobTypeId, reason });
		expect(reasons.due([w(1), w(2)])).toEqual([w(1), w(2)]);
		now = 1_000;
		expect(reasons.due([w(1), w(2)])).toEqual([]);
		expect(reasons.due([w(1, "no image")])).toEqual([w(1, "no image")]);
		now = 60_000;
		expect(reasons.due([w(1, "no image"), w(2)])).toEqual([w(2)]);
		now = 61_000;
		expect(reasons.due([w(1, "no image"), w(2)])).toEqual([w(1, "no image")]);
		expect(reasons.due([])).toEqual([]);
	});
});

describe("TypeKinds", () => {
	it("knows nothing until read, then each type's kind until a job type changes", () => {
		const kinds = new TypeKinds();
		expect(kinds.known()).toBeNull();
		expect(kinds.usesDocker(1)).toBeUndefined();
		kinds.update("3", [[2], [1]]);
		expect(kinds.known()).toBe("3");
		expect([kinds.usesDocker(1), kinds.usesDocker(2), kinds.usesDocker(3)]).toEqual([
			false,
			true,
			undefined
		]);
		// unchanged: the statement sends no kinds
		kinds.update("3", null);
		expect(kinds.usesDocker(2)).toBe(true);
		// read again at a new generation: what it read replaces what it had
		kinds.update("4", [[], [1, 2]]);
		expect([kinds.known(), kinds.usesDocker(2)]).toEqual(["4", false]);
		// a new generation without kinds (not sent by the statement) forgets them: read next pass
		kinds.update("5", null);
		expect([kinds.known(), kinds.usesDocker(1)]).toEqual([null, undefined]);
	});
});
