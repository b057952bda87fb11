import fs from "fs";
import path from "path";
import { Worker } from "worker_threads";
import {
	runFsRequest,
	type FsMove,
	type FsMoved,
	type FsReply,
	type FsRequest,
	type FsStat
} from "./fs-batch";

/**
 * A strike monitor's file-system calls, a batch per message to a thread of their own
 * (lib/ingest/fs-worker.ts), which makes them synchronously. Made one by one through libuv's
 * pool, each lstat, link and unlink cost the agent's main thread ~15–25 µs (a promise, a request,
 * a pool thread woken that took the cpu from it): a quarter of its time in a burst of files
 * (docs/decisions.md, "P5"). A file system that stalls (a network mount) stalls this thread,
 * not the agent's event loop.
 *
 * Run from the TypeScript sources (the tests), where there is no compiled worker to start, the
 * calls are made in the calling thread.
 */
export class FsThread {
	private worker: Worker | null = null;
	private readonly pending = new Map<
		number,
		{ worker: Worker; resolve: (reply: FsReply) => void; reject: (error: Error) => void }
	>();
	private next = 0;
	private readonly threaded: boolean;

	/** `script`: the compiled worker, beside this module unless given */
	constructor(private readonly script = path.join(__dirname, "fs-worker.js")) {
		this.threaded = fs.existsSync(script);
	}

	/** The size and kind of each path (null where there is nothing). */
	async lstat(paths: string[]): Promise<FsStat[]> {
		if (paths.length === 0) return [];
		return ((await this.ask({ kind: "lstat", paths })) as { stats: FsStat[] }).stats;
	}

	/** Each move done (see lib/ingest/move.ts), in order. */
	async move(moves: FsMove[]): Promise<FsMoved[]> {
		if (moves.length === 0) return [];
		return ((await this.ask({ kind: "move", moves })) as { moved: FsMoved[] }).moved;
	}

	/** Ends the thread; a later call starts another. */
	async stop(): Promise<void> {
		const worker = this.worker;
		this.worker = null;
		if (worker) await worker.terminate();
	}

	private ask(request: FsRequest): Promise<FsReply> {
		if (!this.threaded) return Promise.resolve(runFsRequest(request));
		const worker = this.started();
		const id = this.next++;
		return new Promise((resolve, reject) => {
			this.pending.set(id, { worker, resolve, reject });
			worker.postMessage({ id, request });
		});
	}

	private started(): Worker {
		if (this.worker) return this.worker;
		const worker = new Worker(this.script);
		worker.unref();
		worker.on("message", ({ id, reply, error }) => {
			const waiting = this.pending.get(id);
			this.pending.delete(id);
			if (error !== undefined) waiting?.reject(new Error(error));
			else waiting?.resolve(reply);
		});
		// a thread that ends fails what it was asked; the next call starts another
		const ended = (error: Error) => {
			if (this.worker === worker) this.worker = null;
			for (const [id, waiting] of this.pending)
				if (waiting.worker === worker) {
					this.pending.delete(id);
					waiting.reject(error);
				}
		};
		worker.on("error", ended);
		worker.on("exit", code => ended(new Error(`the file-system thread exited (${code})`)));
		this.worker = worker;
		return worker;
	}
}
