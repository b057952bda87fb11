/** What the gateway puts in ctx.meta for actions answering a REST request. */
export interface RequestMeta {
	/** `http://host:port` as the client addressed us */
	baseUrl?: string;
	/** the API root the request came through, e.g. `http://host:port/api/v3` */
	apiRoot?: string;
	/** the request path without its query, e.g. `/api/errors/` */
	path?: string;
	/** the request's query parameters as parsed (repeated ones as arrays) */
	query?: Record<string, unknown>;
	/**
	 * the action the gateway called: that action may answer JSON text (with `$responseType`)
	 * instead of an object, which the gateway sends as it is; any other caller gets objects
	 */
	jsonTextFor?: string;
	/** set by an action: the status to answer with */
	$statusCode?: number;
	/** set by an action: a path under the API root for the `Location` header, e.g. `/errors/5/` */
	$location?: string;
	$responseType?: string;
	/** set by an action: further response headers */
	$responseHeaders?: Record<string, string>;
}
