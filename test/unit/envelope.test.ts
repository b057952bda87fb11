import { buildEnvelope } from "../../lib/list/envelope";

const base = {
	count: 250,
	pageSize: 100,
	results: [{ id: 1 }],
	baseUrl: "http://127.0.0.1:8000",
	path: "/api/errors/"
};

function links(page: number, hasMore: boolean, query: Record<string, unknown>) {
	const { next, previous } = buildEnvelope({ ...base, page, hasMore, query });
	return { next, previous };
}

describe("buildEnvelope", () => {
	it("passes count and results through", () => {
		const envelope = buildEnvelope({ ...base, page: 1, hasMore: false, query: {} });
		expect(envelope).toEqual({ count: 250, next: null, previous: null, results: [{ id: 1 }] });
	});

	it("links the next page on the first page when there are more rows", () => {
		expect(links(1, true, {})).toEqual({
			next: "http://127.0.0.1:8000/api/errors/?page=2",
			previous: null
		});
	});

	it("has no next page when there are no more rows, whatever the count says", () => {
		expect(links(3, false, { page: "3" }).next).toBeNull();
		expect(buildEnvelope({ ...base, count: 0, page: 1, hasMore: true, query: {} }).next).toBe(
			"http://127.0.0.1:8000/api/errors/?page=2"
		);
	});

	it("keeps page=1 in the link back to the first page", () => {
		expect(links(2, false, { page: "2" })).toEqual({
			next: null,
			previous: "http://127.0.0.1:8000/api/errors/?page=1"
		});
	});

	it("keeps other parameters, repeated ones repeated, in their order", () => {
		const query = { order: ["-name", "id"], page: "2", page_size: "10", name: "a b" };
		expect(links(2, true, query)).toEqual({
			next: "http://127.0.0.1:8000/api/errors/?order=-name&order=id&page=3&page_size=10&name=a+b",
			previous:
				"http://127.0.0.1:8000/api/errors/?order=-name&order=id&page=1&page_size=10&name=a+b"
		});
	});

	it("appends page when the query had none", () => {
		expect(links(1, true, { page_size: "10" }).next).toBe(
			"http://127.0.0.1:8000/api/errors/?page_size=10&page=2"
		);
	});

	it("URL-encodes values", () => {
		const query = { started: "2015-10-05T21:26:04+05:00", name: "a&b=c/d?é" };
		const url = new URL(links(1, true, query).next!);
		expect(url.search).toBe(
			"?started=2015-10-05T21%3A26%3A04%2B05%3A00&name=a%26b%3Dc%2Fd%3F%C3%A9&page=2"
		);
		expect(url.searchParams.get("started")).toBe(query.started);
		expect(url.searchParams.get("name")).toBe(query.name);
	});

	it("writes numbers and booleans as text, and drops absent values", () => {
		const query = { page_size: 10, is_builtin: false, gone: undefined };
		expect(links(1, true, query).next).toBe(
			"http://127.0.0.1:8000/api/errors/?page_size=10&is_builtin=false&page=2"
		);
	});

	it("keeps a parameter repeated more than 20 times, which qs gives as an object", () => {
		const ids = Array.from({ length: 22 }, (_, i) => String(i));
		const query = { id: Object.fromEntries(ids.map(id => [id, `v${id}`])) };
		const url = new URL(links(1, true, query).next!);
		expect(url.searchParams.getAll("id")).toEqual(ids.map(id => `v${id}`));
	});

	it("writes nested objects back in bracket syntax", () => {
		expect(links(1, true, { a: { b: "1", c: ["2", "3"] } }).next).toBe(
			"http://127.0.0.1:8000/api/errors/?a%5Bb%5D=1&a%5Bc%5D=2&a%5Bc%5D=3&page=2"
		);
	});

	it("ignores a trailing slash on the base URL", () => {
		const envelope = buildEnvelope({
			...base,
			baseUrl: "https://scale.example.com/",
			page: 1,
			hasMore: true,
			query: {}
		});
		expect(envelope.next).toBe("https://scale.example.com/api/errors/?page=2");
	});
});
