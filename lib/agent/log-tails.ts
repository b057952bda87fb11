import type { Readable } from "stream";
import { LogTail } from "./log-tail";

/** What following an execution's logs needs of it. */
export interface FollowedExecution {
	stdoutPath: string;
	stderrPath: string;
	/** settles when the execution ends (the followers' streams end with it) */
	run(): Promise<unknown>;
}

/**
 * The live logs an agent sends: one tail per execution followed (lib/agent/log-tail.ts), shared
 * by all its readers, and one stream per reader (the calling node) and execution.
 */
export class LogTails {
	/** the executions whose logs are followed, one tail each */
	private readonly tails = new Map<number, LogTail>();
	/** each reader's stream of an execution's logs, to let go of */
	private readonly followed = new Map<string, { tail: LogTail; out: Readable }>();

	/** how much of each file a new follower is sent first */
	constructor(private readonly historyBytes: number) {}

	/**
	 * A follower of an execution's logs as they are written (frames), ending when the execution
	 * ends. All followers of one execution share one watch and one read of its files.
	 */
	follow(jobExeId: number, execution: FollowedExecution, reader: string): Readable {
		let tail = this.tails.get(jobExeId);
		if (!tail) {
			tail = new LogTail(
				{
					stdoutPath: execution.stdoutPath,
					stderrPath: execution.stderrPath,
					finished: execution.run(),
					historyBytes: this.historyBytes
				},
				() => this.tails.delete(jobExeId)
			);
			this.tails.set(jobExeId, tail);
		}
		// one stream per reader and execution: a reader that opens another lets go of the first
		const key = `${reader}\u0000${jobExeId}`;
		this.unfollow(jobExeId, reader);
		const out = tail.follow();
		this.followed.set(key, { tail, out });
		out.on("close", () => {
			if (this.followed.get(key)?.out === out) this.followed.delete(key);
		});
		return out;
	}

	/**
	 * Ends `reader`'s stream of an execution's logs (its last follower left): the files are
	 * read no more once no reader follows them. False when it had none.
	 */
	unfollow(jobExeId: number, reader: string): boolean {
		const key = `${reader}\u0000${jobExeId}`;
		const followed = this.followed.get(key);
		if (!followed) return false;
		this.followed.delete(key);
		followed.tail.release(followed.out);
		return true;
	}

	/** A reader gone (its node left the cluster): its streams end. */
	readerGone(reader: string): void {
		for (const key of [...this.followed.keys()])
			if (key.startsWith(`${reader}\u0000`))
				this.unfollow(Number(key.slice(reader.length + 1)), reader);
	}

	/** The executions whose files are watched (one tail each, whatever its readers). */
	get size(): number {
		return this.tails.size;
	}

	/** The tail of an execution's logs, while one is followed. */
	get(jobExeId: number): LogTail | undefined {
		return this.tails.get(jobExeId);
	}

	/** The streams of followed logs sent (one per reader and execution). */
	get streams(): number {
		return this.followed.size;
	}
}
