import type { Embedded } from "./embedded";
import { queryList } from "./params";
import type { CachedRecord } from "./record-cache";

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

/*
 * The rest of a list envelope's JSON after its head: the records, written from the cache in one
 * copy each (lib/list/cached-list.ts).
 */

const COMMA = Buffer.from(",");
const END = Buffer.from("]}");

/** Copies `part` into `out` at `offset`; answers the offset after it. */
export function put(out: Buffer, offset: number, part: Buffer): number {
	out.set(part, offset);
	return offset + part.length;
}

/** The start of an embedded member, e.g. `,"input_files":[`, by member. */
const memberOpens = new Map<string, Buffer>();
export function memberOpen(embedded: Embedded): Buffer {
	let open = memberOpens.get(embedded.member);
	if (open === undefined)
		memberOpens.set(embedded.member, (open = Buffer.from(`,"${embedded.member}":[`)));
	return open;
}

/** Records embedded in each record of a page, found: see Embedded. */
export interface EmbeddedFound {
	/** the member's start, e.g. `,"input_files":[` */
	open: Buffer;
	/** for each of the page's keys, the keys of the records it embeds, in order */
	inner: { __key: number }[][];
	found: Map<number, CachedRecord>;
}

/** The member each record of a page gets: its start, and for each record the JSON it holds. */
export interface Members {
	open: Buffer;
	inner: Buffer[][];
}

const MEMBER_END = Buffer.from("]}");

/** The envelope's JSON (see writeEnvelope) of the records of the keys found, in order. */
export function body(
	head: Buffer,
	keys: { __key: number }[],
	found: Map<number, CachedRecord>,
	embedded?: EmbeddedFound
): Buffer {
	const records: Buffer[] = [];
	const inner: Buffer[][] = [];
	keys.forEach(({ __key }, i) => {
		const record = found.get(__key)?.json;
		if (record === undefined) return;
		records.push(record);
		if (embedded !== undefined)
			inner.push(
				embedded.inner[i].flatMap(({ __key: key }) => {
					const json = embedded.found.get(key)?.json;
					return json === undefined ? [] : [json];
				})
			);
	});
	return writeEnvelope(head, records, embedded && { open: embedded.open, inner });
}

/**
 * The envelope's JSON: its head, each record (with, given `members`, the records it embeds as
 * its last member), its end, in one Buffer of their summed length: one copy of each record.
 */
export function writeEnvelope(head: Buffer, records: Buffer[], members?: Members): Buffer {
	let length = head.length + END.length + Math.max(records.length - 1, 0);
	records.forEach((record, i) => {
		length += record.length;
		if (members === undefined) return;
		const inner = members.inner[i];
		length += members.open.length - 1 + MEMBER_END.length + Math.max(inner.length - 1, 0);
		for (const json of inner) length += json.length;
	});
	const out = Buffer.allocUnsafe(length);
	let offset = put(out, 0, head);
	records.forEach((record, i) => {
		if (i > 0) out[offset++] = COMMA[0];
		if (members === undefined) {
			offset = put(out, offset, record);
			return;
		}
		// the record's JSON, then the member over its closing brace (no view made per record)
		offset = put(out, offset, record) - 1;
		offset = put(out, offset, members.open);
		members.inner[i].forEach((json, j) => {
			if (j > 0) out[offset++] = COMMA[0];
			offset = put(out, offset, json);
		});
		offset = put(out, offset, MEMBER_END);
	});
	return out.subarray(0, put(out, offset, END));
}
