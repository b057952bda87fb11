import { queryList } from "./params";

export interface Envelope<T> {
	count: number;
	next: string | null;
	previous: string | null;
	results: T[];
}

export interface EnvelopeOptions<T> {
	count: number;
	page: number;
	pageSize: number;
	/** The caller fetched one row past the page and got it, so a next page exists. */
	hasMore: boolean;
	results: T[];
	/** Scheme, host and port, e.g. http://127.0.0.1:8000; a trailing slash is ignored. */
	baseUrl: string;
	/** e.g. /api/errors/ */
	path: string;
	/** The request's query as parsed, values strings or arrays of strings. */
	query: Record<string, unknown>;
}

/** Scale's paginated list envelope, with absolute next/previous links as Django REST framework gives. */
export function buildEnvelope<T>(opts: EnvelopeOptions<T>): Envelope<T> {
	const { count, page, hasMore, results } = opts;
	return {
		count,
		next: hasMore ? pageUrl(opts, page + 1) : null,
		previous: page > 1 ? pageUrl(opts, page - 1) : null,
		results
	};
}

/**
 * The envelope's JSON text up to its results' opening bracket (`{"count":…,"results":[`), for an
 * answer put together from JSON already made: `results` is the envelope's last member.
 */
export function envelopeHead(
	req: Pick<EnvelopeOptions<never>, "baseUrl" | "path" | "query">,
	paging: Pick<EnvelopeOptions<never>, "page" | "pageSize">,
	count: number,
	hasMore: boolean
): string {
	const { baseUrl, path, query } = req;
	const { page, pageSize } = paging;
	const envelope = buildEnvelope({
		count,
		page,
		pageSize,
		hasMore,
		results: [],
		baseUrl,
		path,
		query
	});
	return JSON.stringify(envelope).slice(0, -2);
}

/** The request's own URL with only `page` changed, kept where it was so links stay recognisable. */
function pageUrl(opts: EnvelopeOptions<unknown>, page: number): string {
	const params = new URLSearchParams();
	let pagePlaced = false;
	for (const [key, value] of Object.entries(opts.query)) {
		if (key === "page") {
			params.append("page", String(page));
			pagePlaced = true;
		} else {
			for (const [name, text] of queryEntries(key, value)) params.append(name, text);
		}
	}
	if (!pagePlaced) params.append("page", String(page));
	return `${opts.baseUrl.replace(/\/+$/, "")}${opts.path}?${params}`;
}

/** Repeated values stay repeated; nested objects go back to the bracket syntax qs parsed them from. */
function queryEntries(key: string, value: unknown): [string, string][] {
	return queryList(value).flatMap((item): [string, string][] => {
		if (typeof item === "object" && item !== null) {
			return Object.entries(item).flatMap(([sub, v]) => queryEntries(`${key}[${sub}]`, v));
		}
		return [[key, String(item)]];
	});
}
