import http from "http";
import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { startServices, type TestApi } from "../helpers/broker";

/**
 * The absolute URLs the API writes (`Location`, list links) come from PUBLIC_URL or the address
 * it listens on, never from a client's `Host` or `X-Forwarded-Proto` unless TRUST_PROXY says a
 * proxy sets them, and then only well-formed ones.
 */

interface Answer {
	status: number;
	headers: http.IncomingHttpHeaders;
	body: any;
}

/** A request with headers fetch() would not send as given (`Host`). */
function send(
	url: string,
	method: string,
	headers: Record<string, string>,
	body?: unknown
): Promise<Answer> {
	return new Promise((resolve, reject) => {
		const data = body === undefined ? undefined : JSON.stringify(body);
		const req = http.request(
			url,
			{
				method,
				headers:
					data === undefined
						? headers
						: { ...headers, "Content-Type": "application/json" }
			},
			res => {
				let text = "";
				res.setEncoding("utf8");
				res.on("data", chunk => (text += chunk));
				res.on("end", () =>
					resolve({
						status: res.statusCode ?? 0,
						headers: res.headers,
						body: JSON.parse(text)
					})
				);
			}
		);
		req.on("error", reject);
		req.end(data);
	});
}

const FORGED = { Host: "evil.example", "X-Forwarded-Proto": "javascript" };

let tdb: TestDatabase;

beforeAll(async () => {
	tdb = await createTestDatabase();
});

afterAll(async () => {
	await tdb?.drop();
});

/** Creates an error through `api` with `headers` and lists errors a page of one at a time. */
async function locationAndNext(api: string, headers: Record<string, string>) {
	const created = await send(`${api}/errors/`, "POST", headers, {
		name: `e-${Math.random().toString(36).slice(2, 10)}`,
		category: "DATA"
	});
	expect(created.status).toBe(201);
	const list = await send(`${api}/v3/errors/?page_size=1&page=2`, "GET", headers);
	expect(list.status).toBe(200);
	return {
		id: created.body.id as number,
		location: created.headers.location,
		next: list.body.next as string,
		previous: list.body.previous as string
	};
}

describe("without PUBLIC_URL", () => {
	let app: TestApi;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors"]);
	});

	afterAll(async () => {
		await app?.stop();
	});

	it("writes the address it listens on, whatever Host and X-Forwarded-Proto say", async () => {
		const origin = new URL(app.api).origin;
		const { id, location, next, previous } = await locationAndNext(app.api, FORGED);
		expect(location).toBe(`${origin}/api/errors/${id}/`);
		expect(next).toBe(`${origin}/api/v3/errors/?page_size=1&page=3`);
		expect(previous).toBe(`${origin}/api/v3/errors/?page_size=1&page=1`);
	});
});

describe("with PUBLIC_URL", () => {
	let app: TestApi;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors"], {
			PUBLIC_URL: "https://scale.example.com/",
			// the configured URL wins over a proxy's headers too
			TRUST_PROXY: "true"
		});
	});

	afterAll(async () => {
		await app?.stop();
	});

	it("writes the configured URL, whatever Host and X-Forwarded-Proto say", async () => {
		const { id, location, next } = await locationAndNext(app.api, {
			...FORGED,
			"X-Forwarded-Host": "evil.example"
		});
		expect(location).toBe(`https://scale.example.com/api/errors/${id}/`);
		expect(next).toBe("https://scale.example.com/api/v3/errors/?page_size=1&page=3");
	});
});

describe("with TRUST_PROXY", () => {
	let app: TestApi;
	let origin: URL;

	beforeAll(async () => {
		app = await startServices(tdb.url, ["api", "errors"], { TRUST_PROXY: "true" });
		origin = new URL(new URL(app.api).origin);
	});

	afterAll(async () => {
		await app?.stop();
	});

	it("writes the scheme and host the proxy names", async () => {
		const { id, location, next } = await locationAndNext(app.api, {
			Host: "scale.example.com:8443",
			"X-Forwarded-Proto": "https"
		});
		expect(location).toBe(`https://scale.example.com:8443/api/errors/${id}/`);
		expect(next).toBe("https://scale.example.com:8443/api/v3/errors/?page_size=1&page=3");
		const forwarded = await locationAndNext(app.api, {
			Host: "internal:8000",
			"X-Forwarded-Host": "scale.example.com",
			"X-Forwarded-Proto": "https, http"
		});
		expect(forwarded.location).toBe(`https://scale.example.com/api/errors/${forwarded.id}/`);
	});

	it("ignores a scheme other than http or https and a malformed host", async () => {
		const badScheme = await locationAndNext(app.api, {
			Host: "scale.example.com",
			"X-Forwarded-Proto": "javascript"
		});
		expect(badScheme.location).toBe(`http://scale.example.com/api/errors/${badScheme.id}/`);
		expect(badScheme.next).toMatch(/^http:\/\/scale\.example\.com\/api\/v3\/errors\//);

		const badHost = await locationAndNext(app.api, {
			Host: "evil.example/x?",
			"X-Forwarded-Proto": "https"
		});
		expect(badHost.location).toBe(`https://${origin.host}/api/errors/${badHost.id}/`);
	});
});
