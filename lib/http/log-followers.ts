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
	/** the node that asked (a REPL over NATS), to let go of when it leaves */
	caller: string;
}

/** An execution's log as `open` gives it. */
export interface OpenedLog {
	/**
	 * frames (lib/documents/log-frames.ts): what was written before, `live`, then each write;
	 * it ends when the execution has ended
	 */
	source: Readable;
	/** tells the sender this process follows no more (its last follower here left) */
	release?(): void;
}

/** One execution's log, shared by this process's followers of it. */
interface Hub {
	jobExeId: number;
	/** null while it is being opened (the execution may not run yet) */
	opened: OpenedLog | null;
	/** aborts the opening once no follower waits for it */
	abort: AbortController;
	/** what was written, both outputs in order, up to historyBytes (a late follower starts with it) */
	history: { stream: LogStream; data: Buffer }[];
	historySize: number;
	/** the source has sent what was written before: followers may join */
	live: boolean;
	waiting: Follower[];
	followers: Set<Follower>;
}

/**
 * Followers of executions' logs in one process: each execution's log is opened once (`open`:
 * it waits for the execution to run, then follows it on its agent, node-agent.followLogs),
 * whatever the number of followers here. A follower's stream is answered at once; it gets what
 * was written before it came (the last `tailLines`, or all this process holds) and then each
 * byte as it arrives, as plain text, and ends when the source does (the execution ended). When
 * the last follower here leaves, the opening is aborted or the source let go (`release`).
 */
export class LogFollowers {
	private readonly hubs = new Map<number, Hub>();

	constructor(
		private readonly open: (jobExeId: number, signal: AbortSignal) => Promise<OpenedLog>,
		private readonly onError: (jobExeId: number, error: unknown) => void = () => undefined,
		private readonly historyBytes = 512 * 1024
	) {}

	/** The number of sources open (one per execution followed). */
	get streams(): number {
		let n = 0;
		for (const hub of this.hubs.values()) if (hub.opened) n++;
		return n;
	}

	/** The number of executions followed, their source open or being opened. */
	get followed(): number {
		return this.hubs.size;
	}

	follow(jobExeId: number, request: FollowRequest, caller = ""): Readable {
		const hub = this.hubs.get(jobExeId) ?? this.start(jobExeId);
		const follower: Follower = { out: new PassThrough(), request, caller };
		follower.out.on("close", () => this.leave(hub, follower));
		if (hub.live) this.join(hub, follower);
		else hub.waiting.push(follower);
		return follower.out;
	}

	/**
	 * A caller's node left the cluster: its followers' streams go (a Moleculer stream's sender
	 * does not hear that its receiver is gone).
	 */
	callerGone(caller: string): void {
		for (const hub of [...this.hubs.values()])
			for (const f of [...hub.waiting, ...hub.followers])
				if (f.caller === caller) f.out.destroy();
	}

	private start(jobExeId: number): Hub {
		const hub: Hub = {
			jobExeId,
			opened: null,
			abort: new AbortController(),
			history: [],
			historySize: 0,
			live: false,
			waiting: [],
			followers: new Set()
		};
		this.hubs.set(jobExeId, hub);
		this.open(jobExeId, hub.abort.signal).then(
			opened => this.attach(hub, opened),
			error => {
				if (this.hubs.get(jobExeId) !== hub) return;
				this.hubs.delete(jobExeId);
				this.onError(jobExeId, error);
				for (const f of [...hub.waiting, ...hub.followers]) f.out.destroy(asError(error));
			}
		);
		return hub;
	}

	private attach(hub: Hub, opened: OpenedLog): void {
		const { source } = opened;
		if (this.hubs.get(hub.jobExeId) !== hub) {
			// every follower left while it was opened
			source.destroy();
			opened.release?.();
			return;
		}
		hub.opened = opened;
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
			if (this.hubs.get(hub.jobExeId) !== hub) return;
			this.hubs.delete(hub.jobExeId);
			this.goLive(hub);
			for (const f of hub.followers) f.out.end();
			hub.followers.clear();
		};
		source.on("end", finish);
		source.on("close", finish);
		source.on("error", finish);
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

	private leave(hub: Hub, follower: Follower): void {
		hub.followers.delete(follower);
		hub.waiting = hub.waiting.filter(f => f !== follower);
		if (hub.followers.size > 0 || hub.waiting.length > 0) return;
		if (this.hubs.get(hub.jobExeId) !== hub) return;
		this.hubs.delete(hub.jobExeId);
		if (!hub.opened) return hub.abort.abort();
		hub.opened.source.destroy();
		hub.opened.release?.();
	}
}

function asError(error: unknown): Error {
	return error instanceof Error ? error : new Error(String(error));
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
