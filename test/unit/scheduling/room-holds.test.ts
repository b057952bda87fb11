import { RoomHolds } from "../../../lib/scheduling/room-holds";

/** Room held for the jobs an execution's end frees, on a clock the test moves. */
describe("RoomHolds", () => {
	let now = 0;
	const clock = () => now;
	const room = (cpus: number) => ({ cpus, mem: cpus * 64, disk: 0 });
	beforeEach(() => {
		now = 1000;
	});

	it("leaves a hold free to passes until its execution's report is recorded", () => {
		const holds = new RoomHolds(100, clock);
		holds.hold(1, 7, room(2));
		holds.hold(2, 7, room(1));
		holds.hold(3, 8, room(1));
		expect(holds.heldByNode(now).get(7)).toEqual({ cpus: 3, mem: 192, disk: 0 });
		expect(holds.heldByNode(now).get(8)).toEqual({ cpus: 1, mem: 64, disk: 0 });
		now += 10;
		holds.settle([1]);
		// a pass whose context went out before the settle still leaves it free, a later one not
		expect(holds.heldByNode(now - 5).get(7)?.cpus).toBe(3);
		now += 1;
		expect(holds.heldByNode(now).get(7)?.cpus).toBe(1);
	});

	it("lapses a hold after holdMs, unless a hand-off pinned it first", () => {
		const holds = new RoomHolds(100, clock);
		holds.hold(1, 7, room(1));
		holds.hold(2, 7, room(1));
		now += 50;
		expect(holds.pin([1])).toEqual(new Map([[7, room(1)]]));
		now += 100;
		// 2 lapsed: a hand-off finds only what it holds on its own, and passes use it again
		expect(holds.pin([2])).toEqual(new Map());
		expect(holds.heldByNode(now).get(7)?.cpus).toBe(1);
		// 1 stays held while its hand-off is in flight, and for passes that began before it ended
		const pinnedAt = now;
		now += 20;
		holds.settle([1]);
		expect(holds.heldByNode(pinnedAt).get(7)?.cpus).toBe(1);
		now += 1;
		expect(holds.heldByNode(now).get(7)).toBeUndefined();
	});

	it("forgets holds over before the oldest pass that could still count them", () => {
		const holds = new RoomHolds(100, clock);
		holds.hold(1, 7, room(1));
		holds.hold(2, 7, room(1));
		holds.hold(3, 7, room(0));
		expect(holds.size).toBe(2); // nothing to hold, nothing kept
		holds.settle([1]);
		now += 1;
		holds.forgetBefore(now);
		expect(holds.size).toBe(1);
		now += 200;
		holds.forgetBefore(now);
		expect(holds.size).toBe(0);
		// a report of a forgotten or unknown execution changes nothing
		holds.settle([1, 2, 99]);
		expect(holds.pin([1, 2, 99])).toEqual(new Map());
	});
});
