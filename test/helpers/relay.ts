import net from "net";

/**
 * A TCP relay on a loopback port of its own to `target`, that a test cuts (every connection
 * through it dropped, both sides, new ones refused: PostgreSQL as its clients see it stopped)
 * and opens again. `open` may come first long after the relay is made: a server that comes up
 * late.
 */
export class Relay {
	private server: net.Server | null = null;
	private readonly sockets = new Set<net.Socket>();

	constructor(
		readonly port: number,
		private readonly target: { host: string; port: number }
	) {}

	async open(): Promise<void> {
		const server = net.createServer(client => {
			const upstream = net.connect(this.target.port, this.target.host);
			// As a TCP proxy does: a side reset resets the other, a side closed closes it. Piping alone
			// would leave the client's side open when the server resets (a backend terminated with
			// a query of ours unread), and its next query would wait forever.
			for (const [socket, other] of [
				[client, upstream],
				[upstream, client]
			]) {
				this.sockets.add(socket);
				socket.on("close", () => {
					this.sockets.delete(socket);
					other.end();
				});
				socket.on("error", () => other.destroy());
			}
			client.pipe(upstream).pipe(client);
		});
		await new Promise<void>(resolve => server.listen(this.port, "127.0.0.1", resolve));
		this.server = server;
	}

	/** Drops every connection through the relay and refuses new ones (ECONNREFUSED). */
	async cut(): Promise<void> {
		if (!this.server) return;
		const closed = new Promise(resolve => this.server?.close(resolve));
		for (const socket of this.sockets) socket.destroy();
		await closed;
		this.server = null;
	}
}
