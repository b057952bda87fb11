import { forwardedBaseUrl, isHostAndPort, listeningUrl } from "../../lib/http/public-url";

describe("listeningUrl", () => {
	it("writes the address the gateway listens on, IPv6 in brackets", () => {
		expect(listeningUrl({ address: "127.0.0.1", family: "IPv4", port: 8000 })).toBe(
			"http://127.0.0.1:8000"
		);
		expect(listeningUrl({ address: "::1", family: "IPv6", port: 41234 })).toBe(
			"http://[::1]:41234"
		);
	});
});

describe("isHostAndPort", () => {
	it.each([
		"scale.example.com",
		"Scale.Example.com:8443",
		"localhost",
		"10.0.0.5:80",
		"[::1]",
		"[2001:db8::1]:8000",
		"a-b.c1"
	])("takes %j", text => {
		expect(isHostAndPort(text)).toBe(true);
	});

	it.each([
		"",
		"evil.example/path",
		"evil.example?x",
		"user@evil.example",
		"evil.example:",
		"evil.example:0",
		"evil.example:65536",
		"-evil.example",
		"evil-.example",
		"evil..example",
		"[::1",
		"[not:an:address:zz]",
		"::1",
		"evil example",
		"evil.example\r\nX: y",
		`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}`
	])("refuses %j", text => {
		expect(isHostAndPort(text)).toBe(false);
	});
});

describe("forwardedBaseUrl", () => {
	const fallback = "http://127.0.0.1:8000";

	it("takes a proxy's scheme and host", () => {
		expect(
			forwardedBaseUrl(
				{
					host: "internal:8000",
					"x-forwarded-proto": "https",
					"x-forwarded-host": "a.example"
				},
				fallback
			)
		).toBe("https://a.example");
		expect(
			forwardedBaseUrl({ host: "B.example:8443", "x-forwarded-proto": "HTTPS" }, fallback)
		).toBe("https://b.example:8443");
	});

	it("takes the first of values a chain of proxies appended to", () => {
		expect(
			forwardedBaseUrl(
				{ "x-forwarded-proto": "https, http", "x-forwarded-host": "a.example, b.internal" },
				fallback
			)
		).toBe("https://a.example");
	});

	it.each([
		["javascript", "evil.example", "http://evil.example"],
		["https", "evil.example/x", "https://127.0.0.1:8000"],
		["javascript://evil.example/", "evil.example?", "http://127.0.0.1:8000"],
		[undefined, undefined, "http://127.0.0.1:8000"]
	])("keeps the fallback's part for scheme %j or host %j", (proto, host, url) => {
		expect(forwardedBaseUrl({ "x-forwarded-proto": proto, host }, fallback)).toBe(url);
	});
});
