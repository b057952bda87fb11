import autocannon from "autocannon";

/** What one load run measured. */
export interface Raw {
	rps: number;
	p50: number;
	p99: number;
	errors: number;
	non2xx: number;
	/** the status codes other than 2xx, with their counts, e.g. "404 x 41230" */
	codes: string;
	total: number;
}

/**
 * Runs `connections` clients against the API for `seconds`, each request's path under the API
 * drawn by `draw` (autocannon, kept-alive connections).
 */
export function run(
	api: string,
	draw: () => string,
	connections: number,
	seconds: number
): Promise<Raw> {
	const { origin, pathname } = new URL(api);
	return new Promise((resolve, reject) => {
		autocannon(
			{
				url: origin,
				connections,
				duration: seconds,
				requests: [
					{ method: "GET", setupRequest: req => ({ ...req, path: pathname + draw() }) }
				]
			},
			(err, r) => {
				if (err) return reject(err);
				const codes = Object.entries(r.statusCodeStats ?? {})
					.filter(([code]) => !code.startsWith("2"))
					.map(([code, stat]) => `${code} x ${stat.count ?? 0}`)
					.join(", ");
				resolve({
					rps: r.requests.average,
					p50: r.latency.p50,
					p99: r.latency.p99,
					errors: r.errors + r.timeouts,
					non2xx: r.non2xx,
					codes,
					total: r.requests.total
				});
			}
		);
	});
}
