import fs from "fs";
import os from "os";
import path from "path";
import {
	describeTransporter,
	natsClientOptions,
	NATS_RECONNECT,
	parseTransporter,
	TransporterError
} from "../../lib/transport/nats";

describe("parseTransporter", () => {
	it("is null without TRANSPORTER", () => {
		expect(parseTransporter({})).toBeNull();
	});

	it("takes a user and password out of the URL, leaving host:port", () => {
		const config = parseTransporter({ TRANSPORTER: "nats://alice:p%40ss@nats.local:4333" })!;
		expect(config).toEqual({ servers: ["nats.local:4333"], user: "alice", pass: "p@ss" });
		expect(describeTransporter(config)).toBe("NATS nats.local:4333 (user alice)");
		expect(describeTransporter(config)).not.toContain("p@ss");
	});

	it("reads a token from the URL and several servers", () => {
		expect(parseTransporter({ TRANSPORTER: "nats://t0k3n@a:4222,nats://b" })).toEqual({
			servers: ["a:4222", "b:4222"],
			token: "t0k3n"
		});
	});

	it("lets NATS_USER, NATS_PASSWORD and NATS_TOKEN override the URL", () => {
		expect(
			parseTransporter({
				TRANSPORTER: "nats://x:y@h:1",
				NATS_USER: "agent",
				NATS_PASSWORD: "pw"
			})
		).toEqual({ servers: ["h:1"], user: "agent", pass: "pw" });
		expect(parseTransporter({ TRANSPORTER: "nats://h", NATS_TOKEN: "tk" })).toEqual({
			servers: ["h:4222"],
			token: "tk"
		});
	});

	it("asks for TLS with tls://, NATS_TLS or certificate files", () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nats-tls-"));
		const ca = path.join(dir, "ca.pem");
		fs.writeFileSync(ca, "x");
		expect(parseTransporter({ TRANSPORTER: "tls://h:4443" })!.tls).toEqual({});
		expect(parseTransporter({ TRANSPORTER: "nats://h", NATS_TLS: "true" })!.tls).toEqual({});
		const config = parseTransporter({ TRANSPORTER: "nats://h", NATS_TLS_CA: ca })!;
		expect(config.tls).toEqual({ caFile: ca });
		expect(natsClientOptions(config)).toEqual({
			servers: ["h:4222"],
			...NATS_RECONNECT,
			tls: { caFile: ca }
		});
		expect(describeTransporter(config)).toBe("NATS h:4222 (no credentials, TLS)");
		fs.rmSync(dir, { recursive: true });
	});

	it.each([
		[{ TRANSPORTER: "redis://h:6379" }, /nats:\/\//],
		[{ TRANSPORTER: "h:4222" }, /nats:\/\//],
		[{ TRANSPORTER: "nats://h", NATS_USER: "u" }, /NATS_PASSWORD/],
		[{ TRANSPORTER: "nats://u:p@h", NATS_TOKEN: "t" }, /not both/],
		[{ TRANSPORTER: "nats://h", NATS_TLS_CA: "/nonexistent/ca.pem" }, /NATS_TLS_CA/],
		[{ TRANSPORTER: "nats://h", NATS_TLS_CERT: __filename }, /NATS_TLS_KEY/]
	])("refuses %j", (env, message) => {
		expect(() => parseTransporter(env)).toThrow(TransporterError);
		expect(() => parseTransporter(env)).toThrow(message);
	});
});

describe("natsClientOptions", () => {
	it("reconnects for ever, every 250–500 ms: an outage of any length is survived", () => {
		const options = natsClientOptions({ servers: ["h:4222"] });
		expect(options.maxReconnectAttempts).toBe(-1);
		expect(options.reconnect).toBe(true);
		expect(Number(options.reconnectTimeWait) + Number(options.reconnectJitter)).toBe(500);
		expect(Number(options.reconnectTimeWait) + Number(options.reconnectJitterTLS)).toBe(500);
	});
});
