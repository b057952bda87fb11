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

/** Slices of the range, one per Jest worker (jest.config.js runs two; more share by remainder). */
const SLICES = 4;

/**
 * Where this process draws its ports: the whole range, or in a Jest worker a slice of its own,
 * so that two test files running at once in two workers cannot draw the same port while a
 * server of one is still starting (PostgreSQL binds a second or two after its port is drawn).
 */
export function portRange(): [number, number] {
	const worker = Number(process.env.JEST_WORKER_ID);
	if (!Number.isInteger(worker) || worker < 1) return [20000, 32000];
	const size = (32000 - 20000) / SLICES;
	const low = 20000 + ((worker - 1) % SLICES) * size;
	return [low, low + size];
}

/**
 * The first of `count` consecutive TCP ports free on loopback right now, for a process that
 * takes a run of ports from one (`npm run cluster`'s control planes), and never handed out
 * before by this process. Drawn at random below Linux's ephemeral range (32768 and up), where
 * every outgoing connection takes its port: one could otherwise take a port between its choice
 * and the server's start.
 */
export async function freePortRun(count: number): Promise<number> {
	const [low, high] = portRange();
	for (let attempt = 0; attempt < 100; attempt++) {
		const first = low + Math.floor(Math.random() * (high - low - count));
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
