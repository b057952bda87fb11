import net from "net";

/** A TCP port free on loopback right now. */
export function freePort(): Promise<number> {
	return new Promise((resolve, reject) => {
		const server = net.createServer();
		server.once("error", reject);
		server.listen(0, "127.0.0.1", () => {
			const { port } = server.address() as net.AddressInfo;
			server.close(() => resolve(port));
		});
	});
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
 * The first of `count` consecutive TCP ports free on loopback right now, for a process that
 * takes a run of ports from one (`npm run cluster`'s control planes). Drawn below Linux's
 * ephemeral range (32768 and up), where `freePort` and every outgoing connection take theirs:
 * the run's later ports, unprobed by the kernel's choice, could otherwise be taken meanwhile.
 */
export async function freePortRun(count: number): Promise<number> {
	for (let attempt = 0; attempt < 100; attempt++) {
		const first = 20000 + Math.floor(Math.random() * (32000 - 20000 - count));
		let free = true;
		for (let i = 0; i < count && free; i++) free = await bindable(first + i);
		if (free) return first;
	}
	throw new Error(`no ${count} consecutive free ports on loopback`);
}
