import fs from "fs";
import net from "net";
import path from "path";
import { PassThrough, Readable } from "stream";
import type { Middleware, ServiceBroker } from "moleculer";

/**
 * How `npm run repl` attaches to a running `npm start` on the same machine: the service listens
 * on a unix socket in its data folder, `repl.sock`, made with mode 0600 (under a umask of 077):
 * the kernel lets only the user that runs the service (and root) connect, so the check is the
 * operating system's, and nothing is to be set up or kept secret. Over it, the REPL's calls of
 * the service's actions, one JSON line each way; a streamed answer (a followed log) comes as
 * chunks until its end.
 */

export function replSocketPath(dataDir: string): string {
	return path.join(dataDir, "repl.sock");
}

interface Request {
	id: number;
	action: string;
	params?: unknown;
}

type Answer =
	| { id: number; result: unknown }
	| { id: number; error: { message: string; type?: string; code?: number } }
	| { id: number; stream: true }
	| { id: number; chunk: string }
	| { id: number; end: true; error?: string };

/** Serves the broker's actions on the socket; answers a function that stops serving. */
export async function serveReplSocket(
	broker: ServiceBroker,
	dataDir: string
): Promise<() => Promise<void>> {
	const file = replSocketPath(dataDir);
	fs.mkdirSync(dataDir, { recursive: true });
	// a socket left by a service that did not stop (the data folder is this process's)
	fs.rmSync(file, { force: true });
	const server = net.createServer(socket => serveConnection(broker, socket));
	const umask = process.umask(0o077);
	try {
		await new Promise<void>((resolve, reject) => {
			server.once("error", reject);
			server.listen(file, () => resolve());
		});
	} finally {
		process.umask(umask);
	}
	fs.chmodSync(file, 0o600);
	server.on("error", err => broker.logger.warn({ err }, "REPL socket"));
	return () =>
		new Promise(resolve => {
			server.close(() => resolve());
			fs.rmSync(file, { force: true });
		});
}

function serveConnection(broker: ServiceBroker, socket: net.Socket): void {
	const send = (answer: Answer) => {
		if (!socket.destroyed) socket.write(`${JSON.stringify(answer)}\n`);
	};
	const streams = new Set<Readable>();
	socket.on("close", () => {
		for (const s of streams) s.destroy();
	});
	socket.on("error", () => undefined);
	lines(socket, line => {
		let request: Request;
		try {
			request = JSON.parse(line);
		} catch {
			socket.destroy();
			return;
		}
		broker
			.call(request.action, request.params ?? {})
			.then(result => {
				if (!(result instanceof Readable)) return send({ id: request.id, result });
				streams.add(result);
				send({ id: request.id, stream: true });
				result.on("data", (chunk: Buffer) =>
					send({ id: request.id, chunk: Buffer.from(chunk).toString("base64") })
				);
				const done = (err?: Error) => {
					if (!streams.delete(result)) return;
					send({ id: request.id, end: true, ...(err ? { error: err.message } : {}) });
				};
				result.on("end", () => done());
				result.on("close", () => done());
				result.on("error", err => done(err));
			})
			.catch((err: any) =>
				send({
					id: request.id,
					error: {
						message: String(err?.message ?? err),
						type: err?.type,
						code: err?.code
					}
				})
			);
	});
}

function lines(socket: net.Socket, onLine: (line: string) => void): void {
	let rest = "";
	socket.setEncoding("utf8");
	socket.on("data", (text: string) => {
		const parts = (rest + text).split("\n");
		rest = parts.pop()!;
		for (const line of parts) if (line) onLine(line);
	});
}

/** The REPL's side: a connection to a running service's socket. */
export class ReplSocketClient {
	private nextId = 1;
	private readonly pending = new Map<
		number,
		{ resolve(value: unknown): void; reject(err: Error): void; stream?: PassThrough }
	>();

	private constructor(private readonly socket: net.Socket) {
		lines(socket, line => this.receive(JSON.parse(line) as Answer));
		socket.on("close", () => {
			for (const p of this.pending.values()) {
				p.reject(new Error("the service closed the connection"));
				p.stream?.destroy(new Error("the service closed the connection"));
			}
			this.pending.clear();
		});
	}

	/**
	 * Connects to the socket: null when no service listens there (none, or it stopped); a
	 * refusal by the kernel (another user's service) is thrown as it is (EACCES).
	 */
	static async connect(file: string): Promise<ReplSocketClient | null> {
		return new Promise((resolve, reject) => {
			const socket = net.connect(file);
			socket.once("connect", () => resolve(new ReplSocketClient(socket)));
			socket.once("error", (err: NodeJS.ErrnoException) => {
				if (err.code === "ENOENT" || err.code === "ECONNREFUSED") resolve(null);
				else reject(err);
			});
		});
	}

	call(action: string, params: unknown): Promise<unknown> {
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			this.pending.set(id, { resolve, reject });
			this.socket.write(`${JSON.stringify({ id, action, params } satisfies Request)}\n`);
		});
	}

	private receive(answer: Answer): void {
		const p = this.pending.get(answer.id);
		if (!p) return;
		if ("result" in answer) {
			this.pending.delete(answer.id);
			p.resolve(answer.result);
		} else if ("error" in answer && !("end" in answer)) {
			this.pending.delete(answer.id);
			const err = new Error(answer.error.message) as Error & { type?: string; code?: number };
			err.type = answer.error.type;
			err.code = answer.error.code;
			p.reject(err);
		} else if ("stream" in answer) {
			p.stream = new PassThrough();
			p.resolve(p.stream);
		} else if ("chunk" in answer) {
			p.stream?.write(Buffer.from(answer.chunk, "base64"));
		} else if ("end" in answer) {
			this.pending.delete(answer.id);
			if (answer.error) p.stream?.destroy(new Error(answer.error));
			else p.stream?.end();
		}
	}

	close(): void {
		this.socket.end();
	}

	/** A middleware sending the broker's calls to the service (the REPL's broker runs none). */
	middleware(): Middleware {
		return {
			name: "ReplSocket",
			call: () => (action: string, params: unknown) => this.call(action, params)
		} as unknown as Middleware;
	}
}
