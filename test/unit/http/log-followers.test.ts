import { PassThrough, type Readable } from "stream";
import { encodeFrame } from "../../../lib/documents/log-frames";
import {
	ExecutionWaits,
	openExecutionLog,
	type ExecutionState
} from "../../../lib/http/execution-waits";
import { LogFollowers, type OpenedLog } from "../../../lib/http/log-followers";

const tick = () => new Promise(r => setImmediate(r));

function read(stream: Readable): Promise<string> {
	return new Promise((resolve, reject) => {
		let text = "";
		stream.on("data", (b: Buffer) => (text += b.toString()));
		stream.on("end", () => resolve(text));
		stream.on("error", reject);
	});
}

describe("ExecutionWaits", () => {
	it("answers once the execution runs on an agent, read at the scheduler's word", async () => {
		let state: ExecutionState = { id: 7, status: "QUEUED", agent_id: null };
		const reads: number[][] = [];
		const waits = new ExecutionWaits(async ids => {
			reads.push(ids);
			return [state];
		}, 60000);
		const ran = waits.until(7);
		await tick();
		expect(waits.waiting).toBe(1);
		// another execution placed: not read
		waits.changed([8]);
		await tick();
		expect(reads).toEqual([[7]]);
		state = { id: 7, status: "RUNNING", agent_id: "agent-1" };
		waits.changed([8, 7]);
		expect(await ran).toEqual(state);
		expect(reads).toEqual([[7], [7]]);
		expect(waits.waiting).toBe(0);
	});

	it("answers an end before any run, and one gone, as ended", async () => {
		const waits = new ExecutionWaits(async () => [
			{ id: 1, status: "CANCELED", agent_id: null }
		]);
		expect((await waits.until(1)).status).toBe("CANCELED");
		const none = new ExecutionWaits(async () => []);
		expect((await none.until(2)).status).toBe("CANCELED");
	});

	it("forgets a wait whose signal aborts", async () => {
		const waits = new ExecutionWaits(async () => [{ id: 3, status: "QUEUED", agent_id: null }]);
		const abort = new AbortController();
		const waited = waits.until(3, abort.signal);
		await tick();
		abort.abort(new Error("gone"));
		await expect(waited).rejects.toThrow("gone");
		expect(waits.waiting).toBe(0);
	});
});

describe("openExecutionLog", () => {
	it("asks the agent again while it does not hold the run yet, then follows it", async () => {
		const source = new PassThrough();
		let asked = 0;
		const unfollowed: string[] = [];
		const opened = await openExecutionLog(
			{
				waits: new ExecutionWaits(async () => [
					{ id: 5, status: "RUNNING", agent_id: "a" }
				]),
				follow: async () => {
					if (++asked < 3) throw new Error("NOT_FOUND");
					return source;
				},
				unfollow: (id, agent) => unfollowed.push(`${agent}:${id}`),
				stored: async () => null,
				retryMs: 1
			},
			5,
			new AbortController().signal
		);
		expect(opened.source).toBe(source);
		expect(asked).toBe(3);
		opened.release!();
		expect(unfollowed).toEqual(["a:5"]);
	});

	it("gives an ended execution's stored logs as frames", async () => {
		const opened = await openExecutionLog(
			{
				waits: new ExecutionWaits(async () => [{ id: 6, status: "FAILED", agent_id: "a" }]),
				follow: async () => {
					throw new Error("not asked");
				},
				unfollow: () => undefined,
				stored: async () => ({ stdout: "out\n", stderr: "err\n" })
			},
			6,
			new AbortController().signal
		);
		const followers = new LogFollowers(async () => opened);
		expect(await read(followers.follow(6, { stream: null, tailLines: null }))).toBe(
			"out\nerr\n"
		);
	});
});

describe("LogFollowers", () => {
	/** A source opened when `open` is resolved, and what was let go of. */
	function opening() {
		let resolve!: (o: OpenedLog) => void;
		const signals: AbortSignal[] = [];
		const released: number[] = [];
		const followers = new LogFollowers((jobExeId, signal) => {
			signals.push(signal);
			return new Promise<OpenedLog>(r => (resolve = r));
		});
		const source = new PassThrough();
		const open = () => resolve({ source, release: () => released.push(1) });
		return { followers, signals, released, source, open };
	}

	it("answers a follower at once, and aborts the opening when the last one leaves", async () => {
		const { followers, signals } = opening();
		const a = followers.follow(1, { stream: null, tailLines: null });
		const b = followers.follow(1, { stream: null, tailLines: null });
		expect([followers.followed, followers.streams, signals.length]).toEqual([1, 0, 1]);
		a.destroy();
		await tick();
		expect(signals[0].aborted).toBe(false);
		b.destroy();
		await tick();
		expect(signals[0].aborted).toBe(true);
		expect(followers.followed).toBe(0);
	});

	it("lets go of the source when the last follower leaves, and of a caller's when it is gone", async () => {
		const { followers, released, source, open } = opening();
		const mine = followers.follow(2, { stream: "stdout", tailLines: null }, "repl-1");
		const other = followers.follow(2, { stream: "stdout", tailLines: null }, "api");
		open();
		await tick();
		source.write(encodeFrame("stdout", Buffer.from("before\n")));
		source.write(encodeFrame("live"));
		let got = "";
		other.on("data", (b: Buffer) => (got += b.toString()));
		followers.callerGone("repl-1");
		await tick();
		expect(mine.destroyed).toBe(true);
		expect(followers.streams).toBe(1);
		expect(released).toEqual([]);
		source.write(encodeFrame("stdout", Buffer.from("after\n")));
		await tick();
		expect(got).toBe("before\nafter\n");
		other.destroy();
		await tick();
		expect(released).toEqual([1]);
		expect(source.destroyed).toBe(true);
		expect(followers.streams).toBe(0);
	});
});
