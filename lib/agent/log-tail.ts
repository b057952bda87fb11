import fs from "fs";
import path from "path";
import { PassThrough, type Readable } from "stream";
import { encodeFrame, type LogStream } from "../documents/log-frames";
import { openAgentFile, ReplacedFileError } from "./files";

export interface LogTailOptions {
	/** the task's stdout and stderr files */
	stdoutPath: string;
	stderrPath: string;
	/** settles when the execution has ended (its process gone, its logs final) */
	finished: Promise<unknown>;
	/** how much of each output a follower gets first (what was written before it came) */
	historyBytes: number;
	/** a follower more than this behind (a slow reader) is ended rather than buffered */
	maxBufferedBytes?: number;
	/** reads without an event at least this often (an event missed, a file made late) */
	safetyReadMs?: number;
	/**
	 * how long a write's event waits for the writes after it before the files are read: a job
	 * printing a line a millisecond is sent in a few dozen chunks a second, not a thousand
	 */
	gatherMs?: number;
}

const STREAMS: LogStream[] = ["stdout", "stderr"];
const READ_CHUNK = 256 * 1024;

/**
 * Follows one execution's stdout and stderr as they are written, for any number of followers:
 * one watch of the task directory (inotify) and one reader per file, whatever the followers;
 * each follower gets the tail written before it came, then every byte after, as frames
 * (lib/documents/log-frames.ts), and its stream ends once the execution has ended and the files
 * are read to their end. The files are opened as the agent's own (openAgentFile: a task cannot
 * swap a link in their place) and read through the same descriptor thereafter.
 */
export class LogTail {
	private readonly followers = new Set<PassThrough>();
	private readonly pos: Record<LogStream, number> = { stdout: 0, stderr: 0 };
	private readonly fds: Record<LogStream, number | null> = { stdout: null, stderr: null };
	/** reads and joins run one at a time, in order: no byte is sent twice or skipped */
	private chain: Promise<void> = Promise.resolve();
	private readQueued = false;
	private watcher: fs.FSWatcher | null = null;
	private timer: NodeJS.Timeout | null = null;
	private ended = false;
	private closed = false;
	private buffer: Buffer | null = null;
	/** followers whose history is still being read */
	private joining = 0;

	constructor(
		private readonly opts: LogTailOptions,
		/** called once every follower is gone, or the execution has ended */
		private readonly onClose: () => void = () => undefined
	) {
		this.watch();
		this.timer = setInterval(() => this.readSoon(), opts.safetyReadMs ?? 1000);
		this.timer.unref?.();
		opts.finished.then(
			() => this.end(),
			() => this.end()
		);
	}

	/** A new follower's stream of frames. */
	follow(): Readable {
		const out = new PassThrough();
		out.on("close", () => this.drop(out));
		this.joining++;
		this.enqueue(async () => {
			this.joining--;
			if (this.closed || out.destroyed || out.writableEnded) {
				if (!out.writableEnded) out.end();
				// its reader let go while it joined: the tail may have no follower left
				return this.drop(out);
			}
			await this.readNew();
			for (const stream of STREAMS) {
				const history = await this.readHistory(stream);
				if (history.length > 0) out.write(encodeFrame(stream, history));
			}
			out.write(encodeFrame("live"));
			if (this.ended) out.end();
			else this.followers.add(out);
		});
		return out;
	}

	/**
	 * Ends a follower's stream now, its reader having let go (an end, not a destroy: the stream's
	 * sender tells its receiver so); the tail closes with its last follower.
	 */
	release(out: Readable): void {
		if (!(out instanceof PassThrough)) return;
		this.followers.delete(out);
		if (!out.writableEnded) out.end();
		this.drop(out);
	}

	get followerCount(): number {
		return this.followers.size;
	}

	private watch(): void {
		if (this.watcher || this.closed) return;
		try {
			this.watcher = fs.watch(path.dirname(this.opts.stdoutPath), () => this.readSoon());
			this.watcher.on("error", () => {
				this.watcher?.close();
				this.watcher = null;
			});
		} catch {
			// the task directory is not made yet: the safety read tries again
		}
	}

	/**
	 * A write was seen: the watch is let go (a job printing a line a millisecond would wake the
	 * agent a thousand times a second), the files are read gatherMs later, and the watch is
	 * taken again first, so that no write after the read goes unseen.
	 */
	private readSoon(): void {
		if (this.readQueued || this.closed) return;
		this.readQueued = true;
		this.watcher?.close();
		this.watcher = null;
		setTimeout(() => {
			this.watch();
			this.enqueue(async () => {
				this.readQueued = false;
				await this.readNew();
			});
		}, this.opts.gatherMs ?? 20).unref?.();
	}

	private fd(stream: LogStream): number | null {
		if (this.fds[stream] === null) {
			try {
				this.fds[stream] = openAgentFile(
					stream === "stdout" ? this.opts.stdoutPath : this.opts.stderrPath
				);
			} catch (error) {
				if (!(error instanceof ReplacedFileError)) throw error;
				// replaced by the task: followed no further
				this.fds[stream] = -1;
			}
		}
		const fd = this.fds[stream];
		return fd === null || fd < 0 ? null : fd;
	}

	/** Everything written since the last read, to every follower. */
	private async readNew(): Promise<void> {
		for (const stream of STREAMS) {
			const fd = this.fd(stream);
			if (fd === null) continue;
			for (;;) {
				// one buffer for every read (most reads are a few lines); each frame is a copy
				this.buffer ??= Buffer.allocUnsafe(READ_CHUNK);
				const n = await readAt(fd, this.buffer, this.pos[stream]);
				if (n === 0) break;
				this.pos[stream] += n;
				const frame = encodeFrame(stream, this.buffer.subarray(0, n));
				for (const out of this.followers) this.send(out, frame);
				if (n < READ_CHUNK) break;
			}
		}
	}

	/** The last historyBytes of what has been read of one output. */
	private async readHistory(stream: LogStream): Promise<Buffer> {
		const fd = this.fd(stream);
		if (fd === null || this.pos[stream] === 0) return Buffer.alloc(0);
		const length = Math.min(this.pos[stream], this.opts.historyBytes);
		const buffer = Buffer.alloc(length);
		let read = 0;
		while (read < length) {
			const n = await readAt(fd, buffer.subarray(read), this.pos[stream] - length + read);
			if (n === 0) break;
			read += n;
		}
		return buffer.subarray(0, read);
	}

	private send(out: PassThrough, frame: Buffer): void {
		if (out.writableLength > (this.opts.maxBufferedBytes ?? 16 * 1024 * 1024)) {
			out.destroy(new Error("the follower fell too far behind"));
			return;
		}
		out.write(frame);
	}

	private drop(out: PassThrough): void {
		this.followers.delete(out);
		if (this.followers.size === 0 && this.joining === 0 && !this.ended) this.close();
	}

	/** The execution has ended: the files are read to their end, and every follower ends. */
	private end(): void {
		this.enqueue(async () => {
			this.ended = true;
			await this.readNew().catch(() => undefined);
			for (const out of this.followers) out.end();
			this.followers.clear();
			this.close();
		});
	}

	/** Runs `work` after what is queued; a read that fails ends no one (the next one tries). */
	private enqueue(work: () => Promise<void>): void {
		this.chain = this.chain.then(work).catch(() => undefined);
	}

	private close(): void {
		if (this.closed) return;
		this.closed = true;
		this.watcher?.close();
		if (this.timer) clearInterval(this.timer);
		for (const stream of STREAMS) {
			const fd = this.fds[stream];
			if (fd !== null && fd >= 0) fs.closeSync(fd);
			this.fds[stream] = -1;
		}
		this.onClose();
	}
}

function readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
	return new Promise((resolve, reject) =>
		fs.read(fd, buffer, 0, buffer.length, position, (err, n) =>
			err ? reject(err) : resolve(n)
		)
	);
}
