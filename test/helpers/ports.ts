import net from "net";

/**
 * A TCP port free on loopback right now, for a server a test or bench starts (PostgreSQL, NATS,
 * the API). Drawn below Linux's ephemeral range (see freePortRun): a port the kernel hands out
 * for listening is also one it hands out to outgoing connections, and a CI run failed on
 * PostgreSQL's "could not bind ... Address already in use" when one took it between the choice
 * and the server's start.
 */
export function freePort(): Promise<number> {
	return freePortRun(1);
}

/** Whether `port` can be listened on on loopback right now. */
function bindable(port: number): Promise<boolean> {
	return new Promise(resolve => {
		const server = net.createServer();
		server.once("error", () => resolve(false));
		server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
	});
}

/**
 * Ports this process has handed out. A port is free until its server binds it, so two draws
 * before either server started could give the same port twice (a CI run gave NATS the port of
 * the second control plane's API, drawn as the run after the first's).
 */
const handedOut = new Set<number>();

/**
 * The first of `count` consecutive TCP ports free on loopback right now, for a process that
 * takes a run of ports from one (`npm run cluster`'s control planes), and never handed out
 * before by this process. Drawn at random below Linux's ephemeral range (32768 and up), where
 * every outgoing connection takes its port: one could otherwise take a port between its choice
 * and the server's start.
 */
export async function freePortRun(count: number): Promise<number> {
	for (let attempt = 0; attempt < 100; attempt++) {
		const first = 20000 + Math.floor(Math.random() * (32000 - 20000 - count));
		const run = Array.from({ length: count }, (_, i) => first + i);
		if (run.some(port => handedOut.has(port))) continue;
		// taken before the checks' awaits, so a draw made meanwhile passes over them
		for (const port of run) handedOut.add(port);
		let free = true;
		for (let i = 0; i < count && free; i++) free = await bindable(run[i]);
		if (free) return first;
		for (const port of run) handedOut.delete(port);
	}
	throw new Error(`no ${count} consecutive free ports on loopback`);
}
