/**
 * The scheme, host and port the API writes its absolute URLs with (`Location`, list links, file
 * URLs). A client's own headers may not choose them: an attacker's `Host` and
 * `X-Forwarded-Proto` once made the API hand out `javascript://evil.example/...` links.
 */
import type { IncomingHttpHeaders } from "http";
import { isIPv6, type AddressInfo } from "net";

/** `http://host:port` of the address the gateway listens on, an IPv6 address in brackets. */
export function listeningUrl(address: AddressInfo): string {
	const host = isIPv6(address.address) ? `[${address.address}]` : address.address;
	return `http://${host}:${address.port}`;
}

const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const HOST_AND_PORT = new RegExp(
	`^(${LABEL}(?:\\.${LABEL})*|\\[([0-9a-f:.]+)\\])(?::(\\d{1,5}))?$`,
	"i"
);

/** Whether `text` is a host name, an IPv4 address or a bracketed IPv6 address, and maybe a port. */
export function isHostAndPort(text: string): boolean {
	const match = HOST_AND_PORT.exec(text);
	if (!match || match[1].length > 253) return false;
	if (match[2] !== undefined && !isIPv6(match[2])) return false;
	const port = match[3] === undefined ? 1 : Number(match[3]);
	return port >= 1 && port <= 65535;
}

/** The first value of a header each proxy of a chain may have appended to (`a, b`), trimmed. */
function firstValue(value: string | string[] | undefined): string {
	const text = Array.isArray(value) ? value[0] : value;
	return (text ?? "").split(",")[0].trim();
}

/**
 * The base URL a trusted proxy says the client addressed: the scheme of `X-Forwarded-Proto` when
 * it is http or https, the host of `X-Forwarded-Host` (else `Host`) when it is host[:port];
 * either part missing or malformed is `fallback`'s.
 */
export function forwardedBaseUrl(headers: IncomingHttpHeaders, fallback: string): string {
	const base = new URL(fallback);
	const proto = firstValue(headers["x-forwarded-proto"]).toLowerCase();
	const scheme = proto === "http" || proto === "https" ? proto : base.protocol.slice(0, -1);
	const named = firstValue(headers["x-forwarded-host"]) || firstValue(headers.host);
	const host = isHostAndPort(named) ? named.toLowerCase() : base.host;
	return `${scheme}://${host}`;
}
