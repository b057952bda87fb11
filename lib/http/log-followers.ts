import { PassThrough, type Readable } from "stream";
import { FrameReader, type LogStream } from "../documents/log-frames";

/** What a follower asked for: one output or both, and how much of what came before. */
export interface FollowRequest {
	/** null: stdout and stderr, in the order written */
	stream: LogStream | null;
	/** the last lines of what was written before (null: all the agent keeps, its log tail) */
	tailLines: number | null;
}

interface Follower {
	out: PassThrough;
	request: FollowRequest;
}

/** One execution's stream from its agent, shared by this process's followers of it. */
interface Hub {
	jobExeId: number;
	source: Readable;
	/** what was written, both outputs in order, up to historyBytes (a late follower starts with it) */
	history: { stream: LogStream; data: Buffer }[];
	historySize: number;
	/** the agent has sent what was written before: followers may join */
	live: boolean;
	waiting: Follower[];
	followers: Set<Follower>;
}

/**
 * Followers of running executions' logs in one process: each execution's agent stream
 * (`open`, node-agent.followLogs) is opened once, whatever the number of followers here, and
 * every follower gets what was written before it came (the last `tailLines`, or all this process
 * holds) and then each byte as it arrives, as plain text; every follower's stream ends when the
 * agent's does (the execution ended). The agent's stream is let go once the last follower here
 * leaves.
 */
export class LogFollowers {
	private readonly hubs = new Map<number, Hub>();
	private readonly opening = new Map<number, Promise<Hub>>();

	constructor(
		private readonly open: (jobExeId: number) => Promise<Readable>,
		private readonly historyBytes = 512 * 1024
	) {}

	/** The number of agent streams open (one per execution followed). */
	get streams(): number {
		return this.hubs.size;
	}

	async follow(jobExeId: number, request: FollowRequest): Promise<Readable> {
		let hub = this.hubs.get(jobExeId);
		if (!hub) {
			// followers that come while the agent's stream is being opened wait for that one
			let opening = this.opening.get(jobExeId);
			if (!opening) {
				opening = this.open(jobExeId).then(
					source => this.start(jobExeId, source),
					error => {
						this.opening.delete(jobExeId);
						throw error;
					}
				);
				this.opening.set(jobExeId, opening);
			}
			hub = await opening;
		}
		const follower: Follower = { out: new PassThrough(), request };
		follower.out.on("close", () => this.leave(jobExeId, follower));
		if (hub.live) this.join(hub, follower);
		else hub.waiting.push(follower);
		return follower.out;
	}

	private start(jobExeId: number, source: Readable): Hub {
		const hub: Hub = {
			jobExeId,
			source,
			history: [],
			historySize: 0,
			live: false,
			waiting: [],
			followers: new Set()
		};
		this.hubs.set(jobExeId, hub);
		this.opening.delete(jobExeId);
		const reader = new FrameReader();
		source.on("data", (chunk: Buffer) => {
			for (const frame of reader.push(chunk)) {
				if (frame.stream === "live") {
					this.goLive(hub);
					continue;
				}
				const entry = { stream: frame.stream, data: Buffer.from(frame.data) };
				this.remember(hub, entry);
				if (!hub.live) continue;
				for (const f of hub.followers)
					if (f.request.stream === null || f.request.stream === entry.stream)
						f.out.write(entry.data);
			}
		});
		const finish = () => {
			if (this.hubs.get(jobExeId) !== hub) return;
			this.hubs.delete(jobExeId);
			this.goLive(hub);
			for (const f of hub.followers) f.out.end();
			hub.followers.clear();
		};
		source.on("end", finish);
		source.on("close", finish);
		source.on("error", finish);
		return hub;
	}

	private goLive(hub: Hub): void {
		if (hub.live) return;
		hub.live = true;
		for (const f of hub.waiting) this.join(hub, f);
		hub.waiting = [];
	}

	private join(hub: Hub, follower: Follower): void {
		const { stream, tailLines } = follower.request;
		const before = Buffer.concat(
			hub.history.filter(h => stream === null || h.stream === stream).map(h => h.data)
		);
		const first = tailLines === null ? before : lastLines(before, tailLines);
		if (first.length > 0) follower.out.write(first);
		// a hub whose source has ended has nothing more to send
		if (this.hubs.get(hub.jobExeId) === hub) hub.followers.add(follower);
		else follower.out.end();
	}

	private remember(hub: Hub, entry: { stream: LogStream; data: Buffer }): void {
		hub.history.push(entry);
		hub.historySize += entry.data.length;
		while (hub.historySize > this.historyBytes && hub.history.length > 1)
			hub.historySize -= hub.history.shift()!.data.length;
	}

	private leave(jobExeId: number, follower: Follower): void {
		const hub = this.hubs.get(jobExeId);
		if (!hub) return;
		hub.followers.delete(follower);
		hub.waiting = hub.waiting.filter(f => f !== follower);
		if (hub.followers.size === 0 && hub.waiting.length === 0) {
			this.hubs.delete(jobExeId);
			hub.source.destroy();
		}
	}
}

/** The last `n` lines of `text` (a last line without its newline counts). */
export function lastLines(text: Buffer, n: number): Buffer {
	if (n <= 0) return Buffer.alloc(0);
	let end = text.length;
	if (end > 0 && text[end - 1] === 0x0a) end--;
	let at = end;
	for (let seen = 0; at > 0;) {
		const nl = text.lastIndexOf(0x0a, at - 1);
		if (nl < 0) return text;
		seen++;
		if (seen === n) return text.subarray(nl + 1);
		at = nl;
	}
	return text;
}
