import {
	excludedTypes,
	fits,
	hasCapacity,
	matchBatch,
	type NodeSlot,
	type QueuedRow,
	type TypeLimits
} from "../../../lib/scheduling/matching";

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
