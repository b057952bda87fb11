import net from "net";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startServices, type TestApi } from "../helpers/broker";

/**
 * Requests the gateway refuses on their headers alone (no token, an upload larger than any
 * allowed): answered before their bodies are read, on a connection then closed, so a client
 * cannot make the service read (or parse) a body it was never going to take.
 */

const MB = 1024 * 1024;

interface RawReply {
	/** the status of the answer, or null when none came */
	status: number | null;
	/** the answer's head and body as received */
	text: string;
	/** body bytes written before the server closed the connection */
	sent: number;
	/** whether the server closed the connection (rather than the test giving up) */
	closed: boolean;
}

/**
 * Sends `head`, then a body of `total` bytes made of `first` and then `chunk` repeated, at most one
 * chunk every 10 ms (a slow client), until the server closes the connection or 10 s pass. With
 * `chunked`, each write is framed as a chunk of a chunked body.
 */
function slowRequest(
	port: number,
	head: string,
	body: { first: Buffer; chunk: Buffer; total: number; chunked?: boolean }
): Promise<RawReply> {
	return new Promise(resolve => {
		const socket = net.connect(port, "127.0.0.1");
		let text = "";
		let sent = 0;
		let closed = false;
		const write = (data: Buffer) => {
			sent += data.length;
			if (!body.chunked) return socket.write(data);
			return socket.write(
				Buffer.concat([
					Buffer.from(`${data.length.toString(16)}\r\n`),
					data,
					Buffer.from("\r\n")
				])
			);
		};
		const finish = () => {
			clearInterval(writer);
			clearTimeout(giveUp);
			socket.destroy();
			const status = /^HTTP\/1\.1 (\d{3}) /.exec(text);
			resolve({ status: status ? Number(status[1]) : null, text, sent, closed });
		};
		socket.write(head);
		write(body.first);
		let waiting = false;
		const writer = setInterval(() => {
			if (waiting || socket.destroyed || sent >= body.total) return;
			if (!write(body.chunk.subarray(0, Math.min(body.chunk.length, body.total - sent)))) {
				waiting = true;
				socket.once("drain", () => (waiting = false));
			}
		}, 10);
		const giveUp = setTimeout(finish, 10000);
		socket.on("data", (data: Buffer) => (text += data.toString("latin1")));
		socket.on("error", () => undefined); // a write after the server's close: seen as "close"
		socket.on("close", () => {
			closed = true;
			finish();
		});
	});
}

/** A request head of `method path` with the given headers. */
function head(method: string, path: string, headers: Record<string, string | number>): string {
	const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
	return `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines.join("\r\n")}\r\n\r\n`;
}

/** The value of a header in a raw answer, lower-cased, or null. */
function header(text: string, name: string): string | null {
	const match = new RegExp(`^${name}: *(.*)$`, "im").exec(text.split("\r\n\r\n")[0]);
	return match ? match[1].trim().toLowerCase() : null;
}

const BOUNDARY = "----refusal-test";
const formStart = (field: string) =>
	Buffer.from(
		`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="big.json"\r\n` +
			"Content-Type: application/json\r\n\r\n["
	);

describe("requests refused before their bodies are read", () => {
	let tdb: TestDatabase;
	let app: TestApi;
	let port: number;
	const token = { Authorization: "Bearer t1" };

	beforeAll(async () => {
		tdb = await createTestDatabase();
		app = await startServices(
			tdb.url,
			["api", "errors", "status", "workspaces", "job-types", "recipe-types", "configuration"],
			{ API_TOKENS: "t1" }
		);
		port = Number(new URL(app.api).port);
	});

	afterAll(async () => {
		await app?.stop();
		await tdb?.drop();
	});

	/** A 50 MB JSON body nested 500,000 deep and more: its first megabyte at once, then slowly. */
	const deepJson = {
		first: Buffer.alloc(MB, "["),
		chunk: Buffer.alloc(64 * 1024, "["),
		total: 50 * MB
	};

	function expectRefused(reply: RawReply, status: number, sentBelow: number) {
		expect(reply.status).toBe(status);
		expect(header(reply.text, "connection")).toBe("close");
		// the server ended the connection while the body was still being sent
		expect(reply.closed).toBe(true);
		expect(reply.sent).toBeLessThan(sentBelow);
	}

	it("answers a deep 50 MB body without a token with 401 and closes the connection", async () => {
		const started = Date.now();
		const reply = await slowRequest(
			port,
			head("POST", "/api/errors/", {
				"Content-Type": "application/json",
				"Content-Length": deepJson.total
			}),
			deepJson
		);
		expectRefused(reply, 401, 10 * MB);
		expect(header(reply.text, "www-authenticate")).toMatch(/^bearer /);
		expect(reply.text).toMatch(/\{"detail":"Authentication credentials were not provided."\}/);
		expect(Date.now() - started).toBeLessThan(5000);
		// the gateway is none the worse for it
		const version = await fetch(`${app.api}/version/`, { headers: token });
		expect(version.status).toBe(200);
	});

	it("answers one sent without a length (chunked) the same way", async () => {
		const reply = await slowRequest(
			port,
			head("PUT", "/api/nodes/1/", {
				"Content-Type": "application/json",
				"Transfer-Encoding": "chunked"
			}),
			{ ...deepJson, chunked: true }
		);
		expectRefused(reply, 401, 10 * MB);
		// the spec's node endpoints answer in text/plain, refusals included
		expect(reply.text).toMatch(/credentials were not provided/);
	});

	it("answers a 1 GiB upload without a token with 401 and closes the connection", async () => {
		const reply = await slowRequest(
			port,
			head("POST", "/api/configuration/upload/", {
				"Content-Type": `multipart/form-data; boundary=${BOUNDARY}`,
				"Content-Length": 1024 * MB
			}),
			{ first: formStart("import"), chunk: Buffer.alloc(64 * 1024, " "), total: 1024 * MB }
		);
		expectRefused(reply, 401, 10 * MB);
	});

	it("answers a 1 GiB upload with a token with 400 before reading it", async () => {
		const reply = await slowRequest(
			port,
			head("POST", "/api/configuration/upload/", {
				...token,
				"Content-Type": `multipart/form-data; boundary=${BOUNDARY}`,
				"Content-Length": 1024 * MB
			}),
			{ first: formStart("import"), chunk: Buffer.alloc(64 * 1024, " "), total: 1024 * MB }
		);
		expectRefused(reply, 400, 10 * MB);
		expect(reply.text).toMatch(/larger than 5242880 bytes/);
	});

	it.each([
		["its file field", "import"],
		["another file field", "other"]
	])("stops reading a chunked upload past the largest file in %s with 400", async (_, field) => {
		const reply = await slowRequest(
			port,
			head("POST", "/api/configuration/upload/", {
				...token,
				"Content-Type": `multipart/form-data; boundary=${BOUNDARY}`,
				"Transfer-Encoding": "chunked"
			}),
			{
				first: formStart(field),
				chunk: Buffer.alloc(256 * 1024, " "),
				total: 1024 * MB,
				chunked: true
			}
		);
		expectRefused(reply, 400, 16 * MB);
		expect(reply.text).toMatch(/larger than 5242880 bytes/);
	});

	it("answers a body over the limit with a token with 413 and closes the connection", async () => {
		const reply = await slowRequest(
			port,
			head("POST", "/api/errors/", {
				...token,
				"Content-Type": "application/json",
				"Content-Length": deepJson.total
			}),
			deepJson
		);
		expectRefused(reply, 413, 10 * MB);
	});

	it("keeps the connection of a refused request without a body", async () => {
		const res = await fetch(`${app.api}/version/`);
		expect(res.status).toBe(401);
		expect(res.headers.get("connection")).not.toBe("close");
	});
});
